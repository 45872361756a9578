"""Prime counting with a sieve of Eratosthenes."""


def count_primes(n: int) -> int:
    if n < 2:
        return 0
    sieve = bytearray([1]) * (n + 1)
    sieve[0] = sieve[1] = 0
    k = 2
    while k * k <= n:
        if sieve[k]:
            sieve[k * k :: k] = bytes(len(range(k * k, n + 1, k)))
        k += 1
    return sum(sieve)
