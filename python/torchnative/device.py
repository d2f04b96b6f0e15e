"""A device that takes part in federated rounds, for models held as torch tensors.

    device = Device("127.0.0.1:50051", "device.key")
    def train(state, config):               # state: {name: torch.Tensor}, the round's model
        model.load_state_dict(state)
        ...                                  # local training
        return model.state_dict(), examples  # the trained state and how many examples it saw
    reports = device.run(train, rounds=3)
    final = device.fetch_model("task-1/3", wait=30)  # a stored model version, e.g. a round's aggregate

The C++ client registers the device's Ed25519 key, long-polls the coordinator, receives the
round's model over the data plane, and sends the example-weighted contribution into the hub's
deadline reduce (or, with round_transport="grpc", fetches the model and submits the trained one
over gRPC alone); `train` runs with the GIL held, everything else without it.
"""
import time

import torch

from torchnative import _device

RoundReport = _device.RoundReport


def tensors_of(arrays):
    """{name: torch.Tensor} over the client's fresh C-contiguous arrays (np.ascontiguousarray
    would give a 0-dim array, a BatchNorm's batch count, a dimension)."""
    return {name: torch.from_numpy(array) for name, array in arrays.items()}


def examples_of(weight):
    """weight as the example count a coordinator weighs a contribution by: a whole number, at least 1."""
    if int(weight) != weight or weight < 1:
        raise ValueError(f"a coordinator weighs contributions by a whole number of examples (>= 1), not {weight}")
    return int(weight)


class Device:
    """A device of the coordinator at `server` ("host:port"), identified by the Ed25519 key in
    `key_file` (created on first use).

    tls_ca: PEM root certificates; the channel uses TLS when given, plaintext otherwise.
    check_in_wait: how long, in seconds, one check-in may be held by the coordinator.
    max_model_bytes: the largest model, in bytes of tensor data, this device accepts, as
        `torchnative-device --max-model-bytes` (default 64 GiB). A round announcing a larger one is
        refused before anything is allocated for it: its RoundReport has contributed False and an
        error naming the model's size and this limit. Must be positive (ValueError otherwise).
    round_transport: "data_plane" (default): the model and the contribution travel on the round's
        data plane (the coordinator's store and hub ports); "grpc": for a device that can reach
        only the coordinator's gRPC port, the model comes by FetchModel and the trained model goes
        by SubmitUpdate. The aggregate is the same either way. Anything else: ValueError.
    when_no_task: "wait" (default): run() waits for its rounds however long no task is running;
        "exit": run() returns the reports it has once the coordinator says no task is running and
        every task this device took part in (or, if none, saw running) has ended, as
        `torchnative-device --when-no-task exit` does.
    min_noise_multiplier, max_noise_devices: this device's floor on the distributed DP noise it adds
        in a secure round, as `torchnative-device --min-noise-multiplier Z --max-noise-devices M`
        (docs/privacy.md, The device's noise floor): a round asking each device for a smaller share
        than that of a sum of M devices at multiplier Z, or for no noise, is refused before training
        (its RoundReport has contributed False and an error naming both). Both or neither (None);
        Z positive and finite, M an int from 1 to 2^32 - 1 (ValueError otherwise).
    """

    def __init__(self, server, key_file, *, tls_ca=None, check_in_wait=20.0,
                 max_model_bytes=_device.DEFAULT_MAX_MODEL_BYTES, round_transport="data_plane", when_no_task="wait",
                 min_noise_multiplier=None, max_noise_devices=None):
        self._device = _device.Device(server, key_file, tls_ca=tls_ca, check_in_wait=check_in_wait,
                                      max_model_bytes=max_model_bytes, round_transport=round_transport,
                                      when_no_task=when_no_task, min_noise_multiplier=min_noise_multiplier,
                                      max_noise_devices=max_noise_devices)

    @property
    def device_id(self):
        return self._device.device_id

    def fetch_model(self, version, *, wait=0.0):
        """The coordinator's stored model `version` ("<task id>/<number>", as `torchnative-admin
        rounds` names them: number 0 is the task's initial model, and a completed round that started
        from number N stored its aggregate as N + 1) as {name: torch.Tensor}, asked again until it
        is stored or `wait` seconds have passed; None if it is not stored by then."""
        give_up = time.monotonic() + wait
        pause = 0.05
        while True:
            arrays = self._device.fetch_model(version)
            if arrays is not None:
                return tensors_of(arrays)
            if time.monotonic() >= give_up:
                return None
            time.sleep(min(pause, max(give_up - time.monotonic(), 0.0)))
            pause = min(pause * 2, 0.5)

    def participate_once(self, train):
        """Takes part in one round (see run) and returns its RoundReport; an exception raised by
        train is raised here again, with its own type (the round then has no contribution from
        this device)."""
        failure = []

        def recorded(state, config):
            try:
                return train(state, config)
            except BaseException as error:
                failure.append(error)
                raise

        (report,) = self.run(recorded, rounds=1)
        if failure:
            raise failure[0]
        return report

    def run(self, train, *, rounds):
        """Takes part in `rounds` rounds (fewer when the work ends first and when_no_task is "exit");
        returns their RoundReports (contributed, error, num_examples; in a secure aggregation round,
        quantised: the words this device masked, a uint32 array whose last word is its capped
        example count). Ctrl-C ends it at once, even while a check-in is held."""
        def train_arrays(arrays, config):
            state = tensors_of(arrays)
            trained, examples = train(state, config)
            return {name: tensor.detach().cpu().contiguous().numpy() for name, tensor in trained.items()}, int(examples)
        return self._device.run(train_arrays, rounds=rounds)
