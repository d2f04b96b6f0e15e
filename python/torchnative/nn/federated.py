"""Federated training and test-time adaptation of a torch model, from the device's side.

    engine = federated.Engine(model, aggregator=federated.FedAvg(),
                              coordinator="127.0.0.1:50051", key="device.key")
    report = engine.participate(batches, weight=n_local_samples)

One `participate` call is one round: the round's model (the coordinator's aggregate of the round
before, or the task's initial model) is loaded into `model`; the local steps run over `batches`
(supervised training with `loss` and `optimizer` when `method` is None, or a test-time method of
`torchnative.adapt`, such as Tent, which adapts on the inputs alone); the trained tensors, the
round's model plus this device's delta, go to the coordinator, which averages the contributions
of the round's devices weighted by `weight`. That average is the model of the task's next round,
which the next `participate` call loads; until then `model` holds this device's own training,
unless `participate(..., apply_aggregate=True)` waits for the round to close and loads its
aggregate before returning (for a task's last round, or a model to be served at once).

Without a coordinator (`coordinator=None`) the same weighted average is taken among peers over
torch.distributed's default process group (`init_process_group(backend="local")` on the shim),
and every peer's model holds it when `participate` returns. A world of one is refused
(`CohortOfOne`): an average over one model is that model, and would prove nothing.

Which aggregation a coordinator's round applies is the task's strategy, chosen when the task is
created; a device is told it only if the task says so in its fit configuration (`"strategy"`,
e.g. `--params '{"fit_config": {"strategy": "fedavg"}}'`) or sends a strategy's client-side
parameter (FedProx's `proximal_mu`). When it is told, an Engine whose aggregator names another
strategy refuses the round (`AggregatorMismatch`) before training; otherwise the task decides.

A tied tensor (a GPT's head sharing its token embedding's weight) is trained, measured and
averaged among peers once; with a coordinator it travels under each of the names state_dict
gives it, as the task's model file lists them (torchnative.model_files saves a state_dict as it
is), so the coordinator averages the same contributions under both names into the same bytes,
and loading the aggregate keeps the tie (a round's model whose tied names differ is refused:
TiedMismatch).

Averages are exact to the rounding of float32: each contribution is weighted in float64,
summed in a fixed order (the coordinator's hub in ascending device id, peers in ascending rank),
divided once and rounded once to the tensor's dtype. Integer tensors (BatchNorm's batch counts)
are not averaged: the coordinator keeps the global model's, peers keep their own.
"""
import contextlib
import dataclasses
import math
import time

import torch
import torch.distributed as dist
from torch import nn

from torchnative import adapt, model_files
from torchnative.delta import Delta, fold_ties, one_name_each


class AggregatorMismatch(ValueError):
    """The task's strategy, as the round tells it, is not the Engine's aggregator."""


class CohortOfOne(ValueError):
    """A peer average over a world of one process."""


class FedAvg:
    """The example-weighted mean of the devices' trained models (McMahan et al. 2017): the name
    of the strategy a coordinator's task must use (`create-task --strategy fedavg`); the
    coordinator does the averaging."""

    name = "fedavg"

    def __repr__(self):
        return "FedAvg()"


# Client-side parameters that only one strategy sends to its devices.
STRATEGY_OF_CLIENT_PARAMETER = {"proximal_mu": "fedprox"}


def check_aggregator(aggregator, config):
    """Refuses (AggregatorMismatch) a round whose configuration names a strategy other than
    aggregator's; a configuration that names none leaves the choice to the task."""
    told = {'its fit configuration\'s "strategy"': config.get("strategy")}
    told.update({f'the client-side parameter "{key}"': strategy
                 for key, strategy in STRATEGY_OF_CLIENT_PARAMETER.items() if key in config})
    for source, strategy in told.items():
        if strategy is not None and strategy != aggregator.name:
            raise AggregatorMismatch(
                f"round {config.get('round_id')} of task '{config.get('task_id')}' aggregates with "
                f"{strategy} (from {source}), but this Engine's aggregator is {aggregator!r} "
                f"({aggregator.name}): refusing to train for it")


