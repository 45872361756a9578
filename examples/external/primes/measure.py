"""The benchmark's child: reads n, times one count_primes(n) and prints the answer and the
seconds as JSON. The parent (benchmark.py) draws n and checks the answer."""

import json
import sys
import time

from primes import count_primes

n = int(sys.stdin.readline())
t0 = time.perf_counter()
answer = count_primes(n)
seconds = time.perf_counter() - t0
print(json.dumps({"answer": answer, "seconds": seconds}))
