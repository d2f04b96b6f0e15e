"""torchnative.adapt and torchnative.delta on the shim (issue 19, points 1, 2 and their tests).

Tent's steps, plain and with EATA's filter, are checked against the same file
(python/torchnative/adapt.py is plain torch code) run by upstream torch in a separate process, as
test_autograd's training scripts are: upstream in float32 and float64 and the shim in float32,
each float of the shim's record within twice upstream's own float32-vs-float64 error of the
float64 reference, or equal to upstream's; the filter's counts exactly.
The controls catch a method that silently does nothing: a sign-flipped objective raises the
entropy that Tent lowers, lr=0 changes no byte, a detached objective and a model without
normalisation layers are refused by name; a batch the filter finds unreliable moves no byte where
plain Tent steps, a repeated prediction is dropped where distinct ones are kept, and recovery
fires on a collapsing stream (back to the base bytes) and not on a calm one.
"""
import subprocess
from pathlib import Path

import pytest
import torch

from test_autograd import three_runs
from test_training_apis import SHIM_PYTHON
from compare import compare_values  # tests/golden, on sys.path through test_autograd
from torchnative import adapt
from torchnative.delta import BaseMismatch, Delta, named_tensors, tensors_sha256

PYTHON_DIR = str(Path(__file__).resolve().parents[2] / "python")

# The models, as source: the upstream and shim scripts build them too, from the same seed.
MODELS_SOURCE = r'''
import torch
from torch import nn


def bn_cnn(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.Conv2d(8, 8, 3, stride=2), nn.BatchNorm2d(8), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))
    with torch.no_grad():
        model[-1].weight.mul_(4)  # predictions away from uniform, where the entropy has a gradient
        model[1].running_mean.uniform_(-1, 1)  # source statistics unlike a test batch's
        model[1].running_var.uniform_(0.5, 2)
    return model, [torch.randn(8, 3, 8, 8) for _ in range(4)]


def norm_mlp(seed=0):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(12, 32), nn.LayerNorm(32), nn.GELU(), nn.Linear(32, 32),
                          nn.GroupNorm(4, 32), nn.Tanh(), nn.Linear(32, 6))
    return model, [torch.randn(16, 12) * 2 for _ in range(4)]


MODELS = {"bn_cnn": bn_cnn, "norm_mlp": norm_mlp}
'''
exec(MODELS_SOURCE)  # bn_cnn, norm_mlp and MODELS, here as in the scripts

TENT_SCRIPT = MODELS_SOURCE + r'''
import functools

sys.path.append(PYTHON_DIR)  # the shim's venv has torchnative; upstream finds the same files here
from torchnative import adapt

OPTIMIZERS = {"bn_cnn": None, "norm_mlp": functools.partial(torch.optim.SGD, momentum=0.9)}
# With EATA's filter the last layer is scaled up, so that some samples are reliable; margin and
# redundancy are such that each filter drops some samples and every entropy and similarity is at
# least 0.004 from its threshold (in float32 and float64 alike): all three runs keep the same ones.
FILTERS = {"bn_cnn": dict(margin=0.42, redundancy=0.85), "norm_mlp": dict(margin=0.72, redundancy=0.8)}


def main():
    model, batches = MODELS[NAME]()
    method = adapt.Tent()
    if FILTERED:
        with torch.no_grad():
            model[-1].weight.mul_(4)
        method = adapt.Tent(adapt.EataFilter(**FILTERS[NAME]))
    model = adapt.wrap(model.to(DTYPE), method, lr=0.2, optimizer=OPTIMIZERS[NAME]).online()
    entropies, outputs = [], []
    for batch in batches:
        out = model(batch.to(DTYPE))
        entropies.append(adapt.softmax_entropy(out).detach())
        outputs.append(out.detach())
    # The adapted parameters as one tensor, so that upstream's error is measured over all of them:
    # on any single small BatchNorm bias it is luck (test_autograd's network_difference says why).
    adapted = torch.cat([t.detach().reshape(-1) for t in model.delta.current().values()])
    counts = model.counts
    selected = torch.tensor([counts.steps, counts.skipped, counts.reliable, counts.kept])
    return [torch.stack(entropies), torch.stack(outputs), adapted, selected]
'''


