"""Secure aggregation as a task's round mode (docs/secure_aggregation.md), through the admin CLI and
a real coordinator: the --secagg-* flags make CreateTaskHeader.secure_aggregation, which the
coordinator validates by name; a secure task is created and, its rounds not being run yet, fails by
name before its first round instead of aggregating in the clear."""
import json
import subprocess

import numpy as np

from federation import admin_json, wait_for, write_safetensors

SECURE = ["--secagg-corrupt-fraction", "0.05", "--secagg-dropout-fraction", "0.1", "--secagg-clip-range", "0.5",
          "--secagg-max-weight", "100"]


def create_task(coordinator, tmp_path, *extra, strategy="fedavg"):
    write_safetensors(tmp_path / "model.safetensors", {"weight": np.ones((2, 2), dtype=np.float32)})
    return subprocess.run(
        coordinator["admin"] + ["create-task", "--strategy", strategy, "--rounds", "2", "--devices-per-round", "5",
                                "--min-available", "5", "--min-updates", "3", "--round-timeout-ms", "1000",
                                "--model", str(tmp_path / "model.safetensors"), *extra],
        capture_output=True, text=True, timeout=60)


def test_a_secure_task_is_created_and_fails_by_name_before_its_first_round(coordinator, tmp_path):
    created = create_task(coordinator, tmp_path, *SECURE)
    assert created.returncode == 0, created.stderr
    task = json.loads(created.stdout)["task_id"]

    def ended():
        status = admin_json(coordinator, "status", task)
        return status if status["state"] != "TASK_STATE_RUNNING" else None

    status = wait_for("the secure task to end", ended, 30)
    assert status["state"] == "TASK_STATE_FAILED", status
    assert status["state_reason"].startswith("secure aggregation rounds are not run yet"), status
    assert status["rounds"] == [], status


def test_robust_strategies_and_central_dp_are_refused_with_secure_aggregation(coordinator, tmp_path):
    krum = create_task(coordinator, tmp_path, *SECURE, "--params", '{"f": 1}', strategy="krum")
    assert krum.returncode == 1 and "secure_aggregation with strategy 'krum'" in krum.stderr, krum.stderr
    dp = create_task(coordinator, tmp_path, *SECURE, "--dp-noise-multiplier", "1", "--dp-clip-norm", "1",
                     "--dp-delta", "1e-5", "--dp-epsilon-budget", "100")
    assert dp.returncode == 1 and "secure_aggregation with central_dp" in dp.stderr, dp.stderr
    few = create_task(coordinator, tmp_path, *SECURE, "--secagg-bits", "8")
    assert few.returncode == 1 and "headroom" in few.stderr, few.stderr


def test_a_partial_secure_aggregation_block_is_a_usage_error_naming_the_missing_flag(coordinator, tmp_path):
    partial = create_task(coordinator, tmp_path, "--secagg-clip-range", "0.5", "--secagg-max-weight", "10")
    assert partial.returncode == 2, partial.stderr
    assert "secure aggregation needs --secagg-corrupt-fraction" in partial.stderr.splitlines()[0], partial.stderr
