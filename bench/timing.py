"""What the benchmark scripts' child processes share: their source is sent to each interpreter
(ours and upstream) with `python -c`, so this is text to prepend, not a module they import."""

MEDIAN_TIME = r'''
import time


def median_time(step, runs):
    """The median of `runs` timed calls of step(), after an untimed warm-up call (first-call costs
    are not per-step costs)."""
    step()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2]
'''
