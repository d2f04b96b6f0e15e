"""Vocabulary of golden cases: a Case is a callable plus inputs described as data.

Inputs are generated from the case name by a small pure-Python generator and
turned into tensors with nothing but ``torch.tensor(list, dtype=...)`` followed
by view operations.  So inputs never depend on the RNG of the torch under test,
and the shim needs only ``torch.tensor`` (and the views) to construct them.

This module must not import torch: it is imported by the worker under both
interpreters, and torch is handed in when inputs are materialized.
"""

import zlib

FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("int64", "int32", "int16", "int8", "uint8")
ALL = FLOATS + INTS + ("bool",)
# Floating dtypes that the reference pass replaces by float64 (see README).
LOW_PRECISION = ("float32", "float16", "bfloat16")

# Layouts of a tensor input.  Non-contiguous ones are views of a larger
# contiguous tensor so that kernels see real strides / storage offsets.
CONTIGUOUS = "contiguous"
TRANSPOSED = "transposed"  # built with the last two dims swapped, then .transpose(-1, -2)
STEPPED = "stepped"        # built with the last dim doubled, then [..., ::2]
OFFSET = "offset"          # built with one extra leading row, then [1:]
EXPANDED = "expanded"      # built with a leading dim of 1, then .expand(shape): stride 0
CHANNELS_LAST = "channels_last"  # NCHW built as NHWC, then .permute(0, 3, 1, 2)

_SPECIAL_FLOATS = (float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1.0, -1.0,
                   0.5, 1e-20, 1e30, -2.5)


class Arg:
    """A tensor input: shape, value domain, dtype (None: the case's dtype) and layout.

    Domains (floats / integers):
      real     [-4, 4] / [-9, 9] ([0, 15] for uint8)
      pos      (0, 4] / [1, 9]
      nonzero  +-[0.05, 4] / +-[1, 9]: divisors
      unit     (-0.99, 0.99) / [-1, 1]
      small    [-2, 2] / [-3, 3]: exponentials, powers
      exponent [-2, 2] / [0, 3]: right operand of pow
      special  half nan/inf/-0.0/tiny/huge, half real
      cast     [0, 100) / [0, 99]: dtype conversions (no negatives, no overflow)
      prob     [0, 1]
      mask     booleans
      ("index", n)  integers in [0, n)
    """

    def __init__(self, shape, domain="real", dtype=None, layout=CONTIGUOUS):
        self.shape = tuple(shape)
        self.domain = domain
        self.dtype = dtype
        self.layout = layout

    def build(self, torch, seed, dtype, reference):
        """The tensor for this input: deterministic values from ``seed``."""
        base_shape = _base_shape(self.shape, self.layout)
        rng = Lcg(seed)
        count = 1
        for size in base_shape:
            count *= size
        flat = [_draw(rng, self.domain, dtype) for _ in range(count)]
        if count:
            tensor = torch.tensor(_nest(flat, base_shape), dtype=getattr(torch, dtype))
        else:  # nested lists cannot express a leading 0 followed by other sizes
            tensor = torch.tensor([], dtype=getattr(torch, dtype)).reshape(base_shape)
        if reference and dtype in LOW_PRECISION:
            # Same (already rounded) values, evaluated in float64.
            tensor = tensor.to(torch.float64)
        return _apply_layout(tensor, self.layout, self.shape)


class WorkingDtype:
    """Placeholder argument: the case's dtype as a torch.dtype (float64 in the reference pass)."""


DT = WorkingDtype()

# Suffix of a case's twin whose aliased input is read from a copy: the call as through a
# temporary. Where an output overlaps an input, upstream's result is what its loops read
# while they write; run.py accepts the shim's result when it equals the twin's instead.
TEMPORARY = "@temporary"
# Suffix of a case's gradient twin (cases/gradients.py): the same call on the same values,
# differentiated.
GRADIENT = "@grad"
# Suffix of a float64 case's gradcheck twin (cases/gradients.py).
GRADCHECK = "@gradcheck"


