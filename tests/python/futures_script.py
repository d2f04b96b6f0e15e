"""torch.futures and Work.get_future, recorded so test_futures.py can compare ours with upstream.

Usage: futures_script.py futures OUT_FILE
       futures_script.py distributed BACKEND WORLD INIT_METHOD OUT_DIR
Each case records its value or its exception (type and first line of the message), as data
that pickles; the same script runs on our shim and on upstream torch (backend gloo there).
"""
import os
import pickle
import sys
import threading
import time
from datetime import timedelta

import torch
from torch.futures import Future, collect_all, wait_all

# Cases whose error message is upstream's internals or pybind11's signature listing: only the
# exception type is compared.
TYPE_ONLY = {"value before completion", "then non-callable", "add_done_callback non-callable",
             "init without devices", "init with strings", "collect_all non-future"}


def describe(value):
    """Plain data for a result: tensors as (dtype, shape, values); futures by their type name."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), value.tolist())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [describe(v) for v in value])
    if isinstance(value, torch._C.Future):
        return ("future", type(value).__module__, type(value).__name__)
    if isinstance(value, BaseException):
        return ("exception object", type(value).__name__, str(value))
    return value


def attempt(results, name, fn):
    try:
        results[name] = ("value", describe(fn()))
    except Exception as error:
        message = "" if name in TYPE_ONLY else str(error).splitlines()[0] if str(error) else ""
        results[name] = ("error", type(error).__name__, message)


def completed(value):
    future = Future()
    future.set_result(value)
    return future


def failed(error):
    future = Future()
    future.set_exception(error)
    return future


def futures_cases():
    results = {}
    C = torch._C.Future
    results["class"] = (C.__module__, C.__name__, type(C).__name__,
                        sorted(m for m in dir(C) if not m.startswith("__")))
    results["subclass mro"] = [c.__name__ for c in Future.__mro__][:2]

    pending = Future()
    attempt(results, "done before completion", pending.done)
    attempt(results, "value before completion", pending.value)
    pending.set_result(41)
    attempt(results, "done after set_result", pending.done)
    attempt(results, "wait", pending.wait)
    attempt(results, "value", pending.value)
    attempt(results, "set_result twice", lambda: pending.set_result(42))
    attempt(results, "value after second set_result", pending.value)
    attempt(results, "wait returns the same object", lambda: (lambda f: f.wait() is f.wait())(completed([1])))
    attempt(results, "None result", lambda: completed(None).wait())
    attempt(results, "tensor result", lambda: completed([torch.arange(3), {"k": 1}]).wait()[0])
    attempt(results, "exception object as result", lambda: completed(ValueError("as data")).wait())

    # then: chains, inline when already complete, the future itself as argument.
    source = Future()
    chained = source.then(lambda f: f.wait() + 1).then(lambda f: f.value() * 2)
    attempt(results, "chain pending", chained.done)
    source.set_result(3)
    attempt(results, "chain", chained.wait)
    attempt(results, "then type", lambda: type(chained).__name__)
    attempt(results, "then on completed", lambda: completed(5).then(lambda f: f.wait() - 1).wait())
    attempt(results, "then returning a future", lambda: completed(1).then(lambda f: completed(2)).wait())
    seen = []
    parent = Future()
    parent.then(lambda f: seen.append(("then", f is parent, f.value())))
    parent.add_done_callback(lambda f: seen.append(("done callback", f is parent, f.value())))
    attempt(results, "callbacks before completion", lambda: list(seen))
    parent.set_result("x")
    parent.add_done_callback(lambda f: seen.append(("late callback", f.done())))
    parent.then(lambda f: seen.append(("late then", f.done())))
    attempt(results, "callback order", lambda: list(seen))

    # Errors: set_exception, raising callbacks, unwrap functions.
    attempt(results, "set_exception wait", lambda: failed(ValueError("foo")).wait())
    attempt(results, "set_exception value", lambda: failed(KeyError("k")).value())
    attempt(results, "set_exception done", lambda: failed(ValueError("foo")).done())
    attempt(results, "set_exception non-exception", lambda: Future().set_exception(5))
    attempt(results, "then ignoring the error", lambda: failed(ValueError("foo")).then(lambda f: 5).wait())
    attempt(results, "then rethrowing", lambda: failed(TypeError("tt")).then(lambda f: f.wait()).wait())
    raising = Future()
    raised = raising.then(lambda f: 1 / 0)
    raising.set_result(1)
    attempt(results, "then raising", raised.wait)
    attempt(results, "then raising value", raised.value)
    attempt(results, "then raising done", raised.done)
    attempt(results, "then after a raising then", lambda: raised.then(lambda f: "recovered").wait())
    swallowed = Future()
    swallowed.add_done_callback(lambda f: 1 / 0)
    attempt(results, "raising done callback", lambda: swallowed.set_result(1))
    attempt(results, "raising done callback, late", lambda: swallowed.add_done_callback(lambda f: 1 / 0))
    attempt(results, "after raising done callbacks", swallowed.wait)
    unwrapped = torch._C.Future([])
    unwrapped._set_unwrap_func(lambda value: value * 100)
    unwrapped.set_result(3)
    attempt(results, "unwrap result is ignored", unwrapped.wait)

    # Arguments.
    attempt(results, "then non-callable", lambda: Future().then(5))
    attempt(results, "add_done_callback non-callable", lambda: Future().add_done_callback(5))
    attempt(results, "init without devices", lambda: torch._C.Future())
    attempt(results, "init with strings", lambda: torch._C.Future(["cpu"]))
    attempt(results, "init cpu without index", lambda: Future(devices=["cpu"]))
    attempt(results, "init cpu:0", lambda: Future(devices=["cpu:0"]).done())
    attempt(results, "init cuda", lambda: Future(devices=["cuda"]))
    attempt(results, "pickle", lambda: pickle.dumps(Future()))

    # Another thread completes; wait() must let it run.
    threaded = Future()
    threading.Thread(target=lambda: (time.sleep(0.1), threaded.set_result([torch.ones(2)]))).start()
    attempt(results, "completed by another thread", threaded.wait)
    threaded_then = Future()
    after = threaded_then.then(lambda f: threading.current_thread() is threading.main_thread())
    worker = threading.Thread(target=lambda: threaded_then.set_result(0))
    worker.start()
    worker.join()
    attempt(results, "then runs on the completing thread", after.wait)

    # collect_all and wait_all.
    first, second = Future(), Future()
    both = collect_all([first, second])
    second.set_result(2)
    attempt(results, "collect_all partial", both.done)
    first.set_result(1)
    attempt(results, "collect_all", both.wait)
    attempt(results, "collect_all values", lambda: [f.wait() for f in both.wait()])
    attempt(results, "collect_all hands out new futures", lambda: both.wait()[0] is first)
    attempt(results, "collect_all empty", lambda: collect_all([]).wait())
    attempt(results, "collect_all with set_exception", lambda: collect_all([completed(1), failed(ValueError("v"))]).wait())
    attempt(results, "collect_all members lose unwrap",
            lambda: collect_all([failed(ValueError("v"))]).then(lambda f: f.value()[0].wait()).wait())
    attempt(results, "collect_all with raising then",
            lambda: collect_all([completed(1), completed(1).then(lambda f: 1 / 0)]).wait())
    attempt(results, "collect_all non-future", lambda: torch._C._collect_all([1]))
    attempt(results, "wait_all", lambda: wait_all([completed(1), completed([2, 3])]))
    attempt(results, "wait_all with set_exception", lambda: wait_all([completed(1), failed(KeyError("w"))]))
    attempt(results, "_wait_all exists", lambda: hasattr(torch._C, "_wait_all"))
    return results


def distributed_cases(rank, backend, world, init_method, out_dir):
    import torch.distributed as dist
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world,
                            timeout=timedelta(seconds=60))
    results = {}

    def base():
        return torch.tensor([1.0, 2.0, 3.0]) * (rank + 1)

    def all_reduce_future():
        t = base()
        future = dist.all_reduce(t, async_op=True).get_future()
        value = future.wait()
        results["all_reduce identity"] = (value[0] is t, future.wait() is future.wait(), future.done())
        return value
    attempt(results, "all_reduce", all_reduce_future)
    attempt(results, "all_reduce value()", lambda: (lambda f: (f.wait(), f.value())[1])(
        dist.all_reduce(base(), async_op=True).get_future()))
    attempt(results, "all_reduce MAX int64", lambda: dist.all_reduce(
        torch.arange(4) * (rank + 1), op=dist.ReduceOp.MAX, async_op=True).get_future().wait())
    attempt(results, "get_future type", lambda: type(dist.all_reduce(base(), async_op=True).get_future()).__name__)
    work = dist.all_reduce(base(), async_op=True)
    attempt(results, "get_future twice", lambda: work.get_future() is work.get_future())
    work.wait()
    attempt(results, "get_future after wait", lambda: work.get_future().wait())
    attempt(results, "all_reduce_coalesced", lambda: dist.all_reduce_coalesced(
        [base(), torch.ones(2, 2) * rank], async_op=True).wait())
    attempt(results, "all_reduce_coalesced type", lambda: type(dist.all_reduce_coalesced(
        [base()], async_op=True)).__name__)

    def then_chain():
        future = dist.all_reduce(base(), async_op=True).get_future()
        seen = []
        future.add_done_callback(lambda f: seen.append(describe(f.value())))
        doubled = future.then(lambda f: f.value()[0] * 2).then(lambda f: f.wait().sum().item())
        return doubled.wait(), future.wait(), seen
    attempt(results, "then on a collective", then_chain)
    attempt(results, "raising then on a collective", lambda: dist.all_reduce(
        base(), async_op=True).get_future().then(lambda f: f.value()[5]).wait())

    def collect():
        a = dist.all_reduce(base(), async_op=True).get_future()
        b = dist.all_reduce(torch.ones(1) * rank, async_op=True).get_future()
        return [f.wait() for f in collect_all([a, b]).wait()], wait_all([a, b])
    attempt(results, "collect_all of collectives", collect)

    attempt(results, "broadcast", lambda: dist.broadcast(base(), 1, async_op=True).get_future().wait())

    def all_gather():
        outputs = [torch.zeros(3) for _ in range(world)]
        return dist.all_gather(outputs, base(), async_op=True).get_future().wait()
    attempt(results, "all_gather", all_gather)
    attempt(results, "barrier", lambda: dist.barrier(async_op=True).get_future().wait())
    reduced = dist.reduce(base(), 0, async_op=True).get_future()
    if rank == 0:  # elsewhere the tensor's contents are unspecified (gloo leaves partial sums)
        attempt(results, "reduce", reduced.wait)
    reduced.wait()

    def gather():
        outputs = [torch.zeros(3) for _ in range(world)] if rank == 0 else None
        return dist.gather(base(), outputs, dst=0, async_op=True).get_future().wait()
    attempt(results, "gather", gather)

    def scatter():
        inputs = [torch.ones(2) * r for r in range(world)] if rank == 0 else None
        return dist.scatter(torch.zeros(2), inputs, src=0, async_op=True).get_future().wait()
    attempt(results, "scatter", scatter)

    def all_to_all_single():
        out = torch.zeros(world * 2)
        return dist.all_to_all_single(out, torch.arange(world * 2.0) + 10 * rank, async_op=True).get_future().wait()
    attempt(results, "all_to_all_single", all_to_all_single)

    def waited_on_another_thread():
        future = dist.all_reduce(base(), async_op=True).get_future()
        box = []
        waiter = threading.Thread(target=lambda: box.append(future.wait()[0].tolist()))
        waiter.start()
        waiter.join()
        return box
    attempt(results, "waited on another thread", waited_on_another_thread)
    attempt(results, "many futures with callbacks", lambda: wait_all([
        dist.all_reduce(torch.ones(2) * i, async_op=True).get_future().then(lambda f: f.value()[0].sum().item())
        for i in range(64)]))

    if backend == "local":
        # Beyond upstream, whose gloo raises "Work::getFuture not implemented" for send/recv.
        def point_to_point():
            if rank == 0:
                return dist.isend(base(), 1).get_future().wait()
            return dist.irecv(torch.zeros(3), 0).get_future().wait()
        attempt(results, "local only/point to point", point_to_point)
        side = dist.new_group([0, 1])
        orphan = dist.all_reduce(base(), group=side, async_op=True).get_future() if rank == 0 else None
        del side  # so that destroy_process_group destroys it while rank 0's all_reduce is pending

    # The future outlives the group it came from.
    pending = dist.all_reduce(base(), async_op=True).get_future()
    late = pending.then(lambda f: f.value()[0].tolist())
    pending.wait()
    dist.destroy_process_group()
    attempt(results, "future after destroy_process_group", pending.wait)
    attempt(results, "then after destroy_process_group", late.wait)
    if backend == "local" and rank == 0:
        attempt(results, "local only/pending future of a destroyed group", lambda: type(orphan.wait()))
    with open(os.path.join(out_dir, f"rank{rank}.pkl"), "wb") as out:
        pickle.dump(results, out)


def main():
    if sys.argv[1] == "futures":
        with open(sys.argv[2], "wb") as out:
            pickle.dump(futures_cases(), out)
    else:
        import torch.multiprocessing as mp
        backend, world, init_method, out_dir = sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
        mp.spawn(distributed_cases, args=(backend, world, init_method, out_dir), nprocs=world)


if __name__ == "__main__":
    main()
