"""Writes the typed C++ API over the dispatcher door from native_functions.yaml.

Every aten operator whose argument and return types have a C++ spelling becomes a
function in namespace tn::ops, named as upstream's C++ API names it: `ops::add(a, b)`
(overloads by argument types), `ops::add_(self, other)` for in-place forms and
`ops::add_out(out, self, other)` for out= forms, whose written tensors come first. An
overload that some call could confuse with an earlier one of the same name (see
`confusable`) takes its overload name as a suffix: `ops::var_correction`. Each function boxes its arguments
in schema order, goes through `Dispatcher::call` and unboxes the results, so kernels
compose operators with compile-time checked arguments and every call still passes the
door (and whatever it does: refusals by name, derived in-place and out= variants).

Run at build time with Debian's python3 (python3-yaml):
    gen_typed_ops.py native_functions.yaml typed_ops.h typed_ops.cpp
"""
import re
import sys

import yaml

# Schema type (without alias annotation or list size) -> C++ parameter type.
PARAM_TYPES = {
    "Tensor": "const Tensor&",
    "Tensor?": "const std::optional<Tensor>&",
    "Tensor[]": "const std::vector<Tensor>&",
    "Tensor?[]": "const std::vector<std::optional<Tensor>>&",
    "int": "int64_t",
    "int?": "std::optional<int64_t>",
    "int[]": "const std::vector<int64_t>&",
    "int[]?": "const std::optional<std::vector<int64_t>>&",
    "float": "double",
    "float?": "std::optional<double>",
    "float[]": "const std::vector<double>&",
    "float[]?": "const std::optional<std::vector<double>>&",
    "bool": "bool",
    "bool?": "std::optional<bool>",
    "bool[]": "const std::vector<bool>&",
    "str": "const std::string&",
    "str?": "const std::optional<std::string>&",
    "Scalar": "const Scalar&",
    "Scalar?": "const std::optional<Scalar>&",
    "ScalarType": "ScalarType",
    "ScalarType?": "std::optional<ScalarType>",
    "MemoryFormat": "MemoryFormat",
    "MemoryFormat?": "std::optional<MemoryFormat>",
    "Layout?": "std::optional<int64_t>",  # strided is the only layout, boxed as 0
    "Device?": "const std::optional<std::string>&",
    "Generator?": "Generator*",
}
RETURN_TYPES = {
    "Tensor": "Tensor",
    "Tensor[]": "std::vector<Tensor>",
    "int": "int64_t",
    "float": "double",
    "bool": "bool",
    "Scalar": "Scalar",
    "ScalarType": "ScalarType",
}
# at::Reduction's numbering, the one enum upstream spells by name in int defaults.
REDUCTIONS = {"None": "0", "Mean": "1", "Sum": "2"}
CPP_KEYWORDS = {"and", "or", "not", "xor", "bitand", "bitor", "compl", "delete", "new", "default", "register"}


def split_top_level(text):
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def base_type(spelled):
    """'Tensor(a!)' -> 'Tensor', 'int[2]' -> 'int[]', 'SymInt[1]?' -> 'int[]?'."""
    t = re.sub(r"\([^)]*\)", "", spelled)
    t = re.sub(r"\[\d+\]", "[]", t)
    return t.replace("SymInt", "int")


def parse(func):
    name, rest = func.split("(", 1)
    args_text, returns_text = rest.rsplit(") ->", 1)
    args, kwarg_only = [], False
    for part in split_top_level(args_text):
        if part == "*":
            kwarg_only = True
            continue
        default = None
        if "=" in part:
            part, default = part.split("=", 1)
        spelled, arg_name = part.rsplit(" ", 1)
        args.append({"type": spelled, "name": arg_name, "default": default, "kwarg_only": kwarg_only,
                     "out": kwarg_only and "!" in spelled})
    returns_text = returns_text.strip()
    if returns_text.startswith("("):
        returns_text = returns_text[1:-1]
    returns = [r.split(" ")[0] for r in split_top_level(returns_text)]
    op, _, overload = name.partition(".")
    return op, overload, args, returns


def cpp_default(arg):
    text, t = arg["default"], base_type(arg["type"])
    if text is None:
        return None
    if text == "None":
        return "nullptr" if t == "Generator?" else "std::nullopt"
    if t in ("bool", "bool?"):
        return {"True": "true", "False": "false"}[text]
    if t.startswith("bool["):
        return "{" + ", ".join({"True": "true", "False": "false"}[v.strip()] for v in text[1:-1].split(",")) + "}"
    if t.startswith("int[]") or t.startswith("float[]"):
        items = text[1:-1] if text.startswith("[") else text
        size = re.search(r"\[(\d+)\]", arg["type"])
        if size and "," not in items and items and int(size.group(1)) > 1:
            items = ", ".join([items] * int(size.group(1)))  # "int[2] stride=1" is [1, 1], as upstream reads it
        return "std::vector<%s>{%s}" % ("int64_t" if t.startswith("int") else "double", items)
    if t in ("int", "int?"):
        return REDUCTIONS.get(text, text)
    if t in ("float", "float?", "Scalar", "Scalar?"):
        if text in ("inf", "-inf"):
            return text.replace("inf", "std::numeric_limits<double>::infinity()")
        if t.startswith("Scalar") and text in ("True", "False"):
            return "Scalar(%s)" % text.lower()
        return "Scalar(%s)" % text if t.startswith("Scalar") and "." not in text and "e" not in text else text
    if t in ("str", "str?"):
        return '"%s"' % text.strip("\"'")
    if t in ("ScalarType", "ScalarType?"):
        return "ScalarType::" + {"long": "Long", "float": "Float", "int": "Int", "double": "Double"}[text]
    if t in ("MemoryFormat", "MemoryFormat?"):
        return {"contiguous_format": "MemoryFormat::Contiguous", "preserve_format": "MemoryFormat::Preserve"}[text]
    raise ValueError("no C++ default for %s=%s" % (arg["type"], text))