class Case:
    """One golden case: ``fn(*args)`` where Arg/DT placeholders are materialized first.

    ``exact`` cases get no float64 reference run and are compared bit-exactly:
    random-number cases, whose float64 draws are different numbers, not more
    precise versions of the float32 draws.

    ``requires`` names the aten overload a case exists to exercise ("aten::add_.Tensor").
    run.py first runs the first selected case of each such overload on the shim and
    leaves out all of that overload's cases if the shim refuses it by name (see README).

    ``strides`` cases also compare their result tensors' strides: the families whose
    operators lay their results out as upstream's TensorIterator does (elementwise ops,
    conversions), marked by their modules.
    """

    def __init__(self, name, fn, args=(), dtype=None, exact=False, requires=None, strides=False):
        self.name = name
        self.fn = fn
        self.args = tuple(args)
        self.dtype = dtype
        self.exact = exact
        self.requires = requires
        self.strides = strides

    def materialize(self, torch, reference):
        values = []
        for index, arg in enumerate(self.args):
            if isinstance(arg, Arg):
                dtype = arg.dtype or self.dtype
                # A twin draws its case's values.
                base = self.name.removesuffix(TEMPORARY).removesuffix(GRADIENT).removesuffix(GRADCHECK)
                seed = "%s#%d" % (base, index)
                values.append(arg.build(torch, seed, dtype, reference))
            elif isinstance(arg, WorkingDtype):
                promote = reference and self.dtype in LOW_PRECISION
                values.append(torch.float64 if promote else getattr(torch, self.dtype))
            else:
                values.append(arg)
        return values


class Lcg:
    """64-bit linear congruential generator (Knuth's MMIX constants) seeded by a string."""

    def __init__(self, seed):
        self.state = zlib.crc32(seed.encode("utf-8"))

    def below(self, n):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return (self.state >> 33) % n


def _draw(rng, domain, dtype):
    """One value of ``domain`` representable (up to rounding) in ``dtype``."""
    if isinstance(domain, tuple):  # ("index", n)
        return rng.below(domain[1])
    if dtype == "bool" or domain == "mask":
        return domain in ("pos", "nonzero") or rng.below(2) == 1
    if dtype in INTS:
        low, high = _INT_RANGES[domain]
        if dtype == "uint8":
            low = max(low, 0 if domain != "nonzero" else 1)
            high = min(high, 15) if domain == "real" else high
        value = low + rng.below(high - low + 1)
        if domain == "nonzero" and value == 0:
            value = 1
        return value
    if domain == "special" and rng.below(2) == 0:
        return _SPECIAL_FLOATS[rng.below(len(_SPECIAL_FLOATS))]
    step = rng.below(10001)  # 0 .. 10000
    if domain in ("real", "special"):
        return (step - 5000) / 1250.0
    if domain == "pos":
        return (step + 1) / 2500.25
    if domain == "nonzero":
        magnitude = 0.05 + (step // 2) / 1282.0
        return magnitude if step % 2 else -magnitude
    if domain == "unit":
        return (step - 5000) / 5050.0
    if domain in ("small", "exponent"):
        return (step - 5000) / 2500.0
    if domain == "cast":
        return step / 101.0
    if domain == "prob":
        return step / 10000.0
    raise ValueError("unknown domain %r" % (domain,))


_INT_RANGES = {
    "real": (-9, 9), "pos": (1, 9), "nonzero": (-9, 9), "unit": (-1, 1),
    "small": (-3, 3), "exponent": (0, 3), "special": (-9, 9), "cast": (0, 99),
    "prob": (0, 1),
}


def _base_shape(shape, layout):
    if layout == TRANSPOSED:
        return shape[:-2] + (shape[-1], shape[-2])
    if layout == STEPPED:
        return shape[:-1] + (2 * shape[-1],)
    if layout == OFFSET:
        return (shape[0] + 1,) + shape[1:]
    if layout == EXPANDED:
        return (1,) + shape[1:]
    if layout == CHANNELS_LAST:
        return (shape[0],) + shape[2:] + (shape[1],)
    return shape


def _apply_layout(tensor, layout, shape):
    if layout == TRANSPOSED:
        return tensor.transpose(-1, -2)
    if layout == STEPPED:
        return tensor[..., ::2]
    if layout == OFFSET:
        return tensor[1:]
    if layout == EXPANDED:
        return tensor.expand(*shape)
    if layout == CHANNELS_LAST:
        return tensor.permute(0, 3, 1, 2)
    return tensor


def _nest(flat, shape):
    """Reshape a flat list into nested lists of ``shape`` (a scalar for shape ())."""
    if not shape:
        return flat[0]
    if len(shape) == 1:
        return list(flat)
    stride = len(flat) // shape[0]
    return [_nest(flat[i * stride:(i + 1) * stride], shape[1:]) for i in range(shape[0])]
