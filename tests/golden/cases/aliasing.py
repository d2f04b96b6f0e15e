"""Aliasing sweep: every in-place and out= overload writing through views and aliased inputs.

Generated, not hand-written.  The overloads are the in-place (``name_``) and out=
entries of upstream's native_functions.yaml that have a CPU kernel upstream, read at
catalog time with torchgen's schema parser; their arguments are synthesized from the
schema types (``_synthesize``), and an overload whose arguments cannot be synthesized
is left out with its reason (``/usr/bin/python3 -m cases.aliasing`` in tests/golden
counts them).
Which overloads the shim implements is asked at run time: each case names its
overload in ``Case.requires``, and run.py leaves out the overloads whose first case
(contiguous, main dtype) the shim refuses by name.

A case writes into W, the written-to tensor (self of an in-place overload, the first
out= tensor of an out= one), a view of one flat storage built with torch.tensor:

  W alone:               contiguous, transposed (dims reversed), offset (storage
                         offset 1), stepped (every other element), expanded (stride 0
                         in front: several elements of W at one address)
  an input P and W:      P_is_written (P is W), P_is_written_transposed (the same,
                         W transposed), P_overlaps (W starts one row into P: partial
                         overlap), P_transposed (P is W's memory with its dims
                         reversed), P_disjoint (the same storage, no common element)

where P is each tensor input of the working dtype (for a tensor list, its first
item).  Each alias case has a twin named with the TEMPORARY suffix that reads P from
a copy: its result is the call's as through a temporary (see run.py's judge_all).  The case returns the whole storage (writes outside W show), the overload's
result and whether that result is W.  An out= overload's W has the shape and dtype
of its functional overload's result on the same inputs (a factory's, the working
dtype); its initial values are FILL's.  Overloads taking a Generator draw after torch.manual_seed(0), bit-exactly.
"""

import yaml
from torchgen.model import BaseTy, BaseType, FunctionSchema, ListType, OptionalType, SchemaKind

import torch

from spec import DT, TEMPORARY, Arg, Case

NATIVE_FUNCTIONS = "/usr/lib/python3/dist-packages/torchgen/packaged/ATen/native/native_functions.yaml"
CPU_KEYS = {"CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd",
            "CompositeExplicitAutogradNonFunctional"}

LAYOUTS = ("contiguous", "transposed", "offset", "stepped", "expanded")
ALIASES = ("is_written", "is_written_transposed", "overlaps", "transposed", "disjoint")
DTYPES = ("float32", "float64", "int64", "int32", "bool", "float16", "bfloat16")
# The dtype of the layout and alias sweep (float32 unless listed), by base name (__iand__: "and").
MAIN_DTYPES = dict({op: "int64" for op in ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "gcd",
                                           "lcm", "bitwise_left_shift", "bitwise_right_shift", "and", "or",
                                           "xor", "lshift", "rshift")},
                   float_power="float64")

