"""Prime counting: the project's hot path."""


def is_prime(k: int) -> bool:
    if k < 2:
        return False
    d = 2
    while d * d <= k:
        if k % d == 0:
            return False
        d += 1
    return True


def count_primes(n: int) -> int:
    """How many primes are <= n (trial division: slow, plainly correct)."""
    return sum(1 for k in range(n + 1) if is_prime(k))
