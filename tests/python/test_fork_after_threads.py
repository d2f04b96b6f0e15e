"""A process forked after its parent ran parallel regions on two threads (OpenMP's pool, which
fork does not carry over; upstream's child hangs in its first parallel region, at a sigmoid or
a convolution, 2026-12-08): the shim's child finishes, its parallel loops giving the parent's
bits (their chunks run in turn; a first version hung in GOMP_parallel as upstream does) and its
convolutions leaving oneDNN aside (close to the parent's, not its bits) unless it runs one
thread, as a DataLoader worker does (then oneDNN's bits, as upstream's child, which does not
hang on one thread). The shim's side only: upstream has no answer on two threads."""
import subprocess

from test_training_apis import SHIM_PYTHON

IN_A_CHILD = r'''
import os
import torch
import torch.nn.functional as F
torch.set_num_threads(2)
a = torch.arange(1200000.0).reshape(1000, 1200) / 7 - 5000
x, w = torch.randn(8, 16, 32, 32), torch.randn(32, 16, 3, 3)


def loops():  # a copy, a cloned elementwise loop (its chunks' scalar tails), a conversion, a sum of rows
    return [a.t().contiguous(), torch.sigmoid(a), F.silu(a), a.to(torch.float64), a.sum(1)]


torch.set_num_threads(1)
one_thread = F.conv2d(x, w, padding=1)
torch.set_num_threads(2)
parent, parent_convolution = loops(), F.conv2d(x, w, padding=1)
pid = os.fork()
if pid == 0:
    same = all(torch.equal(c, p) for c, p in zip(loops(), parent))
    close = torch.allclose(F.conv2d(x, w, padding=1), parent_convolution, rtol=1e-4, atol=1e-3)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a DataLoader worker: oneDNN's bits again
    exact = torch.equal(F.conv2d(x, w, padding=1), one_thread)
    os._exit(0 if same and close and exact and threads == 2 else 3)
_, status = os.waitpid(pid, 0)
print(os.waitstatus_to_exitcode(status))
'''


def test_a_child_forked_after_parallel_regions_finishes_with_the_parents_results():
    result = subprocess.run([SHIM_PYTHON, "-c", IN_A_CHILD], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
