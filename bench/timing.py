"""What the benchmark scripts share: the arguments and turn-taking of a paired run (ours against
upstream), and the timing their child processes do (STEP_TIMES: sent to each interpreter with
`python -c`, so text to prepend, not a module they import)."""
import argparse

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


def paired_parser(description, rounds):
    """The arguments of a paired run: both interpreters, the thread counts, the processes per side
    (--rounds) and a filter of the measures' names (-k)."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shim", required=True)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--threads", default="1,2", help="intra-op thread counts, comma-separated")
    parser.add_argument("--rounds", type=int, default=rounds, help="processes per side, the sides taking turns")
    parser.add_argument("-k", dest="pattern", default="", help="only measures whose name matches this regex")
    return parser


def taking_turns(rounds):
    """(round, side) in the order the processes run: ours first in even rounds, upstream first in
    odd ones, so that a slow spell of the host falls on both."""
    for round_ in range(rounds):
        for side in (0, 1) if round_ % 2 == 0 else (1, 0):
            yield round_, side
