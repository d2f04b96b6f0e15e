"""Collectives of our shim (backend "local") and upstream torch (gloo) side by side, one run.

For all_reduce, broadcast and all_gather at 4 B .. 256 MiB and world 2 and 4, each rank times
every call (after warm-up) and rank 0 reports the median and the spread (min..max) of the
slowest rank's time per call. Ours runs twice: as configured by default (ranks on one host
copy large buffers from each other's memory) and with TORCHNATIVE_SAME_HOST_MEMORY=0 (every
byte over TCP, as between hosts). The machine's loopback TCP throughput is measured in the same
run as TCP's ceiling. Usage: distributed_bench.py --shim PY --upstream PY [--quick]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

SIZES = [4, 4 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20]
OPS = ["all_reduce", "broadcast", "all_gather"]
WORLDS = [2, 4]


def iterations(nbytes, quick):
    base = 200 if nbytes <= 4096 else 30 if nbytes <= 1 << 20 else 8 if nbytes <= 16 << 20 else 4
    return max(2, base // 4) if quick else base


RANK_CODE = r"""
import json, os, sys, time, torch, torch.distributed as dist
import torch.multiprocessing as mp

def run(rank, backend, world, port, sizes, ops, iters, out):
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    results = {}
    for op in ops:
        for nbytes in sizes:
            t = torch.ones(max(1, nbytes // 4), dtype=torch.float32)
            outs = [torch.empty_like(t) for _ in range(world)]
            call = {"all_reduce": lambda: dist.all_reduce(t),
                    "broadcast": lambda: dist.broadcast(t, 0),
                    "all_gather": lambda: dist.all_gather(outs, t)}[op]
            call(); call()
            times = []
            for _ in range(iters[str(nbytes)]):
                dist.barrier()
                start = time.perf_counter()
                call()
                times.append(time.perf_counter() - start)
            # each call's time is the slowest rank's
            gathered = [torch.zeros(len(times), dtype=torch.float64) for _ in range(world)]
            dist.all_gather(gathered, torch.tensor(times, dtype=torch.float64))
            results[f"{op}/{nbytes}"] = torch.stack(gathered).max(0).values.tolist()
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    dist.destroy_process_group()

if __name__ == "__main__":
    backend, world, port, out, quick = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
    sizes, ops, iters = json.loads(sys.argv[6]), json.loads(sys.argv[7]), json.loads(sys.argv[8])
    mp.spawn(run, args=(backend, world, port, sizes, ops, iters, out), nprocs=world)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_backend(python, backend, world, quick, workdir, env=None):
    script = os.path.join(workdir, "rank_code.py")
    with open(script, "w") as f:
        f.write(RANK_CODE)
    out = os.path.join(workdir, f"{backend}-{world}.json")
    iters = {str(n): iterations(n, quick) for n in SIZES}
    subprocess.run([os.path.abspath(python), script, backend, str(world), str(free_port()), out, "1" if quick else "0",
                    json.dumps(SIZES), json.dumps(OPS), json.dumps(iters)], check=True, cwd=workdir,
                   env=dict(os.environ, **(env or {})))
    with open(out) as f:
        return json.load(f)


def loopback_throughput(nbytes=256 << 20, chunk=4 << 20):
    """One sender thread, one receiver thread, over 127.0.0.1: bytes per second."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    payload = bytearray(chunk)
    def send():
        with socket.create_connection(server.getsockname()) as s:
            sent = 0
            while sent < nbytes:
                s.sendall(payload)
                sent += chunk
    sender = threading.Thread(target=send)
    start = time.perf_counter()
    sender.start()
    conn, _ = server.accept()
    buffer = memoryview(bytearray(chunk))
    received = 0
    while received < nbytes:
        got = conn.recv_into(buffer)
        if not got:
            break
        received += got
    elapsed = time.perf_counter() - start
    sender.join()
    conn.close()
    server.close()
    return received / elapsed


def loopback_round_trip(trips=2000):
    """Median seconds of a 4-byte blocking ping-pong between two processes over 127.0.0.1: the
    floor a small collective's wake-ups stand on."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    child = os.fork()
    if child == 0:
        peer = socket.create_connection(server.getsockname())
        peer.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(trips):
            peer.sendall(peer.recv(4))
        os._exit(0)
    conn, _ = server.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    times = []
    for _ in range(trips):
        start = time.perf_counter()
        conn.sendall(b"ping")
        conn.recv(4)
        times.append(time.perf_counter() - start)
    os.waitpid(child, 0)
    conn.close()
    server.close()
    return statistics.median(times)


def human(nbytes):
    for unit, size in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= size:
            return f"{nbytes // size} {unit}"
    return f"{nbytes} B"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shim", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    ceiling = statistics.median(loopback_throughput() for _ in range(3))
    print(f"loopback TCP throughput (one stream, median of 3): {ceiling / 1e9:.2f} GB/s")
    print(f"loopback TCP round trip (4-byte blocking ping-pong between two processes, median of 2000):"
          f" {loopback_round_trip() * 1e6:.1f} us")
    with tempfile.TemporaryDirectory() as workdir:
        for world in WORLDS:
            ours = run_backend(args.shim, "local", world, args.quick, workdir)
            tcp = run_backend(args.shim, "local", world, args.quick, workdir, {"TORCHNATIVE_SAME_HOST_MEMORY": "0"})
            gloo = run_backend(args.upstream, "gloo", world, args.quick, workdir)
            print(f"\nworld {world}: time per call, median [min..max] over the timed calls; ours = default "
                  f"(same-host memory), tcp = ours with TORCHNATIVE_SAME_HOST_MEMORY=0;\n"
                  f"ratio = gloo / ours (above 1: ours faster); GB/s = bytes / median")
            print(f"{'op':<11}{'size':>9}  {'ours':>26}  {'tcp':>26}  {'gloo':>26}  {'ratio':>6}  {'tcp r.':>6}"
                  f"  {'ours GB/s':>9}  {'tcp GB/s':>9}  {'gloo GB/s':>9}")
            for op in OPS:
                for nbytes in SIZES:
                    a, t, b = ours[f"{op}/{nbytes}"], tcp[f"{op}/{nbytes}"], gloo[f"{op}/{nbytes}"]
                    ma, mt, mb = statistics.median(a), statistics.median(t), statistics.median(b)
                    fmt = lambda ts, m: f"{m * 1e6:9.1f} us [{min(ts) * 1e6:.0f}..{max(ts) * 1e6:.0f}]"
                    print(f"{op:<11}{human(nbytes):>9}  {fmt(a, ma):>26}  {fmt(t, mt):>26}  {fmt(b, mb):>26}"
                          f"  {mb / ma:6.2f}  {mb / mt:6.2f}  {nbytes / ma / 1e9:9.3f}  {nbytes / mt / 1e9:9.3f}"
                          f"  {nbytes / mb / 1e9:9.3f}")
            sys.stdout.flush()

if __name__ == "__main__":
    main()
