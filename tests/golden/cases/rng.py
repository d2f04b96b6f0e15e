"""Random number generation after torch.manual_seed, compared bit-exactly.

The shim aims for value identity with upstream's mt19937-based CPU generator,
so these cases are ``exact``: no float64 reference run (float64 draws are
different numbers, not more precise versions of the float32 draws).
"""

from functools import partial

import torch
import torch.nn.functional as F

from spec import Arg, Case

SEEDS = (0, 1, 12345)
# Sizes around 16 matter: upstream fills >= 16 normal samples in vectorized chunks.
SIZES = ((5,), (2, 3), (), (0,), (4, 8), (17,))


def seeded(seed, draw):
    """Seeds the default generator, then draws (inputs were built without RNG)."""
    def call(*args):
        torch.manual_seed(seed)
        return draw(*args)
    return call


def _drawn_twice(draw):
    """Two consecutive draws: the second continues the generator stream."""
    return lambda: (draw(), draw())


DRAWS = (
    ("rand/float32", lambda size: torch.rand(size)),
    ("rand/float64", lambda size: torch.rand(size, dtype=torch.float64)),
    ("rand/bfloat16", lambda size: torch.rand(size, dtype=torch.bfloat16)),
    ("randn/float32", lambda size: torch.randn(size)),
    ("randn/float64", lambda size: torch.randn(size, dtype=torch.float64)),
    ("randint/int64", lambda size: torch.randint(-5, 5, size)),
    ("randint/high_only", lambda size: torch.randint(10, size)),
    ("normal_/float32", lambda size: torch.empty(size).normal_()),
    ("uniform_/float32", lambda size: torch.empty(size).uniform_(-2, 3)),
    ("bernoulli_/float32", lambda size: torch.empty(size).bernoulli_(0.3)),
    ("exponential_/float32", lambda size: torch.empty(size).exponential_()),
    ("random_/int64", lambda size: torch.empty(size, dtype=torch.int64).random_(0, 10)),
)

def _state_round_trip():
    state = torch.get_rng_state()
    first = torch.rand(4)
    torch.set_rng_state(state)
    return torch.equal(first, torch.rand(4)), first


def _explicit_generator():
    generator = torch.Generator()
    generator.manual_seed(7)
    return (torch.rand(3, generator=generator), torch.randn(3, generator=generator),
            torch.randperm(6, generator=generator), torch.rand(2))


VARIANTS = (
    ("randint/int32", lambda: torch.randint(0, 100, (6,), dtype=torch.int32)),
    ("randint/uint8", lambda: torch.randint(0, 256, (6,), dtype=torch.uint8)),
    ("randint/float32", lambda: torch.randint(0, 7, (6,), dtype=torch.float32)),
    ("randint/wide_range", lambda: torch.randint(0, 2 ** 40, (4,))),
    ("randint/negative_range", lambda: torch.randint(-2 ** 35, -5, (4,))),
    ("randint/empty_range", lambda: torch.randint(3, 3, (2,))),
    ("randperm/5", lambda: torch.randperm(5)),
    ("randperm/1", lambda: torch.randperm(1)),
    ("randperm/0", lambda: torch.randperm(0)),
    ("randperm/40", lambda: torch.randperm(40)),
    ("randperm/int32", lambda: torch.randperm(10, dtype=torch.int32)),
    ("randperm/float32", lambda: torch.randperm(10, dtype=torch.float32)),
    ("normal_/mean_std", lambda: torch.empty(6).normal_(2.0, 0.5)),
    ("normal_/float64", lambda: torch.empty(20, dtype=torch.float64).normal_()),
    ("normal/size", lambda: torch.normal(0.0, 1.0, size=(3, 2))),
    ("normal/float64_size", lambda: torch.normal(1.0, 2.0, (5,), dtype=torch.float64)),
    ("uniform_/float64", lambda: torch.empty(5, dtype=torch.float64).uniform_()),
    ("uniform_/bfloat16", lambda: torch.empty(5, dtype=torch.bfloat16).uniform_()),
    ("bernoulli_/float64", lambda: torch.empty(8, dtype=torch.float64).bernoulli_(0.7)),
    ("bernoulli_/int64", lambda: torch.empty(8, dtype=torch.int64).bernoulli_(0.5)),
    ("geometric_/float32", lambda: torch.empty(6).geometric_(0.3)),
    ("cauchy_/float32", lambda: torch.empty(6).cauchy_()),
    ("log_normal_/float32", lambda: torch.empty(6).log_normal_()),
    ("random_/float32_bound", lambda: torch.empty(6).random_(100)),
    ("random_/int64_full", lambda: torch.empty(4, dtype=torch.int64).random_()),
    ("random_/int32_full", lambda: torch.empty(4, dtype=torch.int32).random_()),
    ("stream/rand_rand", _drawn_twice(lambda: torch.rand(3))),
    ("stream/randn_randn", _drawn_twice(lambda: torch.randn(3))),
    ("stream/randn_odd_then_rand", lambda: (torch.randn(3), torch.rand(2), torch.randn(20))),
    ("initial_seed/after_seed", torch.initial_seed),
    ("rng_state/round_trip", _state_round_trip),
    ("generator/explicit", _explicit_generator),
)