def all_bytes(model):
    """{name: bytes} of every parameter and buffer."""
    return {name: tensor.detach().numpy().tobytes() for name, tensor in named_tensors(model).items()}


def changed(before, model):
    return sorted(name for name, data in all_bytes(model).items() if data != before[name])


def served_entropy(model, batch):
    model.offline()
    with torch.no_grad():
        return adapt.softmax_entropy(model(batch)).item()


# What each run's filter keeps: [steps, skipped, reliable, kept] (the same in every run)
SELECTED = {("bn_cnn", False): [4, 0, 0, 0], ("norm_mlp", False): [4, 0, 0, 0],
            ("bn_cnn", True): [4, 0, 26, 10], ("norm_mlp", True): [4, 0, 27, 24]}


@pytest.mark.parametrize("name, filtered", sorted(SELECTED))
def test_tent_agrees_with_upstream(name, filtered, tmp_path):
    body = f"NAME = {name!r}\nFILTERED = {filtered}\nPYTHON_DIR = {PYTHON_DIR!r}\n" + TENT_SCRIPT
    upstream, reference, ours = three_runs(body, tmp_path)
    difference = compare_values(upstream, ours, reference,
                                "[entropies, outputs, adapted parameters, [steps, skipped, reliable, kept]]")
    assert difference is None, difference
    assert upstream["items"][3]["data"] == SELECTED[name, filtered]


def test_a_batch_of_unreliable_samples_takes_no_step():
    """bn_cnn is untrained: every sample's entropy is above 0.4 ln 10 (by 0.8 nats at least)."""
    for method, moved in ((adapt.Tent(), True), (adapt.Tent(adapt.EataFilter()), False)):
        model, batches = bn_cnn()
        before = all_bytes(model)
        adapt.wrap(model, method, lr=0.5).online()
        model(batches[0])
        assert bool(changed(before, model)) == moved  # plain Tent steps on this very batch
    assert model.counts == adapt.Counts(steps=0, skipped=1, reliable=0, kept=0)


def test_the_redundancy_filter_drops_predictions_like_the_past_ones():
    """norm_mlp normalises each sample alone, so a repeated sample gives the same softmax each time;
    its last layer scaled up, the softmax of distinct samples are 0.43 to 0.89 similar to another's.
    margin=1 keeps every sample but a uniform one: only the redundancy filter drops here."""
    kept = {}
    for second in ("repeated", "distinct"):
        model, batches = norm_mlp()
        with torch.no_grad():
            model[-1].weight.mul_(4)
        adapt.wrap(model, adapt.Tent(adapt.EataFilter(margin=1.0, redundancy=0.7)), lr=0.1).online()
        repeated = batches[0][:1].expand(16, -1)
        model(repeated)  # the moving average is now this one sample's softmax
        kept_first = model.counts.kept
        model(repeated if second == "repeated" else batches[1])
        kept[second] = model.counts.kept - kept_first
    assert kept_first == 16 and kept["repeated"] == 0 < kept["distinct"] < 16, kept


def test_eatas_fisher_regulariser_is_refused_by_name():
    with pytest.raises(NotImplementedError, match=r"Fisher regulariser \(fishers, fisher_alpha\) is not"):
        adapt.EataFilter(fisher_alpha=2000.0)


def test_recovery_reverts_a_collapsed_model_to_its_base():
    """lr=2 drives Tent's served entropy from 2.03 to 0.04 nats in 22 calls; the moving average
    falls below 0.2 times its start at the 23rd call."""
    model, batches = bn_cnn()
    before = all_bytes(model)
    adapt.wrap(model, adapt.Tent(), lr=2, recovery=adapt.Recovery()).online()
    calls = 0
    while model.counts.recoveries == 0 and calls < 40:
        model(batches[calls % 4])
        calls += 1
    assert calls == 23 and changed(before, model) == []
    model(batches[0])
    assert changed(before, model) != [] and model.counts.recoveries == 1  # adapting again, from the base

    calm, _ = bn_cnn()  # the same stream at lr=0.1 does not collapse
    adapt.wrap(calm, adapt.Tent(), lr=0.1, recovery=adapt.Recovery()).online()
    for call in range(40):
        calm(batches[call % 4])
    assert calm.counts.recoveries == 0 and calm.counts.steps == 40


