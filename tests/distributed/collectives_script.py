"""Runs every torch.distributed collective on deterministic inputs and records each output.

The same script runs on our shim (backend "local") and on upstream torch (backend "gloo");
test_collectives.py compares the two records. Launched through torch.multiprocessing.spawn.
Usage: collectives_script.py BACKEND WORLD INIT_METHOD OUT_DIR
"""
import os
import pickle
import sys
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DTYPES = [torch.float32, torch.float64, torch.int64, torch.int32, torch.uint8]
SIZES = [1, 7, 100003]  # the last is past the one-step threshold


def data(rank, n, dtype, salt=0):
    """Inexact for floats (so rounding order shows), small and positive for integers."""
    i = torch.arange(n, dtype=torch.int64)
    raw = (i * 37 + rank * 11 + salt * 5) % 101
    if dtype.is_floating_point:
        return (raw.to(torch.float64) / 7.0 + 0.1).to(dtype)
    return (raw % 13 + 1).to(dtype)


def record(results, name, tensors):
    results[name] = [(str(t.dtype), tuple(t.shape), t.contiguous().numpy().tobytes()) for t in tensors]


def attempt(results, name, fn):
    try:
        fn()
    except Exception as error:  # recorded, compared by the test: both sides must agree on support
        results[name] = ("error", type(error).__name__, str(error).splitlines()[0][:300])