# Draws parameterized by a tensor input.
INPUT_DRAWS = (
    ("bernoulli/probabilities", torch.bernoulli, (Arg((3, 4), "prob"),)),
    ("bernoulli_/tensor_p", lambda p: torch.empty(3, 4).bernoulli_(p), (Arg((3, 4), "prob"),)),
    ("multinomial/without_replacement", lambda p: torch.multinomial(p, 3), (Arg((6,), "pos"),)),
    ("multinomial/with_replacement", lambda p: torch.multinomial(p, 10, replacement=True), (Arg((4,), "pos"),)),
    ("multinomial/2d", lambda p: torch.multinomial(p, 2), (Arg((3, 5), "pos"),)),
    ("multinomial/too_many", lambda p: torch.multinomial(p, 7), (Arg((6,), "pos"),)),
    ("normal/tensor_mean_std", torch.normal, (Arg((3, 4)), Arg((3, 4), "pos"))),
    ("normal/tensor_mean", lambda m: torch.normal(m, 0.5), (Arg((5,)),)),
    ("rand_like/3x4", torch.rand_like, (Arg((3, 4)),)),
    ("randn_like/3x4", torch.randn_like, (Arg((3, 4), dtype="float64"),)),
    ("randint_like/3x4", lambda a: torch.randint_like(a, 10), (Arg((3, 4), dtype="int64"),)),
    ("dropout/train", partial(F.dropout, p=0.5, training=True), (Arg((4, 5)),)),
    ("dropout/inplace", lambda a: (F.dropout(a, 0.3, training=True, inplace=True), a), (Arg((4, 5)),)),
    ("randn/float32_after_input", lambda a: a + torch.randn(3, 4), (Arg((3, 4)),)),
)


# Feature dropout draws one bernoulli per (sample, channel); alpha dropout one per element.
FEATURE_DROPOUT_DRAWS = (
    ("feature_dropout/dropout2d", partial(F.dropout2d, p=0.5, training=True), (Arg((3, 4, 2, 2)),)),
    ("feature_dropout/dropout3d_inplace", lambda a: (F.dropout3d(a, 0.3, True, inplace=True), a),
     (Arg((2, 5, 1, 2, 2)),)),
    ("feature_dropout/then_rand", lambda a: (F.dropout2d(a, 0.5, True), torch.rand(3)), (Arg((2, 3, 2, 2)),)),
    ("alpha_dropout/train", partial(F.alpha_dropout, p=0.5, training=True), (Arg((17, 3)),)),
    ("feature_alpha_dropout/train", partial(F.feature_alpha_dropout, p=0.5, training=True), (Arg((3, 4, 5)),)),
)


def cases():
    for seed in SEEDS:
        for name, draw in DRAWS:
            op, variant = name.split("/", 1)
            for size in SIZES:
                label = "x".join(map(str, size)) or "0d"
                yield Case("%s/%s/seed%d/%s" % (op, variant, seed, label),
                           seeded(seed, partial(draw, size)), (), exact=True)
    for name, draw in VARIANTS:
        op, variant = name.split("/", 1)
        for seed in SEEDS[:2]:
            yield Case("%s/%s/seed%d" % (op, variant, seed), seeded(seed, draw), (), exact=True)
    for name, draw, args in INPUT_DRAWS:
        op, variant = name.split("/", 1)
        yield Case("%s/%s/seed0" % (op, variant), seeded(0, draw), args, dtype="float32", exact=True)
    for name, draw, args in FEATURE_DROPOUT_DRAWS:
        op, variant = name.split("/", 1)
        for seed in SEEDS:
            yield Case("%s/%s/seed%d" % (op, variant, seed), seeded(seed, draw), args, dtype="float32", exact=True)
    yield Case("manual_seed/large/seed", seeded(2 ** 40 + 3, lambda: torch.rand(4)), (), exact=True)