@pytest.mark.parametrize("method", [adapt.Tent, adapt.BNAdapt])
def test_revert_restores_every_byte(method):
    model, batches = bn_cnn()
    model.train()  # a BatchNorm in training mode would update its statistics if the wrapper let it
    before = all_bytes(model)
    wrapped = adapt.wrap(model, method(), lr=0.5)
    assert wrapped is model and sorted(model.state_dict()) == sorted(before)
    model.online()
    for batch in batches:
        model(batch)
    adapted = ["1.bias", "1.weight", "4.bias", "4.weight"] if method is adapt.Tent else \
        ["1.num_batches_tracked", "1.running_mean", "1.running_var",
         "4.num_batches_tracked", "4.running_mean", "4.running_var"]
    assert changed(before, model) == adapted  # the method's tensors moved, and nothing else
    adapted_bytes = all_bytes(model)
    model.offline()
    model(batches[0])
    assert changed(adapted_bytes, model) == []  # offline serves without adapting
    assert model.delta.base_nbytes == sum(len(before[name]) for name in adapted)
    model.revert()
    assert changed(before, model) == []


def test_episodic_adapts_each_batch_from_the_base():
    model, batches = bn_cnn()
    adapt.wrap(model, adapt.Tent(), lr=0.5, episodic=True).online()
    model(batches[0])
    after_one = all_bytes(model)
    model(batches[1])
    model(batches[0])
    assert changed(after_one, model) == []


def test_bnadapt_serves_with_the_test_batches_statistics():
    model, batches = bn_cnn()
    model.eval()
    with torch.no_grad():
        source = model(batches[0])
    adapt.wrap(model, adapt.BNAdapt(), lr=1.0).online()
    with torch.no_grad():
        online = model(batches[0])
        model.train()  # batch statistics, as BNAdapt's online serving uses, for comparison
        for bn in (model[1], model[4]):
            bn.track_running_stats = False
        batch_normalised = model[:-1].forward(batches[0])
    assert torch.allclose(model[-1](batch_normalised), online) and not torch.allclose(source, online)
    # with lr=1 the running mean is the last batch's, which offline serving normalises with
    with torch.no_grad():
        features = model[0](batches[0])
    assert torch.allclose(model[1].running_mean, features.mean((0, 2, 3)), atol=1e-6)
    model.offline()
    with torch.no_grad():
        assert not torch.equal(model(batches[0]), source)


def test_tent_lowers_entropy_and_a_sign_flipped_objective_raises_it():
    class Ascent(adapt.Tent):
        def objective(self, outputs):
            return -super().objective(outputs)

    entropies = {}
    for method in (adapt.Tent, Ascent):
        model, batches = bn_cnn()
        adapt.wrap(model, method(), lr=0.5)
        start = served_entropy(model, batches[0])
        model.online()
        for _ in range(3):
            model(batches[0])
        entropies[method.__name__] = (start, served_entropy(model, batches[0]))
    tent, ascent = entropies["Tent"], entropies["Ascent"]
    assert tent[0] == ascent[0] and tent[1] < tent[0] < ascent[1], entropies


@pytest.mark.parametrize("build, method", [(bn_cnn, adapt.Tent), (norm_mlp, adapt.Tent), (bn_cnn, adapt.BNAdapt)])
def test_zero_lr_changes_nothing(build, method):
    model, batches = build()
    model.train()
    before = all_bytes(model)
    adapt.wrap(model, method(), lr=0)
    offline = served_entropy(model, batches[0])
    model.online()
    served = [model(batch) for batch in batches]
    assert changed(before, model) == []
    assert adapt.softmax_entropy(served[0]).item() == offline


