"""The benchmark's child: reads numbers (one a line), times intcomma over all of them, prints
the seconds and then each answer. The parent drew the numbers and checks the answers."""

import sys
import time

from humanize import intcomma

numbers = [int(line) for line in sys.stdin.read().split()]
t0 = time.perf_counter()
answers = [intcomma(n) for n in numbers]
seconds = time.perf_counter() - t0
sys.stdout.write(f"{seconds}\n" + "\n".join(answers) + "\n")
