"""Tasks an operator can follow with torchnative-admin, over real processes on loopback: `tasks`
lists them and `status TASK` says where one stands (state, current round with the devices
selected and contributed, the last aggregate's model version, each round's duration); `events
--since N` replays the stored events after sequence N, whose numbering survives a kill -9 of the
coordinator; `events --follow TASK` prints a line per round until the task ends."""
import json
import subprocess

import numpy as np

from federation import admin_json, create_fedavg_task, launch_coordinator, run_device_rounds, wait_for

DEVICES = 3
ROUNDS = 2


def small_model():
    return {"weight": np.arange(6, dtype=np.float32).reshape(2, 3), "steps": np.array([7], dtype=np.int64)}


def test_tasks_and_status_say_where_a_finished_task_stands(coordinator, tmp_path):
    task = create_fedavg_task(coordinator, tmp_path, small_model(), rounds=ROUNDS, per_round=DEVICES,
                              min_updates=DEVICES, min_available=DEVICES, timeout_ms=20000)
    # No device yet: the task waits for devices to start its first round, which is not recorded.
    before = wait_for("the task to wait for devices", lambda: waiting_for_devices(coordinator, task), 30)
    assert (before["state"], before["rounds_completed"], before["latest_model_version"]) == \
        ("TASK_STATE_RUNNING", 0, f"{task}/0")
    assert before["rounds"] == [], before
    assert before["current_round"] == {"round_id": 1, "state": "ROUND_STATE_WAITING_FOR_DEVICES", "selected": 0,
                                       "contributed": 0, "missing": 0, "duration_ms": None,
                                       "started_unix_ms": before["current_round"]["started_unix_ms"]}, before
    assert before["current_round"]["started_unix_ms"] >= before["created_unix_ms"], before

    run_device_rounds(coordinator, tmp_path, task, DEVICES, ROUNDS)

    status = admin_json(coordinator, "status", task)
    assert status["state"] == "TASK_STATE_COMPLETED", status
    assert status["state_reason"] == f"all {ROUNDS} rounds completed"
    assert (status["rounds_planned"], status["rounds_completed"], status["devices_per_round"]) == \
        (ROUNDS, ROUNDS, DEVICES)
    assert status["latest_model_version"] == f"{task}/{ROUNDS}"
    current = status["current_round"]
    assert (current["round_id"], current["state"], current["selected"], current["contributed"]) == \
        (ROUNDS, "ROUND_STATE_COMPLETED", DEVICES, DEVICES)
    durations = [r["duration_ms"] for r in status["rounds"]]
    assert [r["round_id"] for r in status["rounds"]] == list(range(1, ROUNDS + 1))
    assert all(isinstance(d, int) and d >= 0 for d in durations), durations
    assert status["mean_completed_round_ms"] == sum(durations) // ROUNDS

    listed = admin_json(coordinator, "tasks")
    assert [t["task_id"] for t in listed] == [task]
    assert listed[0] == {key: value for key, value in status.items() if key != "rounds"}


def waiting_for_devices(coordinator, task):
    """The task's status once its current round waits for devices."""
    status = admin_json(coordinator, "status", task)
    current = status["current_round"]
    return status if current and current["state"] == "ROUND_STATE_WAITING_FOR_DEVICES" else None


def test_a_round_waits_for_devices_then_trains_aggregates_and_completes_in_status_and_events(coordinator, tmp_path):
    task = create_fedavg_task(coordinator, tmp_path, small_model(), rounds=1, per_round=DEVICES,
                              min_updates=DEVICES, min_available=DEVICES, timeout_ms=20000)
    waiting = wait_for("the task to wait for devices", lambda: waiting_for_devices(coordinator, task), 30)
    assert waiting["current_round"]["round_id"] == 1, waiting
    run_device_rounds(coordinator, tmp_path, task, DEVICES, 1)
    # The round's course, from its events: waiting, started (training), aggregating, completed.
    rounds_events = [entry for entry in (json.loads(line) for line in coordinator["log"].read_text().splitlines())
                     if entry.get("task") == task and "sequence" in entry and entry["event"].startswith("round_")]
    assert [(entry["event"], entry["round"]) for entry in rounds_events] == [
        ("round_waiting_for_devices", 1), ("round_started", 1), ("round_aggregating", 1), ("round_completed", 1)]
    assert rounds_events[0]["needed"] == DEVICES, rounds_events[0]
    published = logged_events(coordinator["log"])
    assert replayed(coordinator, 0, len(published)) == published  # the admin CLI names the new kinds
    # Once it ended, the task no longer waits.
    status = admin_json(coordinator, "status", task)
    assert (status["state"], status["current_round"]["state"]) == ("TASK_STATE_COMPLETED", "ROUND_STATE_COMPLETED")


