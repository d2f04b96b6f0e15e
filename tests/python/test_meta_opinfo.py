"""The meta device through upstream's whole op_db (issue 18 point 5): the first float32 sample of
every OpInfo, its tensors rebuilt on device="meta", each variant (function, method, in-place)
run by upstream 1.13.1 and by the shim, one interpreter per side
(tests/golden/opinfo/meta_sweep.py --max-per-op 1; the sweep over every sample is that script
without the bound, its counts in docs/measurements.md). Where upstream's meta returns, the shim
returns the same devices, shapes, dtypes and strides, or refuses by name; where upstream's
meta raises, so does the shim; never a crash. A disagreement is forgiven only where the
shim's meta record is upstream's own cpu record (upstream 1.13.1's meta function is the one
wrong) or the shim's own cpu record (a difference of the cpu kernel, inherited)."""
import json
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SWEEP = os.path.join(REPO, "tests", "golden", "opinfo", "meta_sweep.py")
SHIM_PYTHON = sys.executable  # the venv running pytest: .venv, or .venv-asan under make asan-test
UPSTREAM_PYTHON = "/usr/bin/python3"
DEFECTS = ("unnamed", "strides", "differ", "extra", "crash")


def test_every_opinfo_on_meta_agrees_with_upstream_or_refuses_by_name(tmp_path):
    records = tmp_path / "meta.json"
    process = subprocess.run([UPSTREAM_PYTHON, SWEEP, "--shim", SHIM_PYTHON, "--max-per-op", "1",
                              "--json", str(records)], capture_output=True, text=True, timeout=900)
    assert process.returncode in (0, 1), process.stderr
    outcomes = {name: case["outcome"] for name, case in json.loads(records.read_text()).items()}
    ops = {name.split("/")[0] for name in outcomes}
    assert len(ops) > 500, f"only {len(ops)} OpInfos swept"
    agreeing = sum(outcome == "agree" for outcome in outcomes.values())
    assert agreeing > len(outcomes) // 2, process.stdout.splitlines()[0]
    defects = sorted(f"{outcome}: {name}" for name, outcome in outcomes.items() if outcome in DEFECTS)
    assert not defects, process.stdout[process.stdout.find("defects:"):][:4000]
    assert process.returncode == 0