class Detached(adapt.Tent):
    def objective(self, outputs):
        return super().objective(outputs.detach())


class Unrelated(adapt.Tent):
    """An objective that requires grad, through a tensor that is not an adapted parameter."""

    def objective(self, outputs):
        return torch.ones(1, requires_grad=True).sum()


@pytest.mark.parametrize("method, message", [(Detached, "Detached's objective does not require grad"),
                                             (Unrelated, "Unrelated's objective does not depend on any adapted")])
def test_a_detached_objective_is_refused(method, message):
    model, batches = bn_cnn()
    before = all_bytes(model)
    adapt.wrap(model, method(), lr=0.5).online()
    with pytest.raises(adapt.DetachedObjective, match=message):
        model(batches[0])
    assert changed(before, model) == []


def test_a_model_without_norm_layers_is_refused():
    torch.manual_seed(0)
    plain = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    with pytest.raises(adapt.NothingToAdapt, match="Tent adapts the affine parameters"):
        adapt.wrap(plain, adapt.Tent(), lr=0.1)
    with pytest.raises(adapt.NothingToAdapt, match="BNAdapt adapts the running statistics"):
        adapt.wrap(norm_mlp()[0], adapt.BNAdapt(), lr=0.1)
    assert not hasattr(plain, "online")


def test_wrap_keeps_the_modules_hooks_and_refuses_a_second_wrap():
    model, batches = norm_mlp()
    seen = []
    model.register_forward_hook(lambda module, inputs, output: seen.append(output.shape))
    adapt.wrap(model, adapt.Tent(), lr=0.1).online()
    assert model.to(torch.float32) is model
    model(batches[0])
    assert seen == [torch.Size([16, 6])] and len(model._forward_hooks) == 1
    with pytest.raises(ValueError, match="wrapped twice"):
        adapt.wrap(model, adapt.Tent(), lr=0.1)


RESTART_SCRIPT = MODELS_SOURCE + r'''
import sys

sys.path.append(PYTHON_DIR)
from torchnative.delta import Delta, tensors_sha256

model, _ = bn_cnn()
delta = Delta.load(sys.argv[1], model)
print(tensors_sha256(delta.names, delta.current()))
'''


