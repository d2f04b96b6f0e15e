"""softmax, log_softmax, nll_loss and cross_entropy, forward and gradients, bit for bit as
upstream's CPU kernels give them: along the last dim (a row summed on vector lanes) and along
other dims (columns on vectors, the last inner % 8 one by one), float32 and float64;
cross_entropy in the demo GPT's layout (logits batch x vocabulary x positions, a transposed view)
and with class probabilities as targets;
nll_loss's cascade sums of the loss and the total weight (1-, 2- and 3-d inputs, weights, ignored
samples, each reduction); nn.MultiheadAttention's training path in the demo GPT's shape (every
gradient, given one output gradient), whose softmax backward is a last-dim row, and as
cross-attention with dropout, bias_k/bias_v and a key padding mask.
Each side builds the same inputs from integers (Python's random module), so no value comes from
either torch's generator."""
import pytest

from test_training_apis import assert_agree, run_both

BODY = r'''
import random

import torch.nn.functional as F


def floats(shape, seed, scale=3.0):
    draw = random.Random(seed)
    count = 1
    for size in shape:
        count *= size
    return torch.tensor([draw.uniform(-scale, scale) for _ in range(count)]).reshape(shape)


def classes(count, seed, n):
    draw = random.Random(seed)
    return torch.tensor([draw.randrange(n) for _ in range(count)])


def forward_and_gradient(function, x, seed):
    x = x.detach().requires_grad_()
    y = function(x)
    weights = floats(y.shape, seed)
    gradient, = torch.autograd.grad(y, x, weights.to(y.dtype))
    return [y, gradient]
'''

SOFTMAX = BODY + r'''
SHAPES = [((37,), 0), ((), 0), ((6, 5), 1), ((3, 64), 1), ((5, 37), 1), ((5, 37), 0), ((2, 9, 11), 1),
          ((2, 97, 64), 1), ((3, 20, 8), 1), ((2, 9, 3, 5), 2), ((2, 300, 17), 1), ((200, 9), 0)]


def main():
    results = {}
    for dtype in (torch.float32, torch.float64):
        for index, (shape, dim) in enumerate(SHAPES):
            x = floats(shape, index, 5.0).to(dtype)
            for name in ("softmax", "log_softmax"):
                call = lambda t, f=getattr(torch, name), d=dim: f(t, d)
                results[f"{name}/{dtype}/{shape}/{dim}"] = forward_and_gradient(call, x, 100 + index)
    transposed = floats((64, 97), 7).t()
    results["log_softmax/transposed"] = forward_and_gradient(lambda t: torch.log_softmax(t, 0), transposed, 8)
    return results
'''

CROSS_ENTROPY = BODY + r'''
def main():
    logits = floats((8, 64, 97), 1).transpose(1, 2)  # the demo GPT's head output
    targets = classes(8 * 64, 2, 97).reshape(8, 64)
    x = logits.detach().requires_grad_()
    loss = F.cross_entropy(x, targets)
    gradient, = torch.autograd.grad(loss, x)
    results = {"gpt": [loss, gradient]}
    probabilities = torch.softmax(floats((6, 5, 3), 3), 1)  # class probabilities as targets
    weight = floats((5,), 4).abs() + 0.1
    for reduction in ("mean", "sum", "none"):
        for weighted in (False, True):
            call = lambda t, r=reduction, w=weight if weighted else None: F.cross_entropy(
                t, probabilities, w, reduction=r)
            results[f"probabilities/{reduction}/{weighted}"] = forward_and_gradient(call, floats((6, 5, 3), 5), 6)
    return results
'''

NLL_LOSS = BODY + r'''
def main():
    results = {}
    weight = floats((7,), 3).abs() + 0.1
    for count in (1, 17, 300):  # the cascade's blocks of 16 samples, and the level above
        for name, shape, target_shape in (("2d", (count, 7), (count,)), ("3d", (5, 7, count), (5, count))):
            x = floats(shape, count)
            targets = classes(len(x.flatten()) // 7, count + 1, 8).reshape(target_shape)
            targets[targets == 7] = -100  # ignored
            for reduction in ("mean", "sum", "none"):
                for weighted in (False, True):
                    call = lambda t, r=reduction, w=weight if weighted else None: F.nll_loss(t, targets, w, reduction=r)
                    results[f"{name}/{count}/{reduction}/{weighted}"] = forward_and_gradient(call, x, 7)
    many = classes(5000, 6, 7)  # a third cascade level (blocks of 4096)
    results["5000/mean/True"] = forward_and_gradient(lambda t: F.nll_loss(t, many, weight), floats((5000, 7), 5), 7)
    one = lambda t: F.nll_loss(t, torch.tensor(2), weight)
    results["1d"] = forward_and_gradient(one, floats((7,), 4), 5)
    return results
'''

ATTENTION = BODY + r'''
def main():
    attention = torch.nn.MultiheadAttention(64, 4, batch_first=True)
    with torch.no_grad():
        for index, parameter in enumerate(attention.parameters()):
            parameter.copy_(floats(parameter.shape, 100 + index, 0.2))
    x = floats((8, 64, 64), 1).requires_grad_()
    causal = torch.triu(torch.full((64, 64), float("-inf")), diagonal=1)
    results = {}
    for name, mask in (("causal", causal), ("unmasked", None)):
        out = attention(x, x, x, attn_mask=mask, need_weights=False)[0]
        inputs = [x] + list(attention.parameters())
        results[name] = [out, torch.autograd.grad(out, inputs, floats(out.shape, 2, 0.01))]
    # Cross-attention with dropout (one seeded mask), bias_k/bias_v, a key padding mask and the
    # averaged weights: the other pieces of F.multi_head_attention_forward's backward.
    attention = torch.nn.MultiheadAttention(16, 2, dropout=0.25, batch_first=True, add_bias_kv=True)
    with torch.no_grad():
        for index, parameter in enumerate(attention.parameters()):
            parameter.copy_(floats(parameter.shape, 200 + index, 0.3))
    query, memory = floats((3, 5, 16), 3).requires_grad_(), floats((3, 7, 16), 4).requires_grad_()
    padding = torch.zeros(3, 7, dtype=torch.bool)
    padding[1, 5:] = True
    torch.manual_seed(0)
    out, weights = attention(query, memory, memory, key_padding_mask=padding)
    total = (out * floats(out.shape, 5, 0.1)).sum() + (weights * floats(weights.shape, 6)).sum()
    results["cross_dropout"] = [out, weights, torch.autograd.grad(total, [query, memory] + list(attention.parameters()))]
    return results
'''

CASES = {"softmax": SOFTMAX, "cross_entropy_gpt_layout": CROSS_ENTROPY, "nll_loss": NLL_LOSS,
         "multi_head_attention": ATTENTION}


@pytest.mark.parametrize("body", list(CASES.values()), ids=list(CASES))
def test_bits_equal_upstream(body, tmp_path):
    assert_agree(*run_both(body, tmp_path))
