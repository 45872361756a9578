"""The project's benchmark: one count_primes(n) for a fresh n near 60000, timed, as JSON.

This process never imports the project. It draws n (from the OS's randomness, after the child
has started), hands it to a child process (measure.py) that imports the project and times one
call, and checks the child's answer against a sieve of its own (exit 1 if it is wrong). The
project's code runs only in the child: it cannot change the question, the check or what this
process prints. It can still edit the clock the child reads (the judge checks the seconds
against the OS's own count), and a wrong answer always fails. One call per child: a second
call could be answered from what the first left behind; the judge runs the benchmark as many
times as it needs, each in a fresh sandbox.
"""

import ctypes
import json
import random
import subprocess
import sys


def reference(n: int) -> int:
    """How many primes are <= n, by a sieve that shares no code with the project."""
    if n < 2:
        return 0
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = sieve[1] = 0
    for p in range(2, int(n**0.5) + 1):
        if sieve[p]:
            sieve[p * p :: p] = bytes(len(range(p * p, n + 1, p)))
    return sum(sieve)


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
    child = subprocess.Popen(
        [sys.executable, "measure.py"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    n = random.SystemRandom().randrange(59_500, 60_500)
    out, _ = child.communicate(f"{n}\n", timeout=600)
    try:
        got = json.loads(out.strip().splitlines()[-1])
        answer, seconds = int(got["answer"]), float(got["seconds"])
    except (ValueError, KeyError, IndexError, TypeError):
        print(f"the measuring process said {out[-200:]!r} (exit {child.returncode})", file=sys.stderr)
        return 1
    if answer != reference(n):
        print(f"count_primes({n}) = {answer}, expected {reference(n)}", file=sys.stderr)
        return 1
    print(json.dumps({"seconds": seconds, "n": n}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