def return_type(returns):
    mapped = [RETURN_TYPES.get(base_type(r)) for r in returns]
    if None in mapped:
        return None
    if not mapped:
        return "void"
    return mapped[0] if len(mapped) == 1 else "std::tuple<%s>" % ", ".join(mapped)


def function_of(entry):
    op, overload, args, returns = parse(entry["func"])
    if op in CPP_KEYWORDS:
        return None
    ret = return_type(returns)
    types = [PARAM_TYPES.get(base_type(a["type"])) for a in args]
    if ret is None or None in types:
        return None  # Dimname, Storage, Stream, Scalar[] ...: no C++ use yet
    outs = [i for i, a in enumerate(args) if a["out"]]
    order = outs + [i for i in range(len(args)) if i not in outs]  # written tensors first, as at::*_out
    name = op
    defaults = [cpp_default(args[i]) for i in order]
    # C++ defaults must be trailing: drop any followed by a parameter without one.
    for k in range(len(order) - 1, -1, -1):
        if defaults[k] is None:
            defaults[:k] = [None] * k
            break
    params = []
    for k, i in enumerate(order):
        p = "%s %s" % (types[i], args[i]["name"])
        params.append(p + (" = " + defaults[k] if defaults[k] is not None else ""))
    boxed = ", ".join(args[i]["name"] for i in range(len(args)))
    return {
        "name": name, "is_out": bool(outs) and not op.endswith("_out"), "overload": overload, "full": "aten::" + op + ("." + overload if overload else ""),
        "ret": ret, "params": params, "signature": tuple(types[i] for i in order), "boxed": boxed,
    }


# Types between which C++ converts implicitly (int to bool, bool to double, a number to a
# Scalar, a value to its optional): overloads differing only in these would be chosen by
# the conversion, not by the caller's intent (var(x, dims, 0, true) would reach var.dim's
# `unbiased`, not var.correction's `correction`).
NUMERIC = {"int64_t", "bool", "double", "std::optional<int64_t>", "std::optional<bool>", "std::optional<double>",
           "const Scalar&", "const std::optional<Scalar>&", "std::optional<ScalarType>", "ScalarType"}


def arities(fn):
    required = sum(1 for p in fn["params"] if " = " not in p)
    return set(range(required, len(fn["params"]) + 1))


def confusable(a, b):
    """Some call could match both: a common argument count where every position agrees or is numeric."""
    for k in arities(a) & arities(b):
        if all(x == y or (x in NUMERIC and y in NUMERIC) for x, y in zip(a["signature"][:k], b["signature"][:k])):
            return True
    return False


def unbox(ret):
    if ret == "void":
        return "  call_boxed(op%s);"
    if ret.startswith("std::tuple"):
        return "  return unbox_tuple<%s>(call_boxed(op%%s));" % ret[len("std::tuple<"):-1]
    return "  return unbox<%s>(call_boxed(op%%s), 0);" % ret


def main(yaml_path, header_path, source_path):
    with open(yaml_path) as f:
        entries = yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    functions, by_name = [], {}
    for entry in entries:
        fn = function_of(entry)
        if fn is None:
            continue
        suffix = "_out" if fn["is_out"] else ""
        if any(confusable(fn, other) for other in by_name.get(fn["name"] + suffix, [])):
            overload = fn["overload"][:-len("_out")] if fn["overload"].endswith("_out") else fn["overload"]
            fn["name"] += "_" + overload if overload != "out" else ""
        fn["name"] += suffix
        by_name.setdefault(fn["name"], []).append(fn)
        functions.append(fn)
    banner = "// Generated by shim/codegen/gen_typed_ops.py from native_functions.yaml. Do not edit.\n"
    with open(header_path, "w") as h:
        h.write(banner + "// The typed API over the door (see the generator's docstring).\n#pragma once\n\n")
        h.write("#include <limits>\n#include <optional>\n#include <string>\n#include <tuple>\n#include <vector>\n\n")
        h.write('#include "ops.h"\n\nnamespace tn::ops {\n\n')
        for fn in functions:
            h.write("%s %s(%s);\n" % (fn["ret"], fn["name"], ", ".join(fn["params"])))
        h.write("\n}  // namespace tn::ops\n")
    with open(source_path, "w") as c:
        c.write(banner + '#include "typed_ops.h"\n#include "boxing.h"\n\nnamespace tn::ops {\n\n')
        for fn in functions:
            params = ", ".join(re.sub(r" = .*$", "", p) for p in fn["params"])
            c.write("%s %s(%s) {\n" % (fn["ret"], fn["name"], params))
            c.write('  static const Operator& op = operator_named("%s");\n' % fn["full"])
            c.write(unbox(fn["ret"]) % ((", " + fn["boxed"]) if fn["boxed"] else "") + "\n}\n")
        c.write("\n}  // namespace tn::ops\n")


if __name__ == "__main__":
    main(*sys.argv[1:4])
