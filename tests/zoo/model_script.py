"""One torchvision classifier, one interpreter, one dtype (run by zoo.py, under upstream or the shim).

  model_script.py NAME DTYPE WEIGHTS RECORD [--write]

With --write (upstream, float32) the model is built from seed 0 and its state_dict, the inputs
and the targets are saved to WEIGHTS; otherwise they are loaded from it, so both sides hold the
same weights whatever their initialisers draw. Then, in DTYPE: an eval-mode forward (the logits)
and a training-mode forward and backward (the loss, every parameter's gradient), saved to RECORD
(a folder of .npy files; the logits first, so a failing training step still leaves them). Dropout and stochastic depth are set to 0 for the training step: their draws in float64
are not float32's, so the reference run could not share them.
"""
import os
import sys

import numpy
import torch
import torchvision

BATCH = 2


def options(name):
    """The builder's arguments and the input's side: the smallest image each family accepts near 64."""
    if name.startswith("vit_"):
        side = 56 if name == "vit_h_14" else 64
        return {"image_size": side}, side
    if name == "inception_v3":
        return {"init_weights": True, "aux_logits": True}, 299  # its auxiliary head's 5 x 5 conv needs it
    if name == "googlenet":
        return {"init_weights": True, "aux_logits": True}, 64
    if name == "maxvit_t":
        return {}, 224  # every stage's grid must divide into 7 x 7 partitions
    return {}, 64


def build(name):
    kwargs, side = options(name)
    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(num_classes=10, **kwargs)
    inputs = torch.randn(BATCH, 3, side, side)
    targets = torch.tensor([1, 7][:BATCH])
    return model, inputs, targets


def without_randomness(model):
    for module in model.modules():
        if hasattr(module, "p") and isinstance(module.p, float):
            module.p = 0.0


def loss_of(outputs, targets):
    """Cross entropy of the logits, plus the auxiliary heads' (googlenet, inception_v3) in training."""
    heads = [outputs] if isinstance(outputs, torch.Tensor) else [o for o in outputs if o is not None]
    return sum(torch.nn.functional.cross_entropy(head, targets) for head in heads)


def main():
    name, dtype, weights, record = sys.argv[1:5]
    model, inputs, targets = build(name)
    if "--write" in sys.argv:
        torch.save({"state": model.state_dict(), "inputs": inputs, "targets": targets}, weights)
    else:
        saved = torch.load(weights)
        model.load_state_dict(saved["state"])
        inputs, targets = saved["inputs"], saved["targets"]
    model = model.to(getattr(torch, dtype))
    inputs = inputs.to(getattr(torch, dtype))
    with torch.no_grad():
        logits = model.eval()(inputs)
    # Written before the training step, so a step the shim refuses still leaves eval's verdict.
    os.makedirs(record)
    numpy.save(os.path.join(record, "logits.npy"), logits.numpy().reshape(-1))
    without_randomness(model)
    loss = loss_of(model.train()(inputs), targets)
    loss.backward()
    save_training(record, model, loss)


def save_training(record, model, loss):
    """The training step's record as .npy files in the run's dtype; the gradients written parameter
    by parameter into one file, which zoo.py maps rather than reads (vit_h_14 has 632 million)."""
    parameters = list(model.parameters())
    numpy.save(os.path.join(record, "loss.npy"), loss.detach().numpy().reshape(1))
    numpy.save(os.path.join(record, "unused.npy"), numpy.array([p.grad is None for p in parameters]))
    numpy.save(os.path.join(record, "shapes.npy"), numpy.array([n for p in parameters for n in (p.dim(), *p.shape)]))
    grads = numpy.lib.format.open_memmap(os.path.join(record, "grads.npy"), mode="w+",
                                         dtype=loss.detach().numpy().dtype,
                                         shape=(sum(p.numel() for p in parameters),))
    offset = 0
    for p in parameters:
        if p.grad is not None:
            grads[offset:offset + p.numel()] = p.grad.reshape(-1).numpy()
        offset += p.numel()
    grads.flush()


if __name__ == "__main__":
    main()
