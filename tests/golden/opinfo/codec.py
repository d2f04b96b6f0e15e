"""Shipping OpInfo samples and their callables from upstream's process to another one.

A sample (input, args, kwargs) is encoded as plain JSON types.  Tensors travel as
their whole storage (values through ``tolist()``, so float32/float64 values are
exact), dtype, shape, strides and storage offset; tensors of one sample that
share a storage share it again when rebuilt.  Rebuilding needs only
``torch.tensor(list, dtype=...)`` and ``as_strided``:

    storage = torch.tensor(values, dtype=dtype)
    tensor = storage.as_strided(shape, stride, storage_offset)

The callable (OpInfo's ``op``, ``method_variant``, ``inplace_variant``) travels as
  - a path (``torch.Tensor.add``, ``torch.nn.functional.relu``,
    ``torch.ops.aten.slice.Tensor``), resolved by import and getattr, or
  - a ``functools.partial`` of encoded parts, or
  - for a lambda or helper function defined in torch.testing (a module the shim
    cannot import yet), its source text exactly as upstream's file has it, the
    values of the globals and closure cells it reads (each encoded in turn),
    rebuilt with ``exec``.  gen.py checks that the rebuilt function's bytecode is
    the original's.

This module must not import torch (the caller hands it in): it is imported by the
workers of both interpreters.
"""

import ast
import builtins
import dis
import functools
import importlib
import json
import math
import struct
import symtable
import types

# dtypes a sample may carry.  The reference pass replaces REFERENCE_FROM by float64.
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool",
          "complex64", "complex128", "complex32")
REFERENCE_FROM = ("float32",)
# Where a callable is looked up by identity, in this order of preference.
NAMESPACES = ("torch", "torch.Tensor", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft",
              "torch.masked", "torch.sparse", "torch.nn.init", "operator", "math")
# Modules whose objects cannot be resolved by path in the shim (it cannot import them).
UNIMPORTABLE_PREFIX = "torch.testing"


class Unshippable(Exception):
    """A value or callable this codec cannot carry to another process."""


# ---------------------------------------------------------------- values

class Encoder:
    """Encodes the values of one sample; ``storages`` collects the tensor storages it met."""

    def __init__(self, torch):
        self.torch = torch
        self.storages = []
        self._storage_ids = {}

    def encode(self, value):
        torch = self.torch
        if value is None or type(value) in (bool, int, str):
            return value
        if type(value) is float:
            return {"t": "float", "v": _float_to_json(value)}
        if type(value) is complex:
            return {"t": "complex", "re": _float_to_json(value.real), "im": _float_to_json(value.imag)}
        if isinstance(value, torch.Tensor):
            return self._tensor(value)
        if isinstance(value, torch.Size):
            return {"t": "size", "v": [int(size) for size in value]}
        if type(value) is tuple:
            return {"t": "tuple", "v": [self.encode(item) for item in value]}
        if type(value) is list:
            return {"t": "list", "v": [self.encode(item) for item in value]}
        if type(value) is dict:
            if not all(type(key) is str for key in value):
                raise Unshippable("a dict with non-str keys")
            return {"t": "dict", "v": {key: self.encode(item) for key, item in value.items()}}
        if isinstance(value, torch.dtype):
            return {"t": "dtype", "v": str(value).replace("torch.", "")}
        if isinstance(value, torch.device):
            return {"t": "device", "v": str(value)}
        if isinstance(value, torch.memory_format):
            return {"t": "memory_format", "v": str(value).replace("torch.", "")}
        if isinstance(value, torch.layout):
            return {"t": "layout", "v": str(value).replace("torch.", "")}
        if type(value) is slice:
            return {"t": "slice", "v": [self.encode(value.start), self.encode(value.stop), self.encode(value.step)]}
        if value is Ellipsis:
            return {"t": "ellipsis"}
        if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "shape", None) == ():
            return {"t": "numpy_scalar", "dtype": str(value.dtype), "v": self.encode(value.item())}
        raise Unshippable("a value of type %s.%s" % (type(value).__module__, type(value).__name__))

    def _tensor(self, tensor):
        torch = self.torch
        if tensor.layout != torch.strided:
            raise Unshippable("a %s tensor" % tensor.layout)
        if tensor.is_conj() or tensor.is_neg():
            raise Unshippable("a tensor with the conjugate or negative bit")
        if tensor.requires_grad:
            raise Unshippable("a tensor that requires grad")
        dtype = str(tensor.dtype).replace("torch.", "")
        if dtype not in DTYPES or dtype.startswith("complex"):
            raise Unshippable("a %s tensor" % dtype)
        storage = tensor.storage()
        key = (storage.data_ptr(), storage.size(), dtype)
        if storage.size() == 0:
            key = ("empty", len(self.storages))  # zero-size storages share no memory
        if key not in self._storage_ids:
            self._storage_ids[key] = len(self.storages)
            # The whole storage as one contiguous view (faster than TypedStorage.tolist()).
            values = tensor.as_strided((storage.size(),), (1,), 0).tolist()
            self.storages.append({"dtype": dtype, "values": [_scalar_to_json(v) for v in values]})
        return {"t": "tensor", "storage": self._storage_ids[key], "shape": list(tensor.shape),
                "stride": list(tensor.stride()), "offset": tensor.storage_offset()}


