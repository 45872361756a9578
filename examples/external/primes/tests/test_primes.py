import unittest

from primes import count_primes


class CountPrimes(unittest.TestCase):
    def test_small(self) -> None:
        self.assertEqual([count_primes(n) for n in range(12)], [0, 0, 1, 2, 2, 3, 3, 4, 4, 4, 4, 5])

    def test_known_values(self) -> None:
        self.assertEqual(count_primes(100), 25)
        self.assertEqual(count_primes(10_000), 1229)

    def test_a_prime_bound_counts_itself(self) -> None:
        self.assertEqual(count_primes(7919), 1000)