# Tensor inputs: (4, 4) of the working dtype, values "nonzero" (no division by zero),
# unless named here or overridden per op below.
SHAPE = (4, 4)
INDEX_NAMES = {"index", "indices"}   # int64 in [0, 4), 1-D (2,) or as SAME_RANK_INDEX
MASK_NAMES = {"mask", "condition"}   # bool (4, 4)
SAME_RANK_INDEX = {"scatter", "scatter_add", "scatter_reduce", "gather", "take_along_dim"}
DOMAINS = {
    "pos": {"log", "log2", "log10", "log1p", "sqrt", "rsqrt", "lgamma", "digamma", "polygamma", "mvlgamma",
            "special_multigammaln", "acosh", "special_gammaln", "special_digamma", "special_polygamma"},
    "unit": {"asin", "acos", "atanh", "erfinv", "arcsin", "arccos", "arctanh", "special_erfinv"},
    "prob": {"logit", "special_logit", "binary_cross_entropy", "bernoulli", "multinomial", "normal"},
    "small": {"exp", "exp2", "expm1", "sinh", "cosh", "pow", "float_power", "special_exp2",
              "special_expm1", "arcsinh", "arccosh", "ldexp"},
}
SHAPES = {  # op -> {argument: shape} where (4, 4) does not fit
    "bmm": {"self": (2, 4, 4), "mat2": (2, 4, 4)},
    "baddbmm": {"self": (2, 4, 4), "batch1": (2, 4, 4), "batch2": (2, 4, 4)},
    "addbmm": {"batch1": (2, 4, 4), "batch2": (2, 4, 4)},
    "mv": {"vec": (4,)}, "addmv": {"self": (4,), "vec": (4,)},
    "addr": {"vec1": (4,), "vec2": (4,)},
    "dot": {"self": (4,), "tensor": (4,)}, "vdot": {"self": (4,), "other": (4,)},
    "outer": {"self": (4,), "vec2": (4,)}, "ger": {"self": (4,), "vec2": (4,)},
    "cross": {"self": (4, 3), "other": (4, 3)}, "linalg_cross": {"self": (4, 3), "other": (4, 3)},
    "index_add": {"source": (2, 4)}, "index_copy": {"source": (2, 4)}, "index_reduce": {"source": (2, 4)},
    "put": {"source": (2,)}, "index_put": {"values": (4,)}, "_index_put_impl": {"values": (4,)},
    "bucketize": {"boundaries": (4,)}, "searchsorted": {"sorted_sequence": (4,)},
    **{op: {"self": (1, 4, 4)} for op in ("adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d",
                                          "max_pool2d_with_indices", "im2col", "reflection_pad2d",
                                          "replication_pad2d", "upsample_nearest2d", "upsample_bilinear2d",
                                          "fractional_max_pool2d", "max_unpool2d")},
}
# Constants by argument name (then by type, see _constant); per-op overrides first.
CONSTANTS = {
    "dim": 0, "dim0": 0, "dim1": 1, "axis0": 0, "axis1": 1, "dimension": 0, "k": 2, "n": 4, "p": 0.5,
    "high": 4, "low": 0, "from": 0, "to": 4, "step": 1, "steps": 4, "m": 4, "num_samples": 2,
    "reduction": 1, "decimals": 1, "end": 4, "start": 0, "min": -1, "max": 1, "min_val": -1,
    "max_val": 1, "threshold": 0.5, "lambd": 0.5, "negative_slope": 0.5, "weight": 0.5,
    "eps": 1e-5, "ord": 1, "kernel_size": 2, "stride": 1, "padding": 0, "dilation": 1, "output_size": 2,
    "size": 4, "stable": False,
}
STRINGS = {"reduce": "sum", "rounding_mode": "floor", "ord": "fro", "p": "fro", "side": "left"}
OP_CONSTANTS = {
    "polygamma": {"n": 1}, "special_polygamma": {"n": 1}, "mvlgamma": {"p": 1},
    "special_multigammaln": {"p": 1},
    "scatter": {"reduce": "add"}, "index_reduce": {"reduce": "prod"},
}
# Overloads left out by base name: they repoint self at other memory (values not written), keep
# SobolEngine's internal state (upstream aborts on a transposed one), or vary between upstream runs.
SKIPPED = dict({op: "repoints self at other memory" for op in ("set", "as_strided")},
               **{op: "SobolEngine state" for op in ("_sobol_engine_ff", "_sobol_engine_scramble",
                                                     "_sobol_engine_initialize_state")},
               linalg_lstsq="upstream's results differ between runs (about 1e-6) on views of one storage")
# Alias variants left out of one overload: upstream's result is undefined there.  Writing the
# singular values into A itself, upstream reads the output's size from memory it has already
# released: it raises with a different garbage size on every run, or segfaults.
UNDEFINED_UPSTREAM = {"linalg_svdvals.out": {"is_written", "is_written_transposed"}}
# Optional arguments given a value all the same, or clamp and clip would only raise.
GIVEN_OPTIONALS = {"min", "max"}
# Initial values of an out= tensor and of the spare elements of a storage.
FILL = (1, 2, 3)


def _base(kind):
    """The BaseTy of a (possibly optional) non-list type, else None."""
    if isinstance(kind, OptionalType):
        kind = kind.elem
    return kind.name if isinstance(kind, BaseType) else None


class Plan:
    """How to call one overload: its parameters as inputs (Args), constants and outs."""

    def __init__(self, schema, functional):
        self.schema = schema
        self.name = str(schema.name)
        self.out = schema.kind() == SchemaKind.out
        self.functional = functional  # name of the functional overload (out= only)
        self.op = schema.name.name.base  # "add" for add_.Tensor, add.out and __iadd__
        self.inputs = []    # Args, in the order the case receives them
        self.params = []    # (name, keyword-only, ("tensor", i) | ("list", [i]) | ("const", v) | ("out", j))
        self.outs = 0
        self.partners = []  # (name, input index): inputs of the working dtype that may alias W
        self.rng = False

    def tensor(self, name, shape, domain, dtype=None, partner=True):
        """Adds an input; one of the working dtype (not in-place self) is a partner."""
        if dtype is None and partner and (self.out or self.inputs):
            self.partners.append((name, len(self.inputs)))
        self.inputs.append(Arg(shape, domain, dtype))
        return len(self.inputs) - 1