@dataclasses.dataclass
class Report:
    """What one participate call did.

    round_id, task_id, model_version: the coordinator's round and the model it started from
        (None among peers).
    contributed, error: whether the contribution reached the aggregation, and why not (or why
        the aggregate apply_aggregate asked for was not loaded).
    contributors: the ranks averaged among peers; None with a coordinator, which does not tell
        its devices (its round listing does).
    weight: this device's weight; total_weight: the cohort's (peers only).
    metrics: the mean loss (supervised) or mean softmax entropy (a test-time method) over the
        batches with the round's model (`*_before`) and after the local steps (`*_after`).
    delta_norm: the 2-norm of the trained tensors' change in the local steps.
    bytes_received, bytes_sent: tensor bytes of the round's model as received and of the
        trained model handed to the client (which packs it as float64 on the data plane);
        among peers, both are the bytes of the float64 buffer all-reduced.
    aggregate_applied: whether `model` holds the cohort's average on return.
    aggregate_version: the coordinator's model version loaded into `model` when it was applied
        ("task/N+1" for a round that started from "task/N").
    """
    round_id: int = None
    task_id: str = None
    model_version: str = None
    contributed: bool = False
    error: str = ""
    contributors: list = None
    weight: float = 0
    total_weight: float = None
    metrics: dict = dataclasses.field(default_factory=dict)
    delta_norm: float = 0.0
    bytes_received: int = 0
    bytes_sent: int = 0
    aggregate_applied: bool = False
    aggregate_version: str = None


def tensor_bytes(tensors):
    return sum(tensor.numel() * tensor.element_size() for tensor in tensors)


def inputs_of(batch):
    """A batch's inputs: the batch itself, or the first item of an (inputs, targets) pair."""
    return batch[0] if isinstance(batch, (tuple, list)) else batch


@contextlib.contextmanager
def own_forward(model):
    """model with its class's forward while the Engine's local steps run: the adapter an
    adapt.wrap attached (its base, its optimizer) takes no part in them, and is back afterwards."""
    attached = vars(model).pop("forward", None)
    try:
        yield model
    finally:
        if attached is not None:
            model.forward = attached


def cohort_size(group=None):
    """The world size of group (torch.distributed's default group when None); refuses a world of
    one (CohortOfOne) and an uninitialised torch.distributed."""
    if not dist.is_initialized():
        raise RuntimeError("a peer average needs torch.distributed initialised: "
                           'call torch.distributed.init_process_group(backend="local", ...) first')
    world = dist.get_world_size(group)
    if world < 2:
        raise CohortOfOne(f"a peer average over a world of {world} process is that process's own model: "
                          "FedAvg needs at least two peers")
    return world


def peer_average(tensors, weight, group=None):
    """The weighted average of {name: tensor} over the peers of group (torch.distributed's
    default group when None), each peer giving its own tensors and weight: one float64 all-reduce
    of [weight * x ..., weight], summed in ascending rank order, divided and rounded once.
    Returns ({name: average} for the floating tensors, total weight, world size, bytes reduced).
    A world of one is refused (CohortOfOne)."""
    world = cohort_size(group)
    if not weight > 0 or not math.isfinite(weight):
        raise ValueError(f"a peer's weight must be positive and finite, not {weight}")
    floating = {name: tensor for name, tensor in tensors.items() if tensor.is_floating_point()}
    pieces = [tensor.detach().reshape(-1).to(torch.float64) * float(weight) for tensor in floating.values()]
    flat = torch.cat(pieces + [torch.tensor([float(weight)], dtype=torch.float64)])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=group)
    total = flat[-1]
    averages, offset = {}, 0
    for name, tensor in floating.items():
        piece = flat[offset:offset + tensor.numel()] / total
        averages[name] = piece.reshape(tensor.shape).to(tensor.dtype)
        offset += tensor.numel()
    return averages, total.item(), world, tensor_bytes([flat])


