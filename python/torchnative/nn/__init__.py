"""torchnative.nn: training and adaptation across devices. `torchnative.nn.federated` holds the
Engine (a model taking part in a coordinator's rounds, or averaging with peers over
torch.distributed) and the aggregators it names."""
