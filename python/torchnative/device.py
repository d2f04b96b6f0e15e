"""A device that takes part in federated rounds, for models held as torch tensors.

    device = Device("127.0.0.1:50051", "device.key")
    def train(state, config):               # state: {name: torch.Tensor}, the round's model
        model.load_state_dict(state)
        ...                                  # local training
        return model.state_dict(), examples  # the trained state and how many examples it saw
    reports = device.run(train, rounds=3)

The C++ client registers the device's Ed25519 key, long-polls the coordinator, receives the
round's model over the data plane, and sends the example-weighted contribution into the hub's
deadline reduce; `train` runs with the GIL held, everything else without it.
"""
import numpy as np
import torch

from torchnative import _device

RoundReport = _device.RoundReport


class Device:
    def __init__(self, server, key_file, *, tls_ca=None, check_in_wait=20.0):
        self._device = _device.Device(server, key_file, tls_ca=tls_ca, check_in_wait=check_in_wait)

    @property
    def device_id(self):
        return self._device.device_id

    def run(self, train, *, rounds):
        """Takes part in `rounds` rounds; returns their RoundReports (contributed, error, ...)."""
        def train_arrays(arrays, config):
            state = {name: torch.from_numpy(np.ascontiguousarray(array)) for name, array in arrays.items()}
            trained, examples = train(state, config)
            return {name: tensor.detach().cpu().contiguous().numpy() for name, tensor in trained.items()}, int(examples)
        return self._device.run(train_arrays, rounds=rounds)
