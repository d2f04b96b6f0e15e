"""Failures through torch.distributed on the shim: a rank killed mid-all_reduce, and ranks
that call different collectives, must make the others raise an error naming the rank, well
within the group's timeout, never hang."""
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHIM_PYTHON = str(ROOT / ".venv" / "bin" / "python")

RANK = r"""
import os, signal, sys, time
from datetime import timedelta
import torch, torch.distributed as dist
rank, world, path, scenario = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
dist.init_process_group("local", init_method=f"file://{path}", rank=rank, world_size=world,
                        timeout=timedelta(seconds=5))
dist.barrier()
big = torch.ones(8 << 20)
start = time.monotonic()
try:
    if scenario == "kill":
        if rank == world - 1:
            # Dies while the others are inside the all_reduce, waiting for its part.
            time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGKILL)
        dist.all_reduce(big)
    elif scenario == "own_timeout":
        # c10d's option timeouts: this call's 300 ms, not the group's 5 s, while the last rank
        # stays away (it waits in a barrier the others reach once they have failed).
        if rank == world - 1:
            time.sleep(2)
        else:
            opts = dist.AllreduceOptions()
            opts.timeout = timedelta(milliseconds=300)
            dist.distributed_c10d._get_default_group().allreduce([big], opts).wait()
    else:  # mismatch: the last rank broadcasts while the others all_reduce
        if rank == world - 1:
            dist.broadcast(big, 0)
        else:
            dist.all_reduce(big)
    print("COMPLETED")
except RuntimeError as error:
    print(f"RAISED {time.monotonic() - start:.3f} {error}")
"""


def run(tmp_path, scenario, world=4):
    script = tmp_path / "rank.py"
    script.write_text(RANK)
    store = tmp_path / "store"
    procs = [subprocess.Popen([SHIM_PYTHON, str(script), str(r), str(world), str(store), scenario],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(world)]
    outputs = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)  # a hang fails here
        outputs.append((proc.returncode, out, err))
    return outputs


def test_killed_rank_is_named_within_the_timeout(tmp_path):
    outputs = run(tmp_path, "kill")
    assert outputs[3][0] == -9
    for rank, (code, out, err) in enumerate(outputs[:3]):
        assert code == 0, err
        line = out.strip().splitlines()[-1]
        assert line.startswith("RAISED "), f"rank {rank}: {out} {err}"
        elapsed = float(line.split()[1])
        assert elapsed < 5.0, line
        assert "rank 3" in line and "allreduce" in line, line


def test_a_calls_own_timeout_applies(tmp_path):
    outputs = run(tmp_path, "own_timeout", world=2)
    code, out, err = outputs[0]
    assert code == 0, err
    line = out.strip().splitlines()[-1]
    assert line.startswith("RAISED "), f"{out} {err}"
    assert float(line.split()[1]) < 1.5, line
    assert "timed out after 300 ms" in line, line


def test_mismatched_collectives_are_refused_by_name(tmp_path):
    outputs = run(tmp_path, "mismatch", world=3)
    for rank, (code, out, err) in enumerate(outputs):
        assert code == 0, err
        line = out.strip().splitlines()[-1]
        assert line.startswith("RAISED "), f"rank {rank}: {out} {err}"
        assert float(line.split()[1]) < 5.0, line
        assert "mismatched collectives" in line, line
    text = " ".join(out for _, out, _ in outputs)
    assert "broadcast(float32, 8388608 elements, root 0)" in text
    assert "allreduce(float32, 8388608 elements, SUM)" in text


def test_distributed_data_parallel_is_refused_by_name(tmp_path):
    code = ("import torch, torch.distributed as dist\n"
            f"dist.init_process_group('local', init_method='file://{tmp_path / 'store'}', rank=0, world_size=1)\n"
            "try:\n    torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))\n"
            "except NotImplementedError as error:\n    print('refused:', error)\n")
    out = subprocess.run([SHIM_PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert "refused: DistributedDataParallel and FullyShardedDataParallel are not supported" in out.stdout, (
        out.stdout + out.stderr)
