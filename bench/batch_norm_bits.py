"""resnet18's BatchNorm2d layers on the shim against upstream, to the bit: upstream writes each
layer's state, the input it sees in a training forward of the model and a gradient for its
output, with its own results; the shim loads them, runs each layer alone and counts the elements
that differ and by how many units in the last place (ulps), per result, in training and in eval
mode. Not a test: it prints counts.

usage: /usr/bin/python3 bench/batch_norm_bits.py --write DIR      (upstream)
       .venv/bin/python bench/batch_norm_bits.py --compare DIR   (the shim)
"""
import argparse
import os

import numpy as np
import torch

RESULTS = ("output", "grad_input", "grad_weight", "grad_bias", "running_mean", "running_var")


def run_layer(state, x, grad, training):
    """One BatchNorm2d with `state`: forward of `x` (training or eval) and backward of `grad`."""
    layer = torch.nn.BatchNorm2d(state["weight"].numel())
    layer.load_state_dict(state)
    layer.train(training)
    x = x.clone().requires_grad_()
    out = layer(x)
    out.backward(grad)
    return dict(zip(RESULTS, (out, x.grad, layer.weight.grad, layer.bias.grad, layer.running_mean,
                              layer.running_var)))


def write(directory):
    import torchvision
    torch.manual_seed(0)
    model = torchvision.models.resnet18().train()
    inputs = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.register_forward_hook(lambda m, args, out, name=name: inputs.setdefault(name, args[0].detach()))
    model(torch.randn(2, 3, 224, 224))
    layers = []
    for name, module in model.named_modules():
        if name in inputs:
            # The state before the model's forward moved it: a fresh layer's, with random affine terms.
            state = {k: v.clone() for k, v in torch.nn.BatchNorm2d(module.num_features).state_dict().items()}
            state["weight"], state["bias"] = torch.randn_like(state["weight"]), torch.randn_like(state["bias"])
            state["running_var"] = torch.rand_like(state["running_var"]) + 0.5
            grad = torch.randn_like(inputs[name])
            expected = {mode: {k: v.detach().clone() for k, v in run_layer(state, inputs[name], grad, mode).items()}
                        for mode in (True, False)}
            layers.append({"name": name, "state": state, "input": inputs[name], "grad": grad,
                           "expected": expected})
    os.makedirs(directory, exist_ok=True)
    torch.save(layers, os.path.join(directory, "resnet18_batch_norm.pt"))
    print(f"{len(layers)} BatchNorm2d layers written to {directory}")


def ordered(a):
    """float32 bits as integers whose difference counts ulps across zero too."""
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF), i)


def compare(directory):
    layers = torch.load(os.path.join(directory, "resnet18_batch_norm.pt"))
    for training in (True, False):
        differing = {k: 0 for k in RESULTS}
        worst = {k: 0 for k in RESULTS}
        total = {k: 0 for k in RESULTS}
        for layer in layers:
            ours = run_layer(layer["state"], layer["input"], layer["grad"], training)
            for key in RESULTS:
                a = ours[key].detach().numpy().ravel()
                b = layer["expected"][training][key].numpy().ravel()
                ulps = np.abs(ordered(a) - ordered(b))
                differing[key] += int(np.count_nonzero(ulps))
                worst[key] = max(worst[key], int(ulps.max()))
                total[key] += a.size
        print(f"{'training' if training else 'eval'} mode, {len(layers)} layers:")
        for key in RESULTS:
            print(f"    {key:13s} {differing[key]:9d} of {total[key]:9d} elements differ, at most {worst[key]} ulp")


def main():
    parser = argparse.ArgumentParser()
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", metavar="DIR")
    group.add_argument("--compare", metavar="DIR")
    args = parser.parse_args()
    write(args.write) if args.write else compare(args.compare)


if __name__ == "__main__":
    main()
