"""Assembles the torch package torchnative runs: upstream's Python files with our _C.

Copies every Python file (and the data files the tree reads) of Debian's python3-torch
and the torchgen package into BUILD/pytree and byte-compiles them, leaving out upstream's compiled parts
(_C, _C_flatbuffer, the libtorch shared objects, functorch's extension). Our torch._C
extension and our libtorch_global_deps stand-in are installed in their place. Nothing
upstream is modified.

usage: assemble_torch.py UPSTREAM_SITE BUILD_DIR
"""
import compileall
import os
import shutil
import sys

# Compiled upstream artefacts the shim replaces or does without.
EXCLUDED_SUFFIXES = (".so", ".so.1", ".a", ".pyc")
EXCLUDED_DIRS = {"__pycache__", "include", "lib", "bin", "share", "test"}


def copy_tree(src, dst):
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in EXCLUDED_DIRS]
        rel = os.path.relpath(root, src)
        target = os.path.join(dst, rel)
        os.makedirs(target, exist_ok=True)
        for name in files:
            if name.endswith(EXCLUDED_SUFFIXES) or ".so." in name:
                continue
            source = os.path.join(root, name)
            dest = os.path.join(target, name)
            if not os.path.exists(dest) or os.path.getmtime(dest) < os.path.getmtime(source):
                shutil.copy2(source, dest)


def install(source, dest):
    """Copies source to dest through a new file renamed into place: a process that has
    dest's old library mapped keeps it intact (copying over it in place crashed running tests)."""
    partial = dest + ".partial"
    shutil.copy2(source, partial)
    os.replace(partial, dest)


def main(site, build):
    tree = os.path.join(build, "pytree")
    for package in ("torch", "torchgen"):
        copy_tree(os.path.join(site, package), os.path.join(tree, package))
    ext = [f for f in os.listdir(os.path.join(build, "shim")) if f.startswith("_C.") and f.endswith(".so")]
    if len(ext) != 1:
        sys.exit("assemble_torch: expected exactly one built _C extension in %s/shim, found %s" % (build, ext))
    install(os.path.join(build, "shim", ext[0]), os.path.join(tree, "torch", ext[0]))
    lib = os.path.join(tree, "torch", "lib")
    os.makedirs(lib, exist_ok=True)
    install(os.path.join(build, "shim", "libtorch_global_deps.so"), os.path.join(lib, "libtorch_global_deps.so"))
    # Byte-compile once, as Debian does when it installs python3-torch, so imports never
    # recompile (PYTHONDONTWRITEBYTECODE may be set where the tree is used).
    if not compileall.compile_dir(tree, quiet=1, workers=2):
        sys.exit("assemble_torch: byte-compiling the assembled tree failed")
    bin_dir = os.path.join(tree, "torch", "bin")
    os.makedirs(bin_dir, exist_ok=True)
    install(os.path.join(build, "shim", "torch_shm_manager"), os.path.join(bin_dir, "torch_shm_manager"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