def test_a_saved_delta_applies_after_a_restart_and_only_to_its_base(tmp_path):
    model, batches = bn_cnn()
    adapt.wrap(model, adapt.Tent(), lr=0.5).online()
    for batch in batches:
        model(batch)
    model.delta.save(tmp_path / "tent.delta")
    adapted = tensors_sha256(model.delta.names, model.delta.current())
    script = tmp_path / "restart.py"
    script.write_text(f"PYTHON_DIR = {PYTHON_DIR!r}\n" + RESTART_SCRIPT)
    result = subprocess.run([SHIM_PYTHON, str(script), str(tmp_path / "tent.delta")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == adapted  # a new process, the same adapted bytes

    # Another network, whose BatchNorm affine parameters are the same fresh ones as the base's
    other, _ = bn_cnn(seed=1)
    before = all_bytes(other)
    with pytest.raises(BaseMismatch, match="rest of the model hash to sha256 .* refusing to apply it"):
        Delta.load(tmp_path / "tent.delta", other)
    assert changed(before, other) == []
    # The same network, its adapted tensors already moved from the base
    with pytest.raises(BaseMismatch, match="adapted tensors hash to sha256 .* refusing to apply it"):
        Delta.load(tmp_path / "tent.delta", model)
    with pytest.raises(BaseMismatch, match="no parameter or buffer named 1.weight"):
        Delta.load(tmp_path / "tent.delta", torch.nn.Sequential(torch.nn.Linear(4, 8)))


class TiedLm(torch.nn.Module):
    """A GPT's tie in small: the head's weight is the token embedding's, one Parameter that
    state_dict lists under both names and named_parameters under the first only."""

    def __init__(self, vocabulary=7, width=5):
        super().__init__()
        torch.manual_seed(0)
        self.tok_emb = torch.nn.Embedding(vocabulary, width)
        self.norm = torch.nn.LayerNorm(width)
        self.head = torch.nn.Linear(width, vocabulary, bias=False)
        self.head.weight = self.tok_emb.weight

    def forward(self, ids):
        return self.head(self.norm(self.tok_emb(ids)))


def state_bytes(model):
    """{name: bytes} under every name state_dict gives (a tied tensor under each)."""
    return {name: tensor.numpy().tobytes() for name, tensor in model.state_dict().items()}


def test_a_delta_holds_a_tied_tensor_once_and_reverts_it_keeping_the_tie(tmp_path):
    model = TiedLm()
    before = state_bytes(model)
    assert sorted(before) == ["head.weight", "norm.bias", "norm.weight", "tok_emb.weight"]
    delta = Delta(model, list(before))  # state_dict's names, the tied one under both
    assert delta.names == ("tok_emb.weight", "norm.weight", "norm.bias")
    assert delta.base_nbytes == (7 * 5 + 5 + 5) * 4  # the tied weight copied once
    with torch.no_grad():
        model.head.weight.add_(1)
        model.norm.bias.sub_(0.5)
    offset = delta.offset()
    assert sorted(offset) == sorted(delta.names)
    assert torch.allclose(offset["tok_emb.weight"], torch.ones(7, 5)) and not offset["norm.weight"].any()
    adapted = state_bytes(model)
    delta.save(tmp_path / "tied.delta")
    delta.revert()
    assert state_bytes(model) == before and model.head.weight is model.tok_emb.weight

    loaded = Delta.load(tmp_path / "tied.delta", model)
    assert state_bytes(model) == adapted and model.head.weight is model.tok_emb.weight
    loaded.revert()
    assert state_bytes(model) == before
    # The same values untied are another base: its head is a tensor of its own.
    untied = TiedLm()
    untied.head.weight = torch.nn.Parameter(untied.tok_emb.weight.detach().clone())
    assert state_bytes(untied) == before
    with pytest.raises(BaseMismatch, match="rest of the model hash to sha256"):
        Delta.load(tmp_path / "tied.delta", untied)


def test_tent_on_a_tied_model_adapts_its_layernorm_and_reverts_every_byte():
    model = TiedLm()
    before = state_bytes(model)
    adapt.wrap(model, adapt.Tent(), lr=0.5).online()
    model(torch.arange(7))
    assert sorted(name for name, data in state_bytes(model).items() if data != before[name]) == \
        ["norm.bias", "norm.weight"]
    model.revert()
    assert state_bytes(model) == before and model.head.weight is model.tok_emb.weight


class OneRound:
    """A stand-in for torchnative.device.Device whose one round trains from `state`."""

    def __init__(self, state):
        self.state = state

    def participate_once(self, train):
        return train(self.state, {"round_id": 4, "task_id": "t"})


def test_a_non_persistent_buffer_is_not_part_of_the_base(tmp_path):
    """The base is what state_dict holds, the model a coordinator's round carries: a buffer
    registered with persistent=False is in named_buffers but not in state_dict, so it is not
    hashed, and a round's model is still recognised as the base."""
    model, batches = bn_cnn()
    model.register_buffer("mask", torch.arange(4.0), persistent=False)
    assert "mask" in dict(model.named_buffers()) and "mask" not in model.state_dict()
    base = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    adapt.wrap(model, adapt.Tent(), lr=0.5).online()
    assert model.delta.is_base(base)
    model(batches[0])
    state, examples = model.delta.publish(OneRound(base), 8)
    assert examples == 8 and list(state) == list(base)
    assert not torch.equal(state["1.weight"], base["1.weight"])
    assert not model.delta.is_base(dict(base, **{"0.weight": base["0.weight"] + 1}))
    # Saved and applied to the same network built again: its mask is not compared either.
    model.delta.save(tmp_path / "masked.delta")
    again, _ = bn_cnn()
    again.register_buffer("mask", torch.zeros(4), persistent=False)
    Delta.load(tmp_path / "masked.delta", again)
    assert torch.equal(again[1].weight, model[1].weight)
