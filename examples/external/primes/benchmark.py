"""The project's benchmark: best of 3 runs of count_primes(60000), as JSON on stdout."""

import json
import time

from primes import count_primes

times = []
for _ in range(3):
    t0 = time.perf_counter()
    count_primes(60_000)
    times.append(time.perf_counter() - t0)
print(json.dumps({"best_seconds": min(times), "runs": times}))