def test_status_of_an_unknown_task_names_it(coordinator):
    result = subprocess.run(coordinator["admin"] + ["status", "no-such-task"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert "GetTask failed with status 5: no task 'no-such-task'" in result.stderr, result.stderr


def logged_events(log):
    """(sequence, kind) of every event the coordinator's log has, in order."""
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    return [(entry["sequence"], "EVENT_KIND_" + entry["event"].upper()) for entry in entries if "sequence" in entry]


def replayed(coordinator, since, count):
    result = subprocess.run(coordinator["admin"] + ["events", "--since", str(since), "--count", str(count)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [(event["sequence"], event["kind"]) for event in map(json.loads, result.stdout.splitlines())]


def test_events_replay_from_a_sequence_number_across_a_coordinator_kill(coordinator, tmp_path):
    task = create_fedavg_task(coordinator, tmp_path, small_model(), rounds=1, per_round=DEVICES,
                              min_updates=DEVICES, min_available=DEVICES, timeout_ms=20000)
    run_device_rounds(coordinator, tmp_path, task, DEVICES, 1, grpc_devices=1)
    published = logged_events(coordinator["log"])
    assert [sequence for sequence, _ in published] == list(range(1, len(published) + 1))
    kinds = [kind for _, kind in published]
    assert published[0][1] == "EVENT_KIND_TASK_CREATED" and published[-1][1] == "EVENT_KIND_TASK_FINISHED"
    assert {kind: kinds.count(kind) for kind in kinds} == {
        "EVENT_KIND_TASK_CREATED": 1, "EVENT_KIND_DEVICE_REGISTERED": DEVICES, "EVENT_KIND_ROUND_STARTED": 1,
        "EVENT_KIND_DEVICE_SELECTED": DEVICES, "EVENT_KIND_UPDATE_RECEIVED": DEVICES,  # data plane and gRPC
        "EVENT_KIND_ROUND_WAITING_FOR_DEVICES": 1,  # the task is created before its devices start
        "EVENT_KIND_ROUND_AGGREGATING": 1, "EVENT_KIND_ROUND_COMPLETED": 1, "EVENT_KIND_TASK_FINISHED": 1}
    assert replayed(coordinator, 0, len(published)) == published

    coordinator["process"].kill()
    coordinator["process"].wait()
    restarted = launch_coordinator(tmp_path, grpc_port=coordinator["grpc_port"], log_name="restarted.log")
    try:
        assert replayed(restarted, 0, len(published)) == published
        assert replayed(restarted, len(published) - 2, 2) == published[-2:]
        second = create_fedavg_task(restarted, tmp_path, small_model(), rounds=1, per_round=DEVICES,
                                    min_updates=DEVICES, min_available=DEVICES, timeout_ms=20000)
        assert replayed(restarted, len(published), 1) == [(len(published) + 1, "EVENT_KIND_TASK_CREATED")]
        assert second != task
    finally:
        restarted["process"].kill()
        restarted["process"].wait()


def follow(coordinator, task):
    return subprocess.Popen(coordinator["admin"] + ["events", "--follow", task], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_follow_prints_a_line_per_round_until_the_task_ends(coordinator, tmp_path):
    task = create_fedavg_task(coordinator, tmp_path, small_model(), rounds=ROUNDS, per_round=DEVICES,
                              min_updates=DEVICES, min_available=DEVICES, timeout_ms=20000)
    follower = follow(coordinator, task)  # from before the first round
    run_device_rounds(coordinator, tmp_path, task, DEVICES, ROUNDS)
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err
    *rounds, ended = map(json.loads, out.splitlines())
    assert [(r["round_id"], r["rounds_planned"], r["state"], r["selected"], r["contributed"], r["model_version"])
            for r in rounds] == [(n, ROUNDS, "ROUND_STATE_COMPLETED", DEVICES, DEVICES, f"{task}/{n}")
                                 for n in range(1, ROUNDS + 1)]
    assert all(r["duration_ms"] >= 0 for r in rounds)
    assert (ended["task_id"], ended["state"], ended["rounds_completed"]) == (task, "TASK_STATE_COMPLETED", ROUNDS)

    late = follow(coordinator, task)  # after the end: the same lines at once
    assert late.communicate(timeout=30)[0] == out and late.returncode == 0


def test_follow_exits_3_when_the_task_is_stopped(coordinator, tmp_path):
    task = create_fedavg_task(coordinator, tmp_path, small_model(), rounds=ROUNDS, per_round=DEVICES,
                              min_updates=DEVICES, min_available=DEVICES, timeout_ms=20000)
    follower = follow(coordinator, task)
    admin_json(coordinator, "stop-task", task, "--reason", "enough")
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 3, err
    ended = json.loads(out.splitlines()[-1])
    assert (ended["state"], ended["state_reason"], ended["current_round"]) == ("TASK_STATE_STOPPED", "enough", None)
