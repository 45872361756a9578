"""The benchmark of humanize.intcomma, in the shape a candidate cannot forge.

This process never imports humanize: it draws a fresh batch of numbers (from the OS's
randomness), hands it to a child (intcomma_child.py) that imports the project and times
intcomma over the batch, and checks every answer against Python's own formatting. A wrong
answer is exit 1; the seconds are the child's, which the judge checks against the OS's count.
"""

import json
import random
import subprocess
import sys

COUNT = 8_000


def main() -> int:
    rng = random.SystemRandom()
    numbers = [rng.randrange(-(10**12), 10**12) for _ in range(COUNT)]
    child = subprocess.run(
        [sys.executable, "bench/intcomma_child.py"],
        input="\n".join(map(str, numbers)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    lines = child.stdout.splitlines()
    if child.returncode != 0 or len(lines) != COUNT + 1:
        print(f"the child failed (exit {child.returncode}): {child.stderr[-500:]}", file=sys.stderr)
        return 1
    for n, got in zip(numbers, lines[1:], strict=True):
        if got != f"{n:,}":
            print(f"intcomma({n}) = {got!r}, expected {n:,}", file=sys.stderr)
            return 1
    print(json.dumps({"seconds": float(lines[0]), "count": COUNT}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
