"""Statistics for paired timing: small pure functions over lists of numbers.

Why these choices:
- A comparison's unit of evidence is one freshly spawned *process pair*, not one call: a single
  pair of processes carries its own persistent bias (memory layout, alignment, which core), so an
  interval computed from calls or rounds inside one pair is falsely narrow (Kalibera and Jones,
  hierarchical repetition). Callers reduce each pair to one log-ratio and the interval is over
  pairs.
- Log-ratios make A/B and B/A symmetric and let the geometric mean over workloads be a plain mean.
- Medians inside a round and the Hodges-Lehmann estimator across pairs are robust to the odd
  interrupted call, so outliers are counted and reported, never silently dropped.
- With few pairs a percentile bootstrap is too narrow; the *expanded* percentile interval
  (Hesterberg 2015) widens it by the Student-t factor for n-1 degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist
from typing import Literal

import numpy as np

Verdict = Literal["improved", "regressed", "no_difference", "inconclusive"]

TOO_FEW = "too_few_samples"
ZERO_VARIANCE = "zero_variance"
OUTLIERS = "outliers"
DISCARDED = "discarded_pairs"


def median(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("median of no values")
    return float(np.median(np.asarray(xs, dtype=np.float64)))


def mad(xs: Sequence[float]) -> float:
    """Median absolute deviation from the median (unscaled)."""
    m = median(xs)
    return median([abs(x - m) for x in xs])


def hodges_lehmann(xs: Sequence[float]) -> float:
    """Median of all Walsh averages (x_i + x_j) / 2, i <= j: robust and ~95% efficient."""
    a = np.asarray(xs, dtype=np.float64)
    if a.size == 0:
        raise ValueError("Hodges-Lehmann estimate of no values")
    i, j = np.triu_indices(a.size)
    return float(np.median((a[i] + a[j]) / 2.0))


def _hodges_lehmann_rows(m: np.ndarray) -> np.ndarray:
    """Hodges-Lehmann of every row of a 2-D array (one bootstrap resample per row)."""
    i, j = np.triu_indices(m.shape[1])
    return np.asarray(np.median((m[:, i] + m[:, j]) / 2.0, axis=1))


NET_FLOOR = 0.05  # an arm's work is taken as at least this share of its measured cost


def net_cost(arm_mean: float, null_mean: float) -> float:
    """An arm's cost per call without the protocol's: its mean minus the null arm's, but never
    below NET_FLOOR of its mean (where the protocol is nearly all of a call, the difference is
    noise; the floor bounds the ratio instead of letting it explode or turn negative)."""
    return max(arm_mean - null_mean, NET_FLOOR * arm_mean)


def round_log_ratio(
    a_ns: Sequence[float], b_ns: Sequence[float], null_ns: Sequence[float] = ()
) -> float:
    """log(mean of b / mean of a) over one round's calls: < 0 means arm b was faster.

    The mean over every call, not a robust subset: a candidate must not be able to hide work
    in the calls an estimator drops. The clocks are the kernel's CPU count (which a busy
    machine barely disturbs) or the judge's wall clock, and the interval over pairs absorbs
    what noise remains. `null_ns`: the null arm's calls of the same round; their mean, the
    protocol's own cost per call, is taken off both arms first (`net_cost`), so the ratio is
    that of the arms' work rather than diluted toward 1 by what every call pays. One call's
    time of zero is allowed: a CPU count accounted late gives its time to the next call.
    """
    if not a_ns or not b_ns:
        raise ValueError("a round needs samples of both arms")
    if min(a_ns) < 0 or min(b_ns) < 0:
        raise ValueError("timings must not be negative")
    a, b = sum(a_ns) / len(a_ns), sum(b_ns) / len(b_ns)
    if a <= 0 or b <= 0:
        raise ValueError("each arm's calls must have taken time")
    if null_ns:
        null = sum(null_ns) / len(null_ns)
        a, b = net_cost(a, null), net_cost(b, null)
    return math.log(b / a)


def outlier_count(xs: Sequence[float], threshold: float = 3.5) -> int:
    """Values whose modified z-score (Iglewicz and Hoaglin) exceeds `threshold`.

    With a zero MAD (more than half the values equal) the mean absolute deviation stands in;
    when that is zero too, nothing is an outlier.
    """
    if len(xs) < 3:
        return 0
    m = median(xs)
    dev = [abs(x - m) for x in xs]
    scale = median(dev) / 0.6745
    if scale == 0.0:
        scale = (sum(dev) / len(dev)) * 1.2533
    if scale == 0.0:
        return 0
    return sum(1 for d in dev if d / scale > threshold)


def student_t_cdf(t: float, df: int) -> float:
    """CDF of Student's t for an integer number of degrees of freedom (A&S 26.7.3/26.7.4)."""
    if df < 1:
        raise ValueError("degrees of freedom must be >= 1")
    theta = math.atan(abs(t) / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        term, total = math.cos(theta), 0.0
        if df > 1:
            total = term
            for k in range(3, df - 1, 2):
                term *= c2 * (k - 1) / k
                total += term
        a = 2.0 / math.pi * (theta + math.sin(theta) * total)
    else:
        term = total = 1.0
        for k in range(2, df - 1, 2):
            term *= c2 * (k - 1) / k
            total += term
        a = math.sin(theta) * total
    return 0.5 + 0.5 * a if t >= 0 else 0.5 - 0.5 * a


def student_t_quantile(p: float, df: int) -> float:
    """Inverse of `student_t_cdf` by bisection (no table, no SciPy)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p < 0.5:
        return -student_t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while student_t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if student_t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def expanded_tail(n: int, confidence: float) -> float:
    """The tail probability for an expanded percentile interval (Hesterberg 2015).

    alpha'/2 = Phi(-sqrt(n / (n - 1)) * t_{1 - alpha/2, n - 1}): with small n the bootstrap's
    percentiles move outwards until the interval is as wide as a t interval would be.
    """
    if n < 2:
        raise ValueError("an interval needs at least two values")
    alpha = 1.0 - confidence
    t = student_t_quantile(1.0 - alpha / 2.0, n - 1)
    return NormalDist().cdf(-math.sqrt(n / (n - 1)) * t)


def bootstrap_ci(
    xs: Sequence[float], confidence: float, seed: int, resamples: int = 4000
) -> tuple[float, float]:
    """Expanded percentile bootstrap interval of the Hodges-Lehmann estimate, seeded."""
    a = np.asarray(xs, dtype=np.float64)
    if a.size < 2:
        raise ValueError("an interval needs at least two values")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, size=(resamples, a.size))
    stats = _hodges_lehmann_rows(a[idx])
    tail = expanded_tail(a.size, confidence)
    lo, hi = np.quantile(stats, [tail, 1.0 - tail])
    return float(lo), float(hi)


@dataclass(frozen=True)
class Estimate:
    """A location estimate of log-ratios over independent units, with its interval."""

    n: int
    estimate: float | None
    lo: float | None
    hi: float | None
    mad: float
    outliers: int
    notes: tuple[str, ...] = ()
    discarded_a: int = 0  # pairs discarded because arm a's worker or clock failed (`decide`)
    discarded_b: int = 0  # ... arm b's

    @property
    def half_width(self) -> float | None:
        if self.lo is None or self.hi is None:
            return None
        return (self.hi - self.lo) / 2.0


def estimate(
    xs: Sequence[float], confidence: float, seed: int, min_n: int, resamples: int = 4000
) -> Estimate:
    """Hodges-Lehmann estimate and bootstrap interval; explicit about what is missing.

    Fewer than `min_n` values: an estimate but no interval (`too_few_samples`). All values equal:
    an interval of zero width is not evidence of anything for wall-clock timing
    (`zero_variance`), so no interval either. Outliers are counted (`outliers`) and kept: the
    estimator is robust to them and dropping them would bias the result.
    """
    n = len(xs)
    if n == 0:
        return Estimate(0, None, None, None, 0.0, 0, (TOO_FEW,))
    est, spread, out = hodges_lehmann(xs), mad(xs), outlier_count(xs)
    notes = (OUTLIERS,) if out else ()
    if n < max(2, min_n):
        return Estimate(n, est, None, None, spread, out, (TOO_FEW, *notes))
    if max(xs) == min(xs):
        return Estimate(n, est, None, None, spread, out, (ZERO_VARIANCE, *notes))
    lo, hi = bootstrap_ci(xs, confidence, seed, resamples)
    return Estimate(n, est, lo, hi, spread, out, notes)


def with_discards(e: Estimate, discarded_a: int, discarded_b: int) -> Estimate:
    """`e` with the pairs an arm's worker or clock failed, which `decide` holds against it."""
    if discarded_a <= 0 and discarded_b <= 0:
        return e
    return replace(e, notes=(*e.notes, DISCARDED), discarded_a=discarded_a, discarded_b=discarded_b)


def log_threshold(min_effect: float) -> float:
    """A relative effect (0.03 = 3%) as a distance on the log scale."""
    return math.log1p(min_effect)


Side = Literal["within", "above", "below", "spans"]


def interval_side(lo: float, hi: float, m: float) -> Side:
    """Where an interval lies against 0 and the band +-m: inside the band (`within`, even
    where it excludes 0), wholly above or below 0 and reaching beyond the band, or holding 0
    and reaching beyond it (`spans`). The one rule every verdict is read from (the judge's
    speed verdicts, experiments' treatments)."""
    if -m <= lo and hi <= m:
        return "within"
    if lo > 0:
        return "above"
    if hi < 0:
        return "below"
    return "spans"


def decide(e: Estimate, min_effect: float, noise_floor: float | None = None) -> tuple[Verdict, str]:
    """The four-way verdict for log(b / a), from the interval alone, with the reason in words.

    - `no_difference`: the whole interval lies within +-min_effect: any effect is smaller than
      the task calls worth a verdict, even where the interval excludes zero.
    - `regressed` / `improved`: the interval excludes zero and reaches beyond min_effect (and
      the estimate is beyond the A/A noise floor when one was measured).
    - `inconclusive`: an interval that holds zero and reaches beyond min_effect, too few
      samples, zero variance.

    The interval decides, not its centre: an effect of exactly min_effect has its estimate on
    either side of the threshold about half the time however long it is measured, so a rule
    on the estimate found a planted 3% slowdown in 9 of 20 comparisons whose intervals all but
    one excluded no change (docs/measurement.md, "Detection").

    Pairs discarded because an arm's worker could not be frozen or its clock gave no reading
    (`discarded_a`, `discarded_b`) forbid every verdict that arm could gain from: `improved`
    for b, `regressed` for a, `no_difference` for either. Which pairs are discarded is not
    random: code that can make its own worker fail to freeze (an uninterruptible sleep at the
    freeze) in the pairs it finds unfavourable, judged from its own calls' timing and the gaps
    between its slots, chooses which pairs count; keeping the favourable ones moves an
    estimate by most of a pair's spread. Counting each such pair as a bad pair instead does not
    hold: a simulated chooser 1.5% faster (pairs spread 2.5%, 150 comparisons of 12 counted
    pairs, the judge's cap on discards) read `improved` in 53% of them with each discarded
    pair counted as the least favourable pair seen, 34% as far beyond it as it lies beyond the
    median, 9% as far as the whole range; and as a pair worse than any, a single one ended
    even a 20% improvement's verdict. An honest worker that cannot be frozen within the
    freezer's two seconds is rare enough that `inconclusive`, with the reason, is its cost.
    """
    verdict, why = _decide(e, min_effect, noise_floor)
    against = {"a": e.discarded_a, "b": e.discarded_b}
    gainers = {"improved": "b", "regressed": "a", "no_difference": "ab"}.get(verdict, "")
    for arm in gainers:
        if against[arm]:
            return "inconclusive", (
                f"{why}; but {against[arm]} pair(s) were discarded because arm {arm}'s worker "
                "could not be frozen or its clock gave no reading: code that can fail its own "
                f"pairs chooses which pairs count, so arm {arm} gains no verdict"
            )
    return verdict, why


def _decide(e: Estimate, min_effect: float, noise_floor: float | None) -> tuple[Verdict, str]:
    m = log_threshold(min_effect)
    if e.estimate is None or e.lo is None or e.hi is None:
        why = "zero variance: identical samples" if ZERO_VARIANCE in e.notes else "too few samples"
        return "inconclusive", f"{why} ({e.n} pairs)"
    span = f"interval {_pct(e.lo)} .. {_pct(e.hi)}"
    side = interval_side(e.lo, e.hi, m)
    if side == "within":
        return "no_difference", f"{span} lies within +-{min_effect:.1%}"
    if side == "spans":
        return "inconclusive", f"{span} holds 0 and reaches beyond +-{min_effect:.1%}"
    verdict: Verdict = "regressed" if side == "above" else "improved"
    if noise_floor is not None and abs(e.estimate) <= noise_floor:
        return "inconclusive", f"effect {_pct(e.estimate)} is inside the A/A noise floor"
    return verdict, f"{span} excludes 0 and reaches beyond {min_effect:.1%}"


def decided(e: Estimate, min_effect: float, precision: float) -> bool:
    """Whether measuring further could not change the answer much: the adaptive stop rule.

    Stops when the interval is wholly outside +-min_effect, wholly inside it, or narrower than
    +-precision (all on the log scale). Stopping on "the interval excludes zero" alone would
    inflate false verdicts by peeking; these rules do not favour either direction.
    """
    if e.lo is None or e.hi is None:
        return False
    m = log_threshold(min_effect)
    if e.lo > m or e.hi < -m or (-m <= e.lo and e.hi <= m):
        return True
    hw = e.half_width
    return hw is not None and hw <= precision


def mean_rows(rows: Sequence[Sequence[float]]) -> list[float]:
    """Per-unit mean over columns: pairs x workloads log-ratios -> one geometric-mean log-ratio."""
    return [float(np.mean(r)) for r in rows]


def _pct(log_ratio: float) -> str:
    return f"{math.expm1(log_ratio):+.1%}"


# --- comparisons over trials (experiments), by the same rules ------------------------------
# A trial is expensive, so experiments run few of them: 3 pairs are common. A plain percentile
# bootstrap over 3 paired differences of .1, .2, .3 gives [.10, .30], far too narrow; the
# Student-t interval of the mean gives [-.05, .45]. Medians get the expanded bootstrap, rates
# the Wilson interval.


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval of a proportion; None without trials. Unlike the normal
    approximation it stays inside [0, 1] and is honest at 0/n and n/n."""
    if n <= 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def t_interval(xs: Sequence[float], confidence: float) -> tuple[float, float]:
    """Student-t interval of the mean: mean +- t(1 - alpha/2, n - 1) * s / sqrt(n)."""
    n = len(xs)
    if n < 2:
        raise ValueError("an interval needs at least two values")
    a = np.asarray(xs, dtype=np.float64)
    mean, sd = float(a.mean()), float(a.std(ddof=1))
    half = student_t_quantile(0.5 + confidence / 2.0, n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def mean_estimate(xs: Sequence[float], confidence: float, min_n: int) -> Estimate:
    """The mean of independent differences with its Student-t interval, and what is missing:
    below `min_n` values no interval (`too_few_samples`), nor for identical values
    (`zero_variance`: a zero-width interval from a handful of trials is not evidence)."""
    n = len(xs)
    if n == 0:
        return Estimate(0, None, None, None, 0.0, 0, (TOO_FEW,))
    est, spread, out = float(np.mean(np.asarray(xs, dtype=np.float64))), mad(xs), outlier_count(xs)
    notes = (OUTLIERS,) if out else ()
    if n < max(2, min_n):
        return Estimate(n, est, None, None, spread, out, (TOO_FEW, *notes))
    if max(xs) == min(xs):
        return Estimate(n, est, None, None, spread, out, (ZERO_VARIANCE, *notes))
    lo, hi = t_interval(xs, confidence)
    return Estimate(n, est, lo, hi, spread, out, notes)


def median_interval(
    xs: Sequence[float], confidence: float, seed: int, resamples: int = 4000
) -> tuple[float, float] | None:
    """Expanded percentile bootstrap interval of the median (Hesterberg 2015), seeded; None
    below two values (one value says nothing about spread)."""
    a = np.asarray(xs, dtype=np.float64)
    if a.size < 2:
        return None
    rng = np.random.default_rng(seed)
    stats = np.median(a[rng.integers(0, a.size, size=(resamples, a.size))], axis=1)
    tail = expanded_tail(a.size, confidence)
    lo, hi = np.quantile(stats, [tail, 1.0 - tail])
    return float(lo), float(hi)
