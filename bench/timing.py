"""What the benchmark scripts' child processes share: their source is sent to each interpreter
(ours and upstream) with `python -c`, so this is text to prepend, not a module they import."""

STEP_TIMES = r'''
import time


def step_times(step, runs):
    """The seconds of `runs` timed calls of step(), after an untimed warm-up call (first-call costs
    are not per-step costs)."""
    step()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return times


def median_time(step, runs):
    times = sorted(step_times(step, runs))
    return times[len(times) // 2]
'''
