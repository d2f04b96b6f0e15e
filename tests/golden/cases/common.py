"""Call forms shared by the case families.

Each helper turns "the op" into a callable taking the materialized inputs, so a
family can run the same op through the function, the Tensor method, the
in-place method and out=.
"""

import torch

from spec import ALL, FLOATS, INTS

NUMERIC = FLOATS + INTS          # everything but bool
FLOAT_OUT = FLOATS + ("int64", "int32", "uint8", "bool")  # ops that promote integers to float


def method(name):
    """Calls the Tensor method ``name`` on the first input."""
    def call(self, *args, **kwargs):
        return getattr(self, name)(*args, **kwargs)
    return call


def inplace(name):
    """Calls an in-place method; the result also records whether it returned self."""
    def call(self, *args, **kwargs):
        result = getattr(self, name)(*args, **kwargs)
        return self, result is self
    call.writes_first_input = True  # what a gradient twin needs to know (cases/gradients.py)
    return call


def into_out(fn):
    """Calls ``fn`` with out= a zero-size tensor of the result's dtype.

    The kernel must resize and fill it, and return it (identity is recorded).
    Calling fn first is the only way to learn the dtype without hard-coding
    upstream's promotion rules in the case.
    """
    def call(*args, **kwargs):
        out = torch.empty(0, dtype=fn(*args, **kwargs).dtype)
        result = fn(*args, out=out, **kwargs)
        return out, result is out
    return call


def main_dtype(dtypes):
    """The dtype used for sweeps over shapes and call forms: float32 when the op has it."""
    for candidate in ("float32", "int64", "bool"):
        if candidate in dtypes:
            return candidate
    return dtypes[0]


def second_dtype(dtypes):
    """A dtype of another kind than main_dtype, so forms are also exercised on it."""
    main = main_dtype(dtypes)
    for candidate in ("int32", "int64", "bool", "float64"):
        if candidate in dtypes and candidate != main:
            return candidate
    return main


__all__ = ["ALL", "FLOATS", "INTS", "NUMERIC", "FLOAT_OUT", "method", "inplace",
           "into_out", "main_dtype", "second_dtype"]
