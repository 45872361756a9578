"""A sieve with an off-by-one: n itself is never counted."""


def count_primes(n: int) -> int:
    if n < 2:
        return 0
    sieve = bytearray([1]) * n
    sieve[0] = sieve[1] = 0
    k = 2
    while k * k < n:
        if sieve[k]:
            sieve[k * k :: k] = bytes(len(range(k * k, n, k)))
        k += 1
    return sum(sieve)