def _float_to_json(value):
    # JSON has no inf/nan; repr() round-trips every float exactly.
    return value if math.isfinite(value) else repr(value)


def _float_from_json(value):
    return float(value) if isinstance(value, str) else value


def _scalar_to_json(value):
    return _float_to_json(value) if type(value) is float else value


class Decoder:
    """Rebuilds a sample encoded by Encoder.  ``reference``: float32 becomes float64."""

    def __init__(self, torch, storages, reference=False):
        self.torch = torch
        self.reference = reference
        self.storages = storages
        self._built = {}

    def dtype(self, name):
        if self.reference and name in REFERENCE_FROM:
            name = "float64"
        return getattr(self.torch, name)

    def storage(self, index):
        if index not in self._built:
            entry = self.storages[index]
            values = [_float_from_json(v) if isinstance(v, str) else v for v in entry["values"]]
            self._built[index] = self.torch.tensor(values, dtype=self.dtype(entry["dtype"]))
        return self._built[index]

    def decode(self, value):
        if not isinstance(value, dict):
            return value
        torch, kind = self.torch, value["t"]
        if kind == "float":
            return _float_from_json(value["v"])
        if kind == "complex":
            return complex(_float_from_json(value["re"]), _float_from_json(value["im"]))
        if kind == "tensor":
            return self.storage(value["storage"]).as_strided(value["shape"], value["stride"], value["offset"])
        if kind == "size":
            return torch.Size(value["v"])
        if kind == "tuple":
            return tuple(self.decode(item) for item in value["v"])
        if kind == "list":
            return [self.decode(item) for item in value["v"]]
        if kind == "dict":
            return {key: self.decode(item) for key, item in value["v"].items()}
        if kind == "dtype":
            return self.dtype(value["v"])
        if kind == "device":
            return torch.device(value["v"])
        if kind in ("memory_format", "layout"):
            return getattr(torch, value["v"])
        if kind == "slice":
            return slice(*(self.decode(item) for item in value["v"]))
        if kind == "ellipsis":
            return Ellipsis
        if kind == "numpy_scalar":
            import numpy
            return numpy.dtype(value["dtype"]).type(self.decode(value["v"]))
        raise ValueError("unknown encoded kind %r" % kind)


def tensors_in(encoded):
    """The encoded tensors inside an encoded value, in order."""
    if isinstance(encoded, dict):
        if encoded.get("t") == "tensor":
            return [encoded]
        items = encoded.get("v")
        if isinstance(items, dict):
            items = list(items.values())
        if isinstance(items, list):
            return [tensor for item in items for tensor in tensors_in(item)]
    return []


