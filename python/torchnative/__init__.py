"""torchnative: the Python side of the project. `torchnative.device` takes part in federated
rounds from Python (the C++ client under it, torchnative._device)."""
