"""How far the shim's record of test_autograd's GPT training (losses, first gradients, final
parameters) is from upstream's float32 one: per tensor, the floats that differ and the worst
|ours - float64| / upstream's largest error in it (the judgement's factor, K = 2 passes).

    .venv/bin/python tests/python/gpt_record_bits.py [--amsgrad]

Needs Debian's fortunes (the file test_autograd names). Runs the three trainings (about 30 s)."""
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import test_autograd  # noqa: E402 (after the path: it imports the golden comparators the same way)
from compare import FLOAT_MAX, flatten, upstream_error  # noqa: E402


def tensors(record, path="record"):
    """(path, encoded tensor) for every tensor of an encoded record, in order."""
    if record["kind"] == "tensor":
        return [(path, record)]
    return [leaf for index, item in enumerate(record.get("items", [])) for leaf in tensors(item, f"{path}[{index}]")]


def factor(ours, reference, error):
    worst = max((abs(o - r) / max(1.0, abs(r)) for o, r in zip(ours, reference) if math.isfinite(o)), default=0.0)
    return worst / error if error else 0.0


def main(amsgrad):
    sys.path.insert(0, str(test_autograd.DEMO))
    import fortunes  # the demo's reading of Debian's fortunes
    text = fortunes.fortune_files()[test_autograd.FORTUNE_FILE]
    body = (f"DEMO = {str(test_autograd.DEMO)!r}\nTEXT = {str(text)!r}\nAMSGRAD = {amsgrad}\n"
            + test_autograd.GPT_FORTUNES_ADAMW)
    upstream, reference, ours = test_autograd.three_runs(body, Path(tempfile.mkdtemp()))
    differing, worst = 0, (0.0, None)
    for (path, up), (_, ref), (_, mine) in zip(tensors(upstream), tensors(reference), tensors(ours)):
        expected, truth, actual = flatten(up["data"]), flatten(ref["data"]), flatten(mine["data"])
        count = sum(1 for a, b in zip(expected, actual) if a != b)
        ratio = factor(actual, truth, upstream_error(expected, truth, FLOAT_MAX[up["dtype"]]))
        if count:
            print(f"{path} {up['shape']}: {count} of {len(expected)} floats differ, factor {ratio:.3f}")
        differing += count
        worst = max(worst, (ratio, path), key=lambda item: item[0])
    print(f"amsgrad={amsgrad}: {differing} floats differ from upstream's float32; worst factor {worst[0]:.3f} ({worst[1]})")


if __name__ == "__main__":
    main("--amsgrad" in sys.argv[1:])