def run(rank, backend, world, init_method, out_dir):
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    assert dist.get_rank() == rank and dist.get_world_size() == world
    results = {}
    ops = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
           "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR,
           "BXOR": dist.ReduceOp.BXOR}
    for dtype in DTYPES:
        for n in SIZES:
            for op_name, op in ops.items():
                if op_name in ("BAND", "BOR", "BXOR") and dtype.is_floating_point:
                    continue
                if op_name == "PRODUCT" and n > 7:
                    continue  # products of 100003 values only overflow
                def allreduce():
                    t = data(rank, n, dtype)
                    dist.all_reduce(t, op=op)
                    record(results, f"all_reduce/{op_name}/{dtype}/{n}", [t])
                attempt(results, f"all_reduce/{op_name}/{dtype}/{n}", allreduce)
            for root in range(world):
                t = data(rank, n, dtype, salt=root)
                dist.broadcast(t, src=root)
                record(results, f"broadcast/{root}/{dtype}/{n}", [t])
            t = data(rank, n, dtype)
            dist.reduce(t, dst=world - 1, op=dist.ReduceOp.SUM)
            if rank == world - 1:
                record(results, f"reduce/{dtype}/{n}", [t])
            outs = [torch.zeros(n, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, data(rank, n, dtype))
            record(results, f"all_gather/{dtype}/{n}", outs)
            whole = torch.zeros(world * n, dtype=dtype)
            attempt(results, f"all_gather_into_tensor/{dtype}/{n}",
                    lambda: (dist.all_gather_into_tensor(whole, data(rank, n, dtype)),
                             record(results, f"all_gather_into_tensor/{dtype}/{n}", [whole])))
    # gather / scatter at every root
    for root in range(world):
        outs = [torch.zeros(5, dtype=torch.int64) for _ in range(world)] if rank == root else None
        dist.gather(data(rank, 5, torch.int64, salt=root), gather_list=outs, dst=root)
        if rank == root:
            record(results, f"gather/{root}", outs)
        out = torch.zeros(6, dtype=torch.float32)
        pieces = [data(r, 6, torch.float32, salt=root) for r in range(world)] if rank == root else None
        dist.scatter(out, scatter_list=pieces, src=root)
        record(results, f"scatter/{root}", [out])
    # reduce_scatter (gloo 1.13 has none: upstream records an error, ours the values)
    def reduce_scatter():
        out = torch.zeros(9, dtype=torch.float32)
        dist.reduce_scatter(out, [data(rank, 9, torch.float32, salt=q) for q in range(world)])
        record(results, "reduce_scatter", [out])
    attempt(results, "reduce_scatter", reduce_scatter)
    def reduce_scatter_tensor():
        out = torch.zeros(4, dtype=torch.int64)
        dist.reduce_scatter_tensor(out, data(rank, 4 * world, torch.int64))
        record(results, "reduce_scatter_tensor", [out])
    attempt(results, "reduce_scatter_tensor", reduce_scatter_tensor)
    # all_to_all_single, even and uneven
    def all_to_all_even():
        out = torch.zeros(3 * world, dtype=torch.int32)
        dist.all_to_all_single(out, torch.arange(3 * world, dtype=torch.int32) + 100 * rank)
        record(results, "all_to_all_single/even", [out])
    attempt(results, "all_to_all_single/even", all_to_all_even)
    def all_to_all_uneven():
        in_splits = [rank + q + 1 for q in range(world)]
        out_splits = [q + rank + 1 for q in range(world)]
        inp = torch.arange(sum(in_splits), dtype=torch.float64) + 1000 * rank
        out = torch.zeros(sum(out_splits), dtype=torch.float64)
        dist.all_to_all_single(out, inp, out_splits, in_splits)
        record(results, "all_to_all_single/uneven", [out])
    attempt(results, "all_to_all_single/uneven", all_to_all_uneven)
    def all_to_all_list():
        outs = [torch.zeros(2, dtype=torch.int64) for _ in range(world)]
        dist.all_to_all(outs, [torch.full((2,), 10 * rank + q, dtype=torch.int64) for q in range(world)])
        record(results, "all_to_all", outs)
    attempt(results, "all_to_all", all_to_all_list)
    # point to point: a ring with send/recv, then isend/irecv, batch_isend_irecv, recv from any source
    right, left = (rank + 1) % world, (rank - 1) % world
    got = torch.zeros(4, dtype=torch.float32)
    if rank % 2 == 0:
        dist.send(data(rank, 4, torch.float32), right)
        dist.recv(got, left)
    else:
        dist.recv(got, left)
        dist.send(data(rank, 4, torch.float32), right)
    record(results, "send_recv", [got])
    got = torch.zeros(3, dtype=torch.int64)
    reqs = [dist.isend(data(rank, 3, torch.int64), right, tag=3), dist.irecv(got, left, tag=3)]
    for req in reqs:
        req.wait()
    record(results, "isend_irecv", [got])
    got = torch.zeros(5, dtype=torch.int32)
    ops_list = [dist.P2POp(dist.isend, data(rank, 5, torch.int32), right),
                dist.P2POp(dist.irecv, got, left)]
    for req in dist.batch_isend_irecv(ops_list):
        req.wait()
    record(results, "batch_isend_irecv", [got])
    if rank == 0:
        senders = []
        for _ in range(world - 1):
            t = torch.zeros(2, dtype=torch.int64)
            senders.append(dist.recv(t))
            assert int(t[0]) == senders[-1], (t, senders)
        results["recv_any_source"] = sorted(senders)
    else:
        dist.send(torch.full((2,), rank, dtype=torch.int64), 0)
    # a subgroup of the even ranks
    evens = list(range(0, world, 2))
    sub = dist.new_group(evens)
    if rank in evens:
        t = data(rank, 10, torch.int64)
        dist.all_reduce(t, group=sub)
        record(results, "subgroup_all_reduce", [t])
        results["subgroup_rank"] = dist.get_rank(sub)
    # the *_object collectives pickle through byte tensors built on storages
    gathered = [None] * world
    dist.all_gather_object(gathered, {"rank": rank, "square": rank * rank})
    results["all_gather_object"] = gathered
    listed = [f"from {rank}", rank] if rank == 1 % world else [None, None]
    dist.broadcast_object_list(listed, src=1 % world)
    results["broadcast_object_list"] = listed
    at_root = [None] * world if rank == 0 else None
    dist.gather_object(("gathered", rank, [rank] * rank), at_root, dst=0)
    results["gather_object"] = at_root
    received = [None]
    dist.scatter_object_list(received, [{"to": r} for r in range(world)] if rank == 0 else None, src=0)
    results["scatter_object_list"] = received
    dist.barrier()
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as f:
        pickle.dump(results, f)
    dist.destroy_process_group()


def main():
    backend, world, init_method, out_dir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    if init_method.startswith("env://"):
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", init_method.split(":")[-1]
        init_method = "env://"
    mp.spawn(run, args=(backend, world, init_method, out_dir), nprocs=world)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
