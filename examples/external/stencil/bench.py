"""The project's benchmark: the kernel on fresh inputs, timed, every answer spot-checked.

    python3 bench.py [--repeat K]   K calls, each on a fresh input (default 1); prints JSON

This process never loads the project's code: it builds the kernel with the driver into a child
process (reference.Kernel), draws a fresh seed for every call, and checks each answer at cells
it picks only after the answer has arrived, from the definition (reference.expected). So a
kernel that is fast because it is wrong, or because it guessed the question, fails (exit 1).
The seconds are the driver's clock around each call, which the project's code could edit: the
judge checks them against the OS's own count. Building the kernel and starting two processes
cost far more than one call; the judge's `scale` runs this at two sizes of K so the OS can
see the calls alone.
"""

import argparse
import ctypes
import json
import random
import sys

from reference import Kernel, expected

N = 1 << 14  # cells per call
CHECKED = 16  # cells checked per call, picked after the answer


def out_of_reach() -> None:
    """Make this process non-dumpable before the project's code runs anywhere. The project's
    processes run as this one's uid, so they could otherwise read its memory through
    /proc/PID/mem (the judge's read-only /proc stops only writing): a checker that held its
    answer early could have it copied. Non-dumpable, its /proc entry is root's and closed."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):  # not Linux: nothing to close
        pass


def main() -> int:
    out_of_reach()
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=1)
    repeat = parser.parse_args().repeat
    rng = random.SystemRandom()
    kernel = Kernel(N)
    seconds = 0.0
    for _ in range(repeat):
        seed = rng.getrandbits(64)
        took, got = kernel.call(seed)
        seconds += took
        for i in rng.sample(range(N), CHECKED):
            if got[i] != expected(seed, N, i):
                print(f"cell {i}: {got[i]}, expected {expected(seed, N, i)}", file=sys.stderr)
                return 1
    if kernel.close() != 0:
        print("the kernel's driver failed", file=sys.stderr)
        return 1
    print(json.dumps({"seconds": seconds / repeat, "calls": repeat}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