def _synthesize(schema, functional):
    """A Plan for the overload, or the reason its arguments cannot be synthesized."""
    plan = Plan(schema, functional)
    written = [a for a in schema.arguments.flat_all if a.is_write]
    if not plan.out and (written[0].name != "self" or str(written[0].type) != "Tensor" or len(written) > 1):
        return "in-place on a tensor list or on more than self"
    keyword_only = {a.name for a in schema.arguments.flat_kwarg_only}
    by_name = False  # after a defaulted argument is left out, the rest go by name
    for argument in schema.arguments.flat_all:
        if argument in schema.arguments.out:
            if str(argument.type) != "Tensor":
                return "out= a list of tensors"
            plan.params.append((argument.name, True, ("out", plan.outs)))
            plan.outs += 1
            continue
        if argument.default is not None and argument.name not in GIVEN_OPTIONALS:
            by_name = True
            continue
        value = _value(plan, argument)
        if isinstance(value, str):
            return value
        plan.params.append((argument.name, by_name or argument.name in keyword_only, value))
    return plan


def _constant(op, name, base):
    """The value of a scalar, string or int-list argument by its name, or None."""
    value = OP_CONSTANTS.get(op, {}).get(name)
    if value is None:
        value = (STRINGS if base == BaseTy.str else CONSTANTS).get(name)
    fits = {BaseTy.str: (str,), BaseTy.int: (int,), BaseTy.SymInt: (int,), BaseTy.bool: (bool,)}
    return value if isinstance(value, fits.get(base, (int, float))) else None


def _value(plan, argument):
    """The parameter for one argument, or the reason there is none."""
    kind, name, base = argument.type, argument.name, _base(argument.type)
    shapes = SHAPES.get(plan.op, {})
    domain = next((d for d, ops in DOMAINS.items() if plan.op in ops), "nonzero")
    if base == BaseTy.Tensor:
        if isinstance(kind, OptionalType) and name not in GIVEN_OPTIONALS:
            return ("const", None)
        if name in INDEX_NAMES:
            shape = shapes.get(name, SHAPE if plan.op in SAME_RANK_INDEX else (2,))
            return ("tensor", plan.tensor(name, shape, ("index", 4), "int64"))
        if name in MASK_NAMES:
            return ("tensor", plan.tensor(name, shapes.get(name, SHAPE), "mask", "bool"))
        return ("tensor", plan.tensor(name, shapes.get(name, () if name == "value" else SHAPE), domain))
    if isinstance(kind, ListType) and _base(kind.elem) == BaseTy.Tensor:
        if isinstance(kind.elem, OptionalType):  # Tensor?[] indices: one index tensor
            return ("list", [plan.tensor(name, (2,), ("index", 4), "int64")])
        shape = shapes.get(name, SHAPE)
        return ("list", [plan.tensor(name, shape, domain), plan.tensor(name, shape, domain, partner=False)])
    if isinstance(kind, OptionalType) and _constant(plan.op, name, base) is None:
        return ("const", None)
    if isinstance(kind, OptionalType):
        kind = kind.elem
    if isinstance(kind, ListType) and _base(kind.elem) in (BaseTy.int, BaseTy.SymInt):
        if name in ("dim", "dims"):
            return ("const", [0])
        value = _constant(plan.op, name, BaseTy.int)
        if value is None:
            return "int[] argument %r" % name
        return ("const", [value] * (kind.size or len(SHAPE)))
    if base in (BaseTy.int, BaseTy.SymInt, BaseTy.Scalar, BaseTy.float, BaseTy.str, BaseTy.bool):
        value = _constant(plan.op, name, base)
        if value is not None:
            return ("const", value)
        if base == BaseTy.str:
            return "str argument %r" % name
        return ("const", {BaseTy.bool: False, BaseTy.float: 2.0}.get(base, 2))  # not 0.5: 0 as an integer
    return "%s argument %r" % (kind, name)


