"""Elementwise kernels with upstream's vectorized and scalar lambdas (silu, sigmoid, hardtanh and
their gradients, clamp, relu and their in-place forms, exp, add) bit for bit as upstream
computes them, on one thread and on two (torch.set_num_threads on both sides): past 32,768
elements upstream splits a loop between threads, and each chunk's last elements take the
scalar lambda, so which lambda an element gets moves with the thread count. NaN inputs sit in
both kinds of element (hardtanh's gradient passes a NaN input's gradient in the scalar lambda
and masks it in the vector one). Inputs are built from integers (Python's random module) on
each side; in-place calls record self, its version and that the result is self."""
from test_loss_attention_bits import BODY
from test_training_apis import assert_agree, run_both

ELEMENTWISE = BODY + r'''
SMALL = [(3, 5), (4, 9, 11)]
LARGE = (33001,)  # two chunks on two threads, of 16,501 elements: 5 scalar ones at each end


def with_nans(x):
    x = x.clone()
    x.view(-1)[::97] = float("nan")
    return x


def in_place(function, x):
    y = x.clone()
    version = y._version
    result = function(y)
    return [y, y._version - version, result.data_ptr() == y.data_ptr()]


def small_cases(results, key, x, index):
    results["clamp/" + key] = forward_and_gradient(lambda t: t.clamp(-1.5, 2), x, 40 + index)
    results["exp+add/" + key] = torch.exp(x) + x
    results["hardtanh_/" + key] = in_place(lambda t: F.hardtanh(t, -2.0, 3.0, inplace=True), x)
    results["clamp_min_/" + key] = in_place(lambda t: t.clamp_min_(0.5), x)
    results["silu transposed/" + key] = forward_and_gradient(F.silu, x.transpose(0, -1), 50 + index)
    results["relu_ transposed/" + key] = in_place(torch.relu_, x.transpose(0, -1))


def main():
    results = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for dtype in (torch.float32, torch.float64):
            for index, shape in enumerate(SMALL + [LARGE]):
                x = with_nans(floats(shape, index, 6.0).to(dtype))
                key = f"{threads}/{dtype}/{shape}"
                results["silu/" + key] = forward_and_gradient(F.silu, x, 10 + index)
                results["sigmoid/" + key] = forward_and_gradient(torch.sigmoid, x, 20 + index)
                results["relu6/" + key] = forward_and_gradient(F.relu6, x, 30 + index)
                results["silu_/" + key] = in_place(lambda t: F.silu(t, inplace=True), x)
                results["relu_/" + key] = in_place(torch.relu_, x)
                if shape != LARGE:
                    small_cases(results, key, x, index)
    return results
'''


def test_elementwise_bits_equal_upstream_on_one_and_two_threads(tmp_path):
    assert_agree(*run_both(ELEMENTWISE, tmp_path))


# Kernels that split independent work between threads (max pooling's planes, forward and
# backward; softmax's and log_softmax's rows along the last dim, past 32,768 / row length rows):
# on two threads they must run (a grain of 0 once divided by zero) and give upstream's bits.
SPLIT = BODY + r'''
def main():
    results = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        for dtype in (torch.float32, torch.float64):
            key = f"{threads}/{dtype}"
            x = floats((4, 3, 9, 9), 1, 6.0).to(dtype)  # 3x3 windows at stride 2 overlap
            results["max_pool2d/" + key] = forward_and_gradient(lambda t: F.max_pool2d(t, 3, 2), x, 2)
            rows = floats((1200, 33), 3, 6.0).to(dtype)  # 1200 rows: more than 32,768 / 33
            results["softmax/" + key] = forward_and_gradient(lambda t: torch.softmax(t, -1), rows, 4)
            results["log_softmax/" + key] = forward_and_gradient(lambda t: torch.log_softmax(t, -1), rows, 5)
    return results
'''


def test_split_kernels_bits_equal_upstream_on_one_and_two_threads(tmp_path):
    assert_agree(*run_both(SPLIT, tmp_path))
