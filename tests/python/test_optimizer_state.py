"""Optimizers with their lr schedulers, and their state carried across torch.save: a run started
on one side (upstream or the shim), saved (model, optimizer and scheduler state_dicts) and
continued on the other gives the bits of the run that stayed on upstream."""
import json
import subprocess
import sys

import pytest

SHIM_PYTHON = sys.executable  # the venv running pytest: .venv, or .venv-asan under make asan-test
UPSTREAM_PYTHON = "/usr/bin/python3"

SCRIPT = r'''
import json, sys, torch
phase, directory, side = sys.argv[1], sys.argv[2], sys.argv[3]
STEPS = 4

def optimizer_and_scheduler(config, params):
    if config == "sgd_steplr":
        opt = torch.optim.SGD(params, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)
        return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    if config == "adam_cosine_foreach":
        opt = torch.optim.Adam(params, lr=0.01, amsgrad=True, foreach=True)
        return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=1e-4)
    if config == "adamw_onecycle":
        opt = torch.optim.AdamW(params, lr=0.01, weight_decay=0.05)
        return opt, torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.05, total_steps=2 * STEPS)
    if config == "rmsprop_plateau_foreach":
        opt = torch.optim.RMSprop(params, lr=0.01, momentum=0.5, centered=True, foreach=True)
        return opt, torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=0)
    if config == "adagrad_steplr_foreach":
        opt = torch.optim.Adagrad(params, lr=0.1, lr_decay=0.01, foreach=True)
        return opt, torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.9)
    raise ValueError(config)

def model():
    torch.manual_seed(0)
    # Never called: parameters for the optimizer, and BatchNorm's buffers in the state_dict.
    return torch.nn.Sequential(torch.nn.Linear(5, 12), torch.nn.BatchNorm1d(12), torch.nn.Linear(12, 2))


def train(net, opt, scheduler, first):
    trace = []
    for step in range(first, first + STEPS):
        opt.zero_grad()
        # Gradients by hand (elementwise, so both sides' are the same bits): only the optimizer,
        # its scheduler and their state decide the result.
        for p in net.parameters():
            p.grad = torch.cos(p.detach() * (step + 1))
        opt.step()
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
            scheduler.step(1.0)  # a loss that never improves: the lr halves after each step
        else:
            scheduler.step()
        trace.append([group["lr"] for group in opt.param_groups])
    return trace

def first_phase(config):
    net = model()
    opt, scheduler = optimizer_and_scheduler(config, net.parameters())
    train(net, opt, scheduler, 0)
    state = {"model": net.state_dict(), "optimizer": opt.state_dict(), "scheduler": scheduler.state_dict()}
    torch.save(state, f"{directory}/{config}-{side}.pt")


def second_phase(config, first_side):
    net = model()
    opt, scheduler = optimizer_and_scheduler(config, net.parameters())
    saved = torch.load(f"{directory}/{config}-{first_side}.pt")
    net.load_state_dict(saved["model"])
    opt.load_state_dict(saved["optimizer"])
    scheduler.load_state_dict(saved["scheduler"])
    trace = train(net, opt, scheduler, STEPS)
    state = {k: v.flatten().tolist() for k, v in net.state_dict().items() if v.is_floating_point()}
    return {"trace": trace, "parameters": {k: [x.hex() for x in v] for k, v in state.items()}}


# One process per side and phase (a process per run cost minutes under the sanitizers): the
# first phase saves every configuration's state; the second continues each from both sides'.
if phase == "first":
    for config in CONFIGS:
        first_phase(config)
else:
    print(json.dumps({f"{config} from {first_side}": second_phase(config, first_side)
                      for config in CONFIGS for first_side in ("upstream", "shim")}))
'''

PYTHONS = {"shim": SHIM_PYTHON, "upstream": UPSTREAM_PYTHON}
CONFIGS = ["sgd_steplr", "adam_cosine_foreach", "adamw_onecycle", "rmsprop_plateau_foreach", "adagrad_steplr_foreach"]


def run(side, phase, directory):
    script = f"CONFIGS = {CONFIGS!r}\n" + SCRIPT
    process = subprocess.run([PYTHONS[side], "-c", script, phase, str(directory), side], capture_output=True,
                             text=True, timeout=600)
    assert process.returncode == 0, f"{side}: {process.stderr}"
    return process.stdout


@pytest.fixture(scope="module")
def continued(tmp_path_factory):
    """{second side: {"<config> from <first side>": the continued run's record}}."""
    directory = tmp_path_factory.mktemp("optimizer-state")
    for side in PYTHONS:
        run(side, "first", directory)
    return {side: json.loads(run(side, "second", directory).splitlines()[-1]) for side in PYTHONS}


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("first_side,second_side", [("upstream", "shim"), ("shim", "upstream"), ("shim", "shim")])
def test_run_continued_across_sides_has_upstreams_bits(continued, config, first_side, second_side):
    expected = continued["upstream"][f"{config} from upstream"]
    assert continued[second_side][f"{config} from {first_side}"] == expected