def overloads():
    """(plans, {reason: [overload]}): the in-place and out= overloads with a CPU kernel upstream."""
    with open(NATIVE_FUNCTIONS) as stream:
        entries = yaml.load(stream, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    schemas = [(FunctionSchema.parse(entry["func"]), entry) for entry in entries]
    functionals = {str(s.signature()): str(s.name) for s, _ in schemas if s.kind() == SchemaKind.functional}
    # Random ops: an overload of the name takes a Generator (randint.out does not, randint.generator_out does).
    random = {s.name.name.base for s, _ in schemas if any(_base(a.type) == BaseTy.Generator
                                                          for a in s.arguments.flat_all)}
    plans, skipped = [], {}
    for schema, entry in schemas:
        if schema.kind() not in (SchemaKind.inplace, SchemaKind.out):
            continue
        keys = {key.strip() for keys in entry.get("dispatch", {}) for key in keys.split(",")}
        functional = functionals.get(str(schema.signature()))
        if schema.name.name.base in SKIPPED:
            plan = SKIPPED[schema.name.name.base]
        # structured_delegate / ufunc_inner_loop: a CPU kernel from another entry / from codegen
        elif keys and not keys & CPU_KEYS and not {"structured_delegate", "ufunc_inner_loop"} & set(entry):
            plan = "no CPU kernel upstream"
        elif any(_base(a.type) == BaseTy.Dimname or isinstance(a.type, ListType)
                 and _base(a.type.elem) == BaseTy.Dimname for a in schema.arguments.flat_all):
            plan = "Dimname argument (named tensors)"
        elif schema.kind() == SchemaKind.out and functional is None:
            plan = "no functional overload to take the out= shape from"
        else:
            plan = _synthesize(schema, functional)
        if isinstance(plan, str):
            skipped.setdefault(plan, []).append(str(schema.name))
        else:
            plan.rng = schema.name.name.base in random
            plans.append(plan)
    return plans, skipped


def _resolve(name):
    """torch.ops.aten.<op>.<overload> for "op.overload" (or "op")."""
    op, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, op), overload or "default")


def _fill(count):
    return [FILL[i % len(FILL)] for i in range(count)]


def _values(tensor):
    return tensor.reshape(-1).tolist()


def _reversed_view(storage, shape):
    """The first elements of ``storage`` viewed with ``shape``, dims in reverse memory order."""
    order = tuple(reversed(range(len(shape))))
    count = 1
    for size in shape:
        count *= size
    return storage[:count].view(tuple(shape[d] for d in order)).permute(order)


def _elements(storage, tensor):
    """The indices into ``storage`` (a 1-D contiguous tensor) of the elements of a view of it."""
    offsets = {tensor.storage_offset() - storage.storage_offset()}
    for size, stride in zip(tensor.shape, tensor.stride()):
        offsets = {offset + i * stride for offset in offsets for i in range(size)}
    return offsets if tensor.numel() else set()