def live_tensors(torch, value):
    """The tensors inside a decoded value, in the order tensors_in lists their encodings."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)) and not isinstance(value, torch.Size):
        return [tensor for item in value for tensor in live_tensors(torch, item)]
    if isinstance(value, dict):
        return [tensor for item in value.values() for tensor in live_tensors(torch, item)]
    return []


def expected_leaves(storage_values, shape, stride, offset):
    """The elements of the tensor in row-major order, read from its storage in pure Python."""
    positions = [offset]
    for size, step in zip(shape, stride):
        positions = [p + i * step for p in positions for i in range(size)]
    values = [storage_values[p] for p in positions]
    return [_float_from_json(v) if isinstance(v, str) else v for v in values]


def check_rebuilt(torch, tensor, encoded, storages, reference=False):
    """None if ``tensor`` is exactly the encoded tensor (values bit for bit), else how it differs."""
    entry = storages[encoded["storage"]]
    dtype = "float64" if reference and entry["dtype"] in REFERENCE_FROM else entry["dtype"]
    if str(tensor.dtype) != "torch." + dtype:
        return "dtype %s, expected %s" % (tensor.dtype, dtype)
    if list(tensor.shape) != encoded["shape"]:
        return "shape %s, expected %s" % (list(tensor.shape), encoded["shape"])
    if list(tensor.stride()) != encoded["stride"]:
        return "strides %s, expected %s" % (list(tensor.stride()), encoded["stride"])
    if tensor.storage_offset() != encoded["offset"]:
        return "storage offset %d, expected %d" % (tensor.storage_offset(), encoded["offset"])
    expected = expected_leaves(entry["values"], encoded["shape"], encoded["stride"], encoded["offset"])
    actual = _leaves(tensor.tolist())
    if len(actual) != len(expected):
        return "%d elements, expected %d" % (len(actual), len(expected))
    for index, (a, e) in enumerate(zip(actual, expected)):
        if not _identical(a, e):
            return "element %d is %r, expected %r" % (index, a, e)
    return None


def _leaves(data):
    if not isinstance(data, list):
        return [data]
    while data and isinstance(data[0], list):
        data = [leaf for item in data for leaf in item]
    return data


def _identical(a, b):
    if type(a) is float and type(b) is float:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


# ---------------------------------------------------------------- callables

class CallableEncoder:
    """Encodes callables (and the globals they read) into self.table; values are ids."""

    def __init__(self, torch):
        self.torch = torch
        self.table = {}
        self._ids = {}
        self._keep = []  # ids are only unique while the objects live
        self._paths = None
        self._sources = {}
        self._imports = {}

    def encode(self, obj):
        """An encoded reference to ``obj``: a JSON value (a plain scalar, or {"t": ...})."""
        if obj is None or type(obj) in (bool, int, str):
            return obj
        if type(obj) is float:
            return {"t": "float", "v": _float_to_json(obj)}
        key = id(obj)
        if key in self._ids:
            return {"t": "obj", "id": self._ids[key]}
        self._ids[key] = index = str(len(self._ids))
        self._keep.append(obj)
        try:
            self.table[index] = self._encode_new(obj)
        except Unshippable:
            del self._ids[key]
            raise
        return {"t": "obj", "id": index}

    def _encode_new(self, obj):
        torch = self.torch
        if isinstance(obj, types.ModuleType):
            if obj.__name__.startswith(UNIMPORTABLE_PREFIX):
                raise Unshippable("it reads the module %s" % obj.__name__)
            return {"t": "module", "v": obj.__name__}
        if isinstance(obj, (tuple, list)) and type(obj) in (tuple, list):
            return {"t": type(obj).__name__, "v": [self.encode(item) for item in obj]}
        if isinstance(obj, (torch.dtype, torch.device, torch.memory_format, torch.layout)) or \
                type(obj) is complex:
            return {"t": "value", "v": Encoder(torch).encode(obj)}
        if isinstance(obj, torch._ops.OpOverload):
            return {"t": "aten", "packet": obj.overloadpacket.__name__, "overload": obj._overloadname}
        if isinstance(obj, torch._ops.OpOverloadPacket):
            return {"t": "aten", "packet": obj.__name__, "overload": None}
        path = self._path(obj)
        if path:
            return {"t": "path", "v": path}
        if isinstance(obj, functools.partial):
            return {"t": "partial", "func": self.encode(obj.func), "args": [self.encode(a) for a in obj.args],
                    "kwargs": {k: self.encode(v) for k, v in obj.keywords.items()}}
        function = obj
        while isinstance(function, types.FunctionType) and hasattr(function, "__wrapped__") \
                and function.__code__.co_filename.endswith(("contextlib.py", "functools.py")):
            function = function.__wrapped__  # rebuilt with its decorators from source
        if isinstance(function, types.FunctionType):
            return self._function(function)
        raise Unshippable("%s %r has no importable path nor Python source"
                          % (type(obj).__name__, getattr(obj, "__qualname__", obj)))

    def _path(self, obj):
        if self._paths is None:
            self._paths = {}
            for name in NAMESPACES:
                namespace = _import_path(name)
                for attribute in sorted(dir(namespace), key=lambda a: (a.startswith("_"), a)):
                    try:
                        value = getattr(namespace, attribute)
                    except Exception:
                        continue
                    if callable(value) and not isinstance(value, type):
                        self._paths.setdefault(id(value), "%s.%s" % (name, attribute))
        path = self._paths.get(id(obj))
        if path is None:
            module = getattr(obj, "__module__", None)
            qualname = getattr(obj, "__qualname__", None)
            if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname \
                    and not module.startswith(UNIMPORTABLE_PREFIX):
                path = module + "." + qualname
        if path is not None:
            try:
                if _import_path(path) is obj:
                    return path
            except Exception:
                pass
        return None

    def _function(self, function):
        code = function.__code__
        if code.co_filename.endswith(("contextlib.py", "functools.py")):
            raise Unshippable("a wrapper from %s" % code.co_filename)
        node, source = self._find_source(code)
        names = set(_global_names(code))
        # Decorators and default values are evaluated where the function is defined.
        evaluated = list(getattr(node, "decorator_list", [])) + list(node.args.defaults) + \
            [d for d in node.args.kw_defaults if d is not None]
        for expression in evaluated:
            names.update(n.id for n in ast.walk(expression) if isinstance(n, ast.Name))
        globals_ = {}
        for name in sorted(names):
            if name in function.__globals__:
                try:
                    globals_[name] = self.encode(function.__globals__[name])
                except Unshippable as error:
                    raise Unshippable("%s reads the global %s: %s" % (code.co_name, name, error))
            elif not hasattr(builtins, name):
                raise Unshippable("%s reads the undefined global %s" % (code.co_name, name))
        cells = []
        for name, cell in zip(code.co_freevars, function.__closure__ or ()):
            try:
                cells.append([name, self.encode(cell.cell_contents)])
            except ValueError:
                raise Unshippable("%s's closure cell %s is empty" % (code.co_name, name))
            except Unshippable as error:
                raise Unshippable("%s reads the closure variable %s: %s" % (code.co_name, name, error))
        imported = sorted(name for name in globals_ if name in self._imported(code.co_filename))
        return {"t": "function", "source": source, "lambda": isinstance(node, ast.Lambda), "name": code.co_name,
                "file": code.co_filename, "line": code.co_firstlineno, "globals": globals_, "cells": cells,
                "imported": imported}

    def _imported(self, filename):
        """Names an import statement binds at the top level of the file (see _wrap_source)."""
        if filename not in self._imports:
            with open(filename) as stream:
                table = symtable.symtable(stream.read(), filename, "exec")
            self._imports[filename] = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_imported()}
        return self._imports[filename]

    def _find_source(self, code):
        """The AST node and source text of the lambda or def compiled into ``code``."""
        if code.co_filename not in self._sources:
            try:
                with open(code.co_filename) as stream:
                    text = stream.read()
                tree = ast.parse(text)
            except (OSError, SyntaxError) as error:
                raise Unshippable("no source for %s: %s" % (code.co_name, error))
            by_line = {}  # first line (decorators included) -> lambdas and defs starting there
            for node in ast.walk(tree):
                if isinstance(node, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
                    by_line.setdefault(first, []).append(node)
            self._sources[code.co_filename] = (text.splitlines(keepends=True), by_line)
        lines, by_line = self._sources[code.co_filename]
        candidates = [node for node in by_line.get(code.co_firstlineno, [])
                      if (isinstance(node, ast.Lambda) and code.co_name == "<lambda>")
                      or (not isinstance(node, ast.Lambda) and node.name == code.co_name)]
        for node in candidates:
            source = _segment(lines, node)
            try:
                imported = sorted({n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                                  & self._imported(code.co_filename))
                rebuilt = _compile_function(source, isinstance(node, ast.Lambda), code.co_name, code.co_freevars,
                                            imported)
            except SyntaxError:
                continue
            if same_code(rebuilt, code):
                return node, source
        raise Unshippable("cannot find the source of %s at %s:%d" % (code.co_name, code.co_filename,
                                                                     code.co_firstlineno))


def _segment(lines, node):
    first = min([d.lineno for d in getattr(node, "decorator_list", [])] + [node.lineno])
    if isinstance(node, ast.Lambda):  # columns are UTF-8 byte offsets
        chunk = [line.encode() for line in lines[node.lineno - 1:node.end_lineno]]
        if len(chunk) == 1:
            return chunk[0][node.col_offset:node.end_col_offset].decode()
        chunk[0], chunk[-1] = chunk[0][node.col_offset:], chunk[-1][:node.end_col_offset]
        return b"".join(chunk).decode()
    # A def: whole lines from the first decorator to the end, with their indentation
    # (re-indenting would change multi-line string literals such as docstrings).
    return "".join(lines[first - 1:node.end_lineno])


def _global_names(code):
    """Names ``code`` (and the code nested in it) reads as globals."""
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL"):
            yield instruction.argval
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _global_names(constant)


def _wrap_source(source, is_lambda, name, freevars, imported=()):
    """Module source defining ``__make(*freevars)`` that returns the function.

    ``imported``: globals the original module binds by an import statement.  CPython
    3.11 compiles ``module.f()`` differently when ``module`` is imported at the top
    level (LOAD_ATTR instead of LOAD_METHOD), so the names are declared imported here
    too, by import statements that never run; their values are set in the namespace.
    """
    declared = "".join("    import _ as %s\n" % n for n in imported)
    prelude = "if False:\n%s" % declared if declared else ""
    head = "def __make(%s):\n" % ", ".join(freevars)
    if is_lambda:  # inside parentheses, the lambda's own line breaks and indentation are fine
        return prelude + head + "    return (\n%s\n    )\n" % source
    indent = source[:len(source) - len(source.lstrip(" \t"))]
    if not indent:  # a top-level def, compiled at the top level as it was
        return prelude + source.rstrip("\n") + "\n" + head + "    return %s\n" % name
    # A nested def keeps its indentation, which makes it the body of __make.
    return prelude + head + source.rstrip("\n") + "\n%sreturn %s\n" % (indent, name)


# Annotations are never evaluated (they may name typing constructs the codec does not carry).
_COMPILE_FLAGS = __import__("__future__").annotations.compiler_flag


def _compile_function(source, is_lambda, name, freevars, imported=()):
    """The code object of the function ``source`` defines (for comparison with the original)."""
    module = compile(_wrap_source(source, is_lambda, name, freevars, imported), "<opinfo>", "exec",
                     _COMPILE_FLAGS, True)
    make = next(c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == "__make")
    for constant in make.co_consts + module.co_consts:
        if isinstance(constant, types.CodeType) and constant.co_name == name:
            return constant
    raise SyntaxError("no code object named %s" % name)


def same_code(a, b):
    """Same bytecode, names and constants, recursively (line numbers may differ)."""
    if a.co_code != b.co_code or a.co_names != b.co_names or a.co_varnames != b.co_varnames \
            or a.co_freevars != b.co_freevars or len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not same_code(x, y):
                return False
        elif type(x) is not type(y) or (x != y and not (x != x and y != y)):
            return False
    return True


def _import_path(path):
    """The object at a dotted path such as torch.nn.functional.relu or torch.Tensor.add."""
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            obj = getattr(obj, part)
        return obj
    raise ImportError("cannot import %s" % path)


class CallableDecoder:
    """Rebuilds callables from a CallableEncoder table."""

    def __init__(self, torch, table, reference=False):
        self.torch = torch
        self.table = table
        self.reference = reference
        self._built = {}
        self._building = set()

    def decode(self, encoded):
        if not isinstance(encoded, dict):
            return encoded
        if encoded["t"] == "float":
            return _float_from_json(encoded["v"])
        index = encoded["id"]
        if index not in self._built:
            if index in self._building:
                raise ValueError("a cycle of callables through %r" % (self.table[index].get("name"),))
            self._building.add(index)
            self._built[index] = self._decode_new(self.table[index], index)
            self._building.discard(index)
        return self._built[index]

    def _decode_new(self, entry, index):
        torch, kind = self.torch, entry["t"]
        if kind == "module":
            return importlib.import_module(entry["v"])
        if kind in ("tuple", "list"):
            items = [self.decode(item) for item in entry["v"]]
            return tuple(items) if kind == "tuple" else items
        if kind == "value":
            return Decoder(torch, [], self.reference).decode(entry["v"])
        if kind == "aten":
            packet = getattr(torch.ops.aten, entry["packet"])
            return getattr(packet, entry["overload"]) if entry["overload"] is not None else packet
        if kind == "path":
            return _import_path(entry["v"])
        if kind == "partial":
            return functools.partial(self.decode(entry["func"]), *[self.decode(a) for a in entry["args"]],
                                     **{k: self.decode(v) for k, v in entry["kwargs"].items()})
        if kind == "function":
            namespace = {"__builtins__": builtins, "__name__": "opinfo_shipped"}
            recursive = []
            for name, value in entry["globals"].items():
                if isinstance(value, dict) and value.get("id") == index:
                    recursive.append(name)  # a function calling itself by its global name
                else:
                    namespace[name] = self.decode(value)
            source = _wrap_source(entry["source"], entry["lambda"], entry["name"], [c[0] for c in entry["cells"]],
                                  entry["imported"])
            exec(compile(source, "%s:%d" % (entry["file"], entry["line"]), "exec", _COMPILE_FLAGS, True), namespace)
            function = namespace["__make"](*[self.decode(c[1]) for c in entry["cells"]])
            for name in recursive:
                namespace[name] = function
            return function
        raise ValueError("unknown callable kind %r" % kind)


def worker_inputs(samples_path, names_path):
    """What a worker process runs: the samples catalog, its cases by name, and the names of the
    cases it is given, in order."""
    with open(samples_path) as stream:
        catalog = json.load(stream)
    with open(names_path) as stream:
        names = stream.read().split()
    return catalog, {case["name"]: case for case in catalog["cases"]}, names
