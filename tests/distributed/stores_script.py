"""Runs the same sequence of store operations on every c10d store kind and prints the record.

test_stores.py runs it on our shim and on upstream torch and compares the two records:
values, return types and which calls raise (by exception type).
Usage: stores_script.py WORKDIR PORT
"""
import json
import os
import sys
from datetime import timedelta

import torch.distributed as dist


def exercise(store):
    record = []

    def call(name, *args):
        try:
            result = getattr(store, name)(*args)
            if isinstance(result, bytes):
                result = ["bytes", result.decode("latin-1")]
            record.append([name, [str(a) for a in args], type(result).__name__, result])
        except Exception as error:
            record.append([name, [str(a) for a in args], "raises", type(error).__name__])

    call("set", "alpha", "one")
    call("get", "alpha")
    call("set", "alpha", b"\x00\xffbinary")
    call("get", "alpha")
    call("add", "counter", 5)
    call("add", "counter", -2)
    call("get", "counter")
    call("compare_set", "cas", "", "first")       # absent key, empty expectation: stored
    call("compare_set", "cas", "wrong", "second")  # mismatch: current value comes back
    call("compare_set", "cas", "first", "third")   # match: swapped
    call("get", "cas")
    call("compare_set", "absent", "x", "y")        # absent, non-empty expectation
    call("check", ["alpha", "counter"])
    call("check", ["alpha", "nothing"])
    call("delete_key", "alpha")
    call("delete_key", "alpha")
    call("check", ["alpha"])
    call("num_keys")
    store.set_timeout(timedelta(milliseconds=200))
    call("get", "never-set")
    # wait(keys) without a timeout is left out: upstream's HashStore ignores set_timeout there
    # and waits its 5-minute default.
    call("wait", ["never-set"], timedelta(milliseconds=200))
    call("wait", ["counter"], timedelta(milliseconds=200))
    return record


def main():
    workdir, port = sys.argv[1], int(sys.argv[2])
    records = {}
    records["HashStore"] = exercise(dist.HashStore())
    records["FileStore"] = exercise(dist.FileStore(os.path.join(workdir, "filestore"), 1))
    master = dist.TCPStore("127.0.0.1", port, 1, True, timedelta(seconds=10))
    records["TCPStore"] = exercise(master)
    records["PrefixStore"] = exercise(dist.PrefixStore("pre", dist.HashStore()))
    client = dist.TCPStore("127.0.0.1", master.port, None, False, timedelta(seconds=10))
    client.set("from-client", "seen")
    records["TCPStore client sees master"] = [master.get("from-client").decode()]
    print(json.dumps(records))


if __name__ == "__main__":
    main()