class Call:
    """The case function: builds W (and P) for ``variant``, calls the overload, returns the storage."""

    def __init__(self, plan, variant, partner=None, temporary=False):
        self.plan = plan
        self.variant = variant
        self.partner = partner  # input index of P (alias variants)
        self.temporary = temporary  # P is read from a copy: the result as through a temporary

    def __call__(self, *values):
        plan, dtype, inputs = self.plan, values[-1], list(values[:-1])
        outs = []
        if plan.out:
            positional, keywords = self._arguments(inputs, None)
            expected = _resolve(plan.functional)(*positional, **keywords)
            expected = expected if isinstance(expected, tuple) else (expected,)
            outs = [torch.tensor(_fill(e.numel()), dtype=e.dtype).view(e.shape) for e in expected]
            # A factory's (no tensor inputs) W takes the working dtype, or every dtype would be float32.
            storage, outs[0] = self._build(inputs, tuple(expected[0].shape), _fill(expected[0].numel()),
                                           expected[0].dtype if inputs else dtype)
        else:
            storage, inputs[0] = self._build(inputs, tuple(inputs[0].shape), _values(inputs[0]), dtype)
        written = outs[0] if plan.out else inputs[0]
        if self.temporary:
            inputs[self.partner] = inputs[self.partner].clone()
        positional, keywords = self._arguments(inputs, outs)
        before, covered = storage.tolist(), _elements(storage, written)
        if plan.rng:
            torch.manual_seed(0)
        result = _resolve(plan.name)(*positional, **keywords)
        covered |= _elements(storage, written)  # W may have been resized or restrided
        outside = [i for i, (old, new) in enumerate(zip(before, storage.tolist()))
                   if i not in covered and old != new and old == old]  # old == old: not NaN
        if outside:  # undefined upstream (heap corruption without the spare elements)
            raise RuntimeError("wrote outside the written-to tensor: storage elements %s" % outside)
        first = result[0] if isinstance(result, tuple) else result
        return storage, result, first is written

    def _arguments(self, inputs, outs):
        """(positional, keyword) arguments; without the outs when ``outs`` is None (functional)."""
        positional, keywords = [], {}
        for name, keyword, (kind, what) in self.plan.params:
            if kind == "out" and outs is None:
                continue
            if kind == "tensor":
                value = inputs[what]
            elif kind == "list":
                value = [inputs[i] for i in what]
            else:
                value = outs[what] if kind == "out" else what
            if keyword:
                keywords[name] = value
            else:
                positional.append(value)
        return positional, keywords

    def _build(self, inputs, shape, initial, dtype):
        """(storage, W) with W's ``initial`` values; replaces P in ``inputs`` for the alias variants."""
        count, variant = len(initial), self.variant
        if variant == "offset":
            storage = torch.tensor(_fill(1) + initial, dtype=dtype)
            return storage, storage[1:].view(shape)
        if variant == "stepped":
            storage = torch.tensor([v for pair in zip(initial, _fill(count)) for v in pair], dtype=dtype)
            return storage, storage[::2].view(shape)
        if variant == "expanded" and shape:  # spare elements up to W's numel catch contiguous writes
            row = count // shape[0] if shape[0] else 0
            storage = torch.tensor(initial[:row] + _fill(count - row), dtype=dtype)
            return storage, storage[:row].view((1,) + shape[1:]).expand(shape)
        if variant in LAYOUTS:
            storage = torch.tensor(initial, dtype=dtype)
            return storage, _reversed_view(storage, shape) if variant == "transposed" else storage.view(shape)
        partner = inputs[self.partner]
        partner_shape, partner_values = tuple(partner.shape), _values(partner)
        if variant in ("is_written", "is_written_transposed"):  # one tensor: P's for out=, self's in place
            shape = partner_shape if self.plan.out else shape
            storage = torch.tensor(partner_values if self.plan.out else initial, dtype=partner.dtype)
            transposed = variant == "is_written_transposed"
            written = _reversed_view(storage, shape) if transposed else storage.view(shape)
            inputs[self.partner] = written
            return storage, written
        if variant == "overlaps":  # P, then W from one row of P on
            shift = partner_shape[-1] if partner_shape else 0
            spare = max(0, shift + count - len(partner_values))
            tail = _fill(spare) if self.plan.out else initial[count - spare:]
            storage = torch.tensor(partner_values + tail, dtype=partner.dtype)
            inputs[self.partner] = storage[:len(partner_values)].view(partner_shape)
            return storage, storage[shift:shift + count].view(shape)
        if variant == "transposed":  # P is W's memory with its dims reversed
            if self.plan.out:
                head = partner_values + _fill(max(0, count - len(partner_values)))
            else:
                head = initial + partner_values[count:]
            storage = torch.tensor(head, dtype=partner.dtype)
            inputs[self.partner] = _reversed_view(storage, partner_shape)
            return storage, storage[:count].view(shape)
        storage = torch.tensor(initial + partner_values, dtype=partner.dtype)  # disjoint
        inputs[self.partner] = storage[count:].view(partner_shape)
        return storage, storage[:count].view(shape)


def _variants(plan, main):
    """(dtype, name, variant, partner input index) of one overload's cases, the probe case first."""
    for variant in LAYOUTS:
        yield main, variant, variant, None
    for name, index in plan.partners:
        for variant in ALIASES:
            yield main, "%s_%s" % (name, variant), variant, index
    for dtype in DTYPES:
        if dtype != main:
            yield dtype, "transposed", "transposed", None
            for name, index in plan.partners[:1]:
                yield dtype, name + "_overlaps", "overlaps", index


def cases():
    for plan in overloads()[0]:
        main = MAIN_DTYPES.get(plan.op, "float32")
        for dtype, name, variant, partner in _variants(plan, main):
            if variant in UNDEFINED_UPSTREAM.get(plan.name, ()):
                continue
            inputs = [_for_bool(arg) for arg in plan.inputs] if dtype == "bool" else plan.inputs
            name = "alias.%s/%s/%s" % (plan.name, dtype, name)
            yield Case(name, Call(plan, variant, partner), inputs + [DT], dtype, exact=plan.rng,
                       requires="aten::" + plan.name)
            if partner is not None:  # the same call with P copied first (see TEMPORARY)
                yield Case(name + TEMPORARY, Call(plan, variant, partner, temporary=True), inputs + [DT], dtype,
                           exact=plan.rng, requires="aten::" + plan.name)


def _for_bool(arg):
    """The input as drawn for a bool working dtype: "nonzero" would make it all True."""
    if arg.domain != "nonzero" or arg.dtype:
        return arg
    return Arg(arg.shape, "real", arg.dtype, arg.layout)


if __name__ == "__main__":
    planned, reasons = overloads()
    print("%d overloads planned" % len(planned))
    for reason, names in sorted(reasons.items(), key=lambda item: -len(item[1])):
        print("%4d skipped: %s (%s%s)" % (len(names), reason, ", ".join(names[:5]), ", ..." * (len(names) > 5)))
