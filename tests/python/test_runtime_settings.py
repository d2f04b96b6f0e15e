"""The settings torch._C keeps reach the kernels as upstream's reach its own: torch.set_num_threads
is oneDNN's thread count and one of its convolution routing rules (a small 1x1 convolution takes
oneDNN only on more than one thread), torch.backends.mkldnn.enabled switches oneDNN off. The same
script runs under upstream and the shim (test_training_apis's harness); values must be equal to
the bit."""
from test_training_apis import assert_agree, run_both

CONVOLUTIONS_AT_TWO_THREADS = r'''
SHAPES = {"3x3": (2, 8, 16, 3, 1), "1x1 small batch": (2, 16, 32, 1, 1), "7x7 stride 2": (2, 3, 8, 7, 2)}


def main():
    torch.manual_seed(3)
    torch.set_num_threads(2)
    found = {"threads": torch.get_num_threads()}
    for name, (n, c_in, c_out, k, stride) in SHAPES.items():
        x = torch.randn(n, c_in, 12, 12, requires_grad=True)
        conv = torch.nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2)
        y = conv(x)
        y.backward(torch.randn_like(y))
        found[name] = [y, x.grad, conv.weight.grad, conv.bias.grad]
    return found
'''

ONEDNN_SWITCHED_OFF = r'''
def main():
    torch.manual_seed(4)
    x = torch.randn(4, 16, 12, 12)
    conv = torch.nn.Conv2d(16, 32, 3, padding=1)
    with torch.no_grad():
        on = conv(x)
        with torch.backends.mkldnn.flags(enabled=False):
            while_off = torch.backends.mkldnn.enabled
            off = conv(x)
    try:
        torch._C._set_mkldnn_enabled(1)
        refusal = None
    except Exception as error:  # upstream's is a RuntimeError
        refusal = [type(error).__name__, str(error)]
    # The native path rounds otherwise than oneDNN: its bits show which path ran.
    return {"enabled while off": while_off, "enabled after": torch.backends.mkldnn.enabled,
            "another path while off": not torch.equal(on, off), "oneDNN's": on, "refusal": refusal}
'''


def test_convolutions_at_two_threads_have_upstreams_bits(tmp_path):
    assert_agree(*run_both(CONVOLUTIONS_AT_TWO_THREADS, tmp_path))


def test_mkldnn_enabled_false_takes_the_native_convolution(tmp_path):
    assert_agree(*run_both(ONEDNN_SWITCHED_OFF, tmp_path))