def load_state(model, state):
    """Loads a round's model or aggregate ({name: tensor} under state_dict's names) into model:
    load_state_dict copies a tied tensor's names into the one tensor, so the tie is kept; names
    of one tied tensor holding different values are refused first (TiedMismatch), as
    load_state_dict would keep the last one silently."""
    fold_ties(model, state)
    model.load_state_dict(state)


def save_initial_model(model, path):
    """Writes model's state_dict as a safetensors file, the form `torchnative-admin create-task
    --model FILE` takes a task's initial model in (torchnative.model_files.save)."""
    model_files.save(model.state_dict(), path)


class Engine:
    """A model taking part in federated rounds (see the module's docstring).

    method: None for supervised training (`loss` over (inputs, targets) batches, `optimizer`
        over all parameters, `epochs` passes), or a `torchnative.adapt` method (Tent) adapting
        on the inputs with `lr`, from each round's model. A model wrapped by adapt.wrap is taken
        as well: the Engine's steps run with the model's own forward, leaving the wrapper's base
        as it was, so its `revert()` still writes back the bytes the model was wrapped with.
    optimizer: a callable taking (parameters, lr=lr), as adapt.wrap's; plain SGD by default.
    coordinator, key: the coordinator's "host:port" and this device's Ed25519 key file (made on
        first use); coordinator=None averages among torch.distributed peers instead.
    device_options: passed to torchnative.device.Device (tls_ca, check_in_wait, ...).
    """

    def __init__(self, model, method=None, aggregator=None, coordinator=None, key=None, *,
                 loss=None, optimizer=None, lr=0.01, epochs=1, group=None, **device_options):
        self.model, self.method = model, method
        self.aggregator = aggregator or FedAvg()
        if not isinstance(self.aggregator, FedAvg):
            raise ValueError(f"Engine aggregates with FedAvg() only, not {self.aggregator!r}")
        self.loss = loss or nn.CrossEntropyLoss()
        self.make_optimizer = optimizer or torch.optim.SGD
        self.lr, self.epochs, self.group = lr, epochs, group
        self.device = None
        if coordinator is not None:
            if key is None:
                raise ValueError("a device of a coordinator needs its key file (key=...)")
            from torchnative.device import Device  # the C++ client, needed only with a coordinator
            self.device = Device(coordinator, key, **device_options)

    def trained_names(self):
        """The tensors the local steps change: the method's adapted ones, or every floating
        parameter and buffer in supervised training."""
        if self.method is not None:
            return self.method.adapted_names(self.model)
        floating = [name for name, tensor in self.model.state_dict().items() if tensor.is_floating_point()]
        return list(one_name_each(self.model, floating))  # a tied tensor once, under its first name

    def local_steps(self, batches):
        """Runs the local steps over batches (a list) on the model; returns (metrics, delta norm)."""
        delta = Delta(self.model, self.trained_names())
        with own_forward(self.model):
            metrics = self.supervised(batches) if self.method is None else self.adapted(batches)
        norm = math.sqrt(sum(offset.double().pow(2).sum().item() for offset in delta.offset().values()))
        return metrics, norm

    def mean_loss(self, batches):
        """The loss averaged over batches, in eval mode, no gradient (the model's mode restored)."""
        training = self.model.training
        self.model.eval()
        with torch.no_grad():
            mean = sum(self.loss(self.model(inputs), targets).item() for inputs, targets in batches) / len(batches)
        self.model.train(training)
        return mean

    def supervised(self, batches):
        before = self.mean_loss(batches)
        optimizer = self.make_optimizer(self.model.parameters(), lr=self.lr)
        self.model.train()
        for _ in range(self.epochs):
            for inputs, targets in batches:
                optimizer.zero_grad()
                self.loss(self.model(inputs), targets).backward()
                optimizer.step()
        return {"loss_before": before, "loss_after": self.mean_loss(batches)}

    def adapted(self, batches):
        # A fresh adapter per round: its base and optimizer moments belong to this round's model.
        # No recovery: a revert mid-round would contribute the round's model as this device's steps.
        adapter = adapt.Adapter(self.model, self.method, self.lr, self.make_optimizer, episodic=False,
                                recovery=None)

        def mean_entropy():
            with torch.no_grad():
                return sum(adapt.softmax_entropy(adapter.forward(inputs_of(batch))).item()
                           for batch in batches) / len(batches)

        before = mean_entropy()
        adapter.online()
        for _ in range(self.epochs):
            for batch in batches:
                adapter.forward(inputs_of(batch))
        adapter.offline()
        return {"entropy_before": before, "entropy_after": mean_entropy()}

    def participate(self, batches, weight=None, *, apply_aggregate=False, aggregate_grace=10.0):
        """One round (see the module's docstring); weight defaults to the number of examples in
        batches. Returns a Report.

        apply_aggregate (coordinator only; peers always end with the average): after contributing,
        wait for the round's aggregate and load it into `model`, for at most the round's deadline
        plus aggregate_grace seconds (the coordinator's time to average and store it). A round
        closed without an aggregate (too few contributions) leaves the device's own training in
        `model`, aggregate_applied False and the reason in `error`."""
        batches = list(batches)
        if not batches:
            raise ValueError("participate needs at least one batch")
        if weight is None:
            weight = sum(len(inputs_of(batch)) for batch in batches)
        if self.device is None:
            return self.participate_with_peers(batches, weight)
        report, config = self.participate_in_round(batches, weight)
        if apply_aggregate and report.contributed:
            self.load_aggregate(report, config, aggregate_grace)
        return report

    def participate_with_peers(self, batches, weight):
        cohort_size(self.group)  # a cohort of one is refused before the model is trained
        metrics, norm = self.local_steps(batches)
        state = self.model.state_dict()
        averages, total, world, nbytes = peer_average({name: state[name] for name in self.trained_names()},
                                                      weight, self.group)
        with torch.no_grad():
            for name, average in averages.items():
                state[name].copy_(average)
        return Report(contributed=True, contributors=list(range(world)), weight=weight, total_weight=total,
                      metrics=metrics, delta_norm=norm, bytes_received=nbytes, bytes_sent=nbytes,
                      aggregate_applied=True)

    def participate_in_round(self, batches, weight):
        """One round of the coordinator's; returns the Report and the round's configuration."""
        from torchnative.device import examples_of
        report, round_config = Report(weight=examples_of(weight)), {}

        def train(state, config):
            check_aggregator(self.aggregator, config)
            round_config.update(config)
            report.round_id, report.task_id = config["round_id"], config["task_id"]
            # The configuration numbers the task's model versions; the admin CLI names them task/number.
            report.model_version = f"{config['task_id']}/{config['model_version']}"
            report.bytes_received = tensor_bytes(state.values())
            load_state(self.model, state)
            report.metrics, report.delta_norm = self.local_steps(batches)
            trained = {name: tensor.detach() for name, tensor in self.model.state_dict().items()}
            report.bytes_sent = tensor_bytes(trained.values())
            return trained, report.weight

        outcome = self.device.participate_once(train)
        report.contributed, report.error = outcome.contributed, outcome.error
        # A round left before training (a model above max_model_bytes, say) is known by the outcome alone.
        report.round_id, report.task_id = report.round_id or outcome.round_id, report.task_id or outcome.task_id
        return report, round_config

    def load_aggregate(self, report, config, grace):
        """Waits for the aggregate of the round config describes (stored as the next model version)
        until the round's deadline plus grace seconds, and loads it into the model."""
        version = f"{config['task_id']}/{config['model_version'] + 1}"
        wait = config["deadline_unix_ms"] / 1000 - time.time() + grace
        aggregate = self.device.fetch_model(version, wait=max(wait, 0.0))
        if aggregate is None:
            report.error = (f"round {report.round_id} of task '{report.task_id}' stored no aggregate ({version}) "
                            f"by its deadline and {grace} s after: it closed without one (too few contributions), "
                            "so the model holds this device's own training")
            return
        load_state(self.model, aggregate)
        report.aggregate_applied, report.aggregate_version = True, version
