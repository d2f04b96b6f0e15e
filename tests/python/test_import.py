"""The assembled tree resolves to our extension, and upstream's Python imports on it."""
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UPSTREAM_TORCH = "/usr/lib/python3/dist-packages/torch"


def test_torch_resolves_to_our_tree_and_extension():
    import torch
    # The tree assembled in a build directory of this checkout: build/, or build-asan/ for the
    # sanitizer venv.
    tree = os.path.dirname(os.path.dirname(os.path.realpath(torch.__file__)))
    assert os.path.basename(tree) == "pytree" and os.path.dirname(os.path.dirname(tree)) == REPO, tree
    ext = os.path.realpath(torch._C.__file__)
    assert ext.startswith(os.path.join(tree, "torch")), ext
    assert not ext.startswith(UPSTREAM_TORCH)


def test_no_libtorch_is_mapped():
    # A fresh interpreter, so nothing imported by pytest plugins can interfere.
    code = ("import torch, torch.nn, torch.optim, torchvision, torchvision.models; "
            "print(open('/proc/self/maps').read())")
    maps = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    mapped = {line.split()[-1] for line in maps.splitlines() if "/" in line}
    upstream = [m for m in mapped if m.startswith(UPSTREAM_TORCH) or "libc10" in m
                or os.path.basename(m).startswith(("libtorch.so", "libtorch_cpu", "libtorch_python"))]
    assert upstream == [], upstream
    ours = [m for m in mapped if m.startswith(os.path.join(REPO, "build"))]
    assert any("/_C." in m for m in ours), ours


@pytest.mark.parametrize("module", [
    "torch.nn", "torch.nn.functional", "torch.optim", "torch.utils.data", "torch.distributed",
    "torch.autograd", "torch.fx", "torchvision", "torchvision.models",
])
def test_upstream_modules_import(module):
    # A fresh interpreter each: a failed `import torch` leaves a half-initialised module behind.
    subprocess.run([sys.executable, "-c", "import " + module], check=True, capture_output=True)


def test_unimplemented_operators_name_themselves():
    import torch
    x = torch.zeros(3, 3)
    for call, name in [
        (lambda: torch.cholesky(x), "aten::cholesky"),
        (lambda: torch.fft.fft(x), "aten::fft_fft"),
        (lambda: torch.unique(x, dim=0), "aten::unique_dim"),
        (lambda: torch.special.zeta(x, x), "aten::special_zeta"),
    ]:
        with pytest.raises(NotImplementedError, match=name):
            call()


def test_libraries_linked_against_libtorch_are_refused_by_name():
    # torchvision's compiled operators need upstream's libtorch: loading them would map a second
    # torch runtime, so the load fails with an OSError naming the library and its dependency,
    # and torchvision carries on without its C++ operators, as it does where libtorch is absent.
    code = ("import ctypes, glob, torch, torchvision, os\n"
            "lib = glob.glob(os.path.join(os.path.dirname(torchvision.__file__), '_C.*.so'))[0]\n"
            "try:\n    ctypes.CDLL(lib)\nexcept OSError as e:\n    print('refused:', e)\n"
            "print('has_ops', torchvision.extension._has_ops())")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert "refused: torchnative refuses to load" in out, out
    assert "linked against upstream's libc10.so" in out or "linked against upstream's libtorch" in out, out
    assert "has_ops False" in out, out
