"""Selection semantics made visible (docs/federated.md, "Selection"): a round starts as soon as
max(min_available, min_updates) eligible devices wait, with up to devices_per_round of them, and the
coordinator logs why on the round's round_started line, and how the round will close (min_updates
decides only at the deadline: there is no over-selection); while it waits, round_waiting lines say
for what, no more often than every 5 s once the first has been written."""
import subprocess

import numpy as np
import pytest

from federation import closed_rounds, create_fedavg_task, log_events, run_device_rounds, tool, wait_for

PER_ROUND = 5
DEVICES = 4  # fewer than requested


def initial_model():
    return {"weight": np.arange(6, dtype=np.float32).reshape(2, 3), "batches_seen": np.array([0], dtype=np.int64)}


@pytest.mark.parametrize("min_updates,min_available", [(4, 0), (2, 4)],
                         ids=["min_updates_decides", "min_available_decides"])
def test_a_round_with_fewer_devices_than_requested_logs_why_it_started(coordinator, tmp_path, min_updates,
                                                                         min_available):
    task = create_fedavg_task(coordinator, tmp_path, initial_model(), rounds=1, per_round=PER_ROUND,
                              min_updates=min_updates, min_available=min_available, timeout_ms=20000)
    log = coordinator["log"]
    waiting = wait_for("a round_waiting line", lambda: log_events(log, "round_waiting"), 10)[0]
    needed = max(min_updates, min_available)
    assert {key: waiting[key] for key in ("task", "available", "eligible", "devices_per_round", "min_available",
                                          "min_updates", "needed", "over_selection", "model_version")} == {
        "task": task, "available": 0, "eligible": 0, "devices_per_round": PER_ROUND,
        "min_available": min_available, "min_updates": min_updates, "needed": needed, "over_selection": 1.0,
        "model_version": 0}, waiting
    assert waiting["why"] == (f"waiting for {needed} eligible devices (the larger of min_available "
                              f"{min_available} and min_updates {min_updates}): 0 eligible of 0 waiting")
    assert waiting["waited_seconds"] >= 1

    rounds = run_device_rounds(coordinator, tmp_path, task, DEVICES, 1)
    assert len(rounds[0]["selected"]) == DEVICES, rounds

    started = log_events(log, "round_started")
    assert len(started) == 1, started
    line = started[0]
    assert {key: line[key] for key in ("task", "round", "available", "eligible", "devices_per_round",
                                       "min_available", "min_updates", "needed", "over_selection", "selected",
                                       "rule")} == {
        "task": task, "round": 1, "available": DEVICES, "eligible": DEVICES, "devices_per_round": PER_ROUND,
        "min_available": min_available, "min_updates": min_updates, "needed": needed, "over_selection": 1.0,
        "selected": DEVICES, "rule": "needed_waiting"}, line
    assert line["why"] == (
        f"started with {DEVICES} of {PER_ROUND} requested: {DEVICES} eligible devices were waiting and {needed} "
        f"were needed (the larger of min_available {min_available} and min_updates {min_updates}); a round "
        f"starts as soon as the needed devices wait and does not wait for devices_per_round "
        f"(min_available {PER_ROUND} would make it)"), line
    assert line["closes"] == (
        f"closes once each of the {DEVICES} selected devices has contributed or been given up (silent past the "
        f"liveness window), or at its deadline, round_timeout_ms 20000 after it started; completed with at least "
        f"min_updates {min_updates} contributions, abandoned with fewer (and retried from the same model version); "
        f"no device beyond devices_per_round is selected (over_selection 1), so it never closes early on "
        f"min_updates"), line

    # Rate-limited: after the first, a round_waiting line at most every 5 s (or each minute unchanged).
    waits = [entry["waited_seconds"] for entry in log_events(log, "round_waiting")]
    assert all(later - earlier >= 4.9 for earlier, later in zip(waits, waits[1:])), waits


def test_a_round_with_more_eligible_devices_than_requested_logs_the_random_choice(coordinator, tmp_path):
    task = create_fedavg_task(coordinator, tmp_path, initial_model(), rounds=1, per_round=3, min_updates=3,
                              min_available=4, timeout_ms=20000)
    # One process of four devices: the one not selected finds the task ended (exit status 3), so the
    # test waits for the round, not for the process.
    devices = subprocess.Popen(
        [tool("torchnative-device"), "--server", f"127.0.0.1:{coordinator['grpc_port']}", "--key-dir",
         str(tmp_path / "keys"), "--devices", "4", "--rounds", "1", "--check-in-wait-ms", "2000"],
        stderr=subprocess.DEVNULL)
    try:
        rounds = closed_rounds(coordinator, task, 1, 40)
    finally:
        devices.kill()
        devices.wait()
    assert rounds[0]["state"] == "ROUND_STATE_COMPLETED" and len(rounds[0]["selected"]) == 3, rounds
    line = log_events(coordinator["log"], "round_started")[0]
    assert {key: line[key] for key in ("available", "eligible", "needed", "selected", "rule")} == {
        "available": 4, "eligible": 4, "needed": 4, "selected": 3, "rule": "devices_per_round"}, line
    assert line["why"] == ("started with 3 of 3 requested: 4 eligible devices were waiting, 3 chosen among them "
                           "at random (seeded per task and round)"), line
