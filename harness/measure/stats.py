"""Uncertainty of a point's figures over its timed batches (docs/measurement.md, "Uncertainty").

Student's t for a mean; for a ratio of totals (throughput = tokens / time) the ratio estimator's
linearised standard error. The t distribution is integrated numerically (no SciPy in the environment):
for the quantiles used here the integral is exact to far more digits than any timing.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

CONFIDENCE = 0.95
_GRID = 4001  # Simpson's rule over [0, atan(x / sqrt(df))]: odd count


def t_cdf(x: float, df: float) -> float:
    """P(T <= x) for Student's t with `df` (any positive real) degrees of freedom.

    Integrated over u = atan(t / sqrt(df)) in [0, atan(x / sqrt(df))], where the density becomes
    cos(u)^(df - 1): bounded and smooth for df >= 1 whatever x is. Integrated over t itself, a fixed grid
    misses the density's peak once x is large (x = 1e4 gave 0.94, x = 1e5 more than 1), and a very
    significant change read as none (plots compare).
    """
    if x < 0:
        return 1.0 - t_cdf(-x, df)
    end = math.atan(x / math.sqrt(df))
    u = np.linspace(0.0, end, _GRID)
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(math.pi)
    pdf = np.exp(log_norm + (df - 1) * np.log(np.maximum(np.cos(u), 1e-300)))
    h = end / (_GRID - 1)
    simpson = h / 3 * (pdf[0] + pdf[-1] + 4 * pdf[1:-1:2].sum() + 2 * pdf[2:-1:2].sum())
    return min(1.0, 0.5 + float(simpson))


@functools.lru_cache(maxsize=None)  # a sweep asks for a handful of (q, df) pairs, thousands of times
def t_quantile(q: float, df: float) -> float:
    """The x with P(T <= x) = q, for q in (0.5, 1): bisection on `t_cdf`."""
    high = 1.0
    while t_cdf(high, df) < q:
        high *= 2
    low = 0.0
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if t_cdf(middle, df) < q else (low, middle)
    return (low + high) / 2


def t_critical(df: float, confidence: float = CONFIDENCE) -> float:
    """The two-sided critical value: t_{(1 + confidence) / 2, df}."""
    return t_quantile((1 + confidence) / 2, df)


@dataclass(frozen=True)
class Interval:
    low: float
    high: float

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Optional[Interval]:
    """Student's t interval of the mean; None below two values (no spread to speak of)."""
    if len(values) < 2:
        return None
    a = np.asarray(values, dtype=float)
    half = t_critical(len(a) - 1, confidence) * a.std(ddof=1) / math.sqrt(len(a))
    return Interval(float(a.mean() - half), float(a.mean() + half))


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float],
                   confidence: float = CONFIDENCE) -> Optional[Interval]:
    """Interval of R = sum(numerators) / sum(denominators), one pair per batch: the ratio estimator's linearised
    standard error sqrt(sum((y - R x)^2) / (n - 1)) / (mean(x) sqrt(n)), with t at n - 1 degrees of freedom."""
    if len(numerators) < 2:
        return None
    y, x = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    ratio = y.sum() / x.sum()
    residuals = y - ratio * x
    se = math.sqrt((residuals**2).sum() / (len(x) - 1)) / (x.mean() * math.sqrt(len(x)))
    half = t_critical(len(x) - 1, confidence) * se
    return Interval(float(ratio - half), float(ratio + half))


def median_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Optional[Interval]:
    """Distribution-free interval of the median: the order statistics (k, n + 1 - k) whose binomial(n, 1/2) cover
    reaches `confidence`. For paired timing ratios, whose tails are one machine hiccup away from anything, where a
    t interval of the mean would follow the hiccups. None where n is too small for any pair to reach it (n < 6)."""
    n = len(values)

    def cover(k: int) -> float:  # 1 - 2 P(Bin(n, 1/2) < k)
        return 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2**n

    if n < 2 or cover(1) < confidence:
        return None
    k = 1
    while k < n // 2 and cover(k + 1) >= confidence:
        k += 1
    ordered = sorted(values)
    return Interval(float(ordered[k - 1]), float(ordered[n - k]))


def within(interval: Optional[Interval], target_pct: float) -> bool:
    """The interval's half-width is at most target_pct % of its centre (the mean)."""
    if interval is None:
        return False
    centre = (interval.low + interval.high) / 2
    return centre > 0 and interval.half_width <= target_pct / 100 * centre


def cv(values: Sequence[float]) -> Optional[float]:
    """Coefficient of variation: sample std / mean."""
    if len(values) < 2:
        return None
    a = np.asarray(values, dtype=float)
    return float(a.std(ddof=1) / a.mean()) if a.mean() else None


# Proportions: accuracy's (docs/measurement.md, "Accuracy"). Z95: the normal quantile of a 95% two-sided interval.
Z95 = 1.959963984540054


def wilson(correct: int, examples: int, z: float = Z95) -> Tuple[float, float]:
    """The Wilson score interval of a proportion: sound at 0 and 1 and for a few examples, where the normal one is
    not."""
    p, n = correct / examples, examples
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # At none or all right, one end is exactly 0 or 1 (the float sum lands a rounding off it)
    return (0.0 if correct == 0 else centre - half), (1.0 if correct == examples else centre + half)


def difference(correct: int, examples: int, ref_correct: int, ref_examples: int) -> Tuple[float, float, float]:
    """This accuracy minus the reference's, with Newcombe's hybrid score interval (his method 10) from the two Wilson
    intervals. It takes the two as independent: the entries answered the same examples, so the interval is wider
    than a paired one would be, never narrower."""
    p1, p2 = correct / examples, ref_correct / ref_examples
    l1, u1 = wilson(correct, examples)
    l2, u2 = wilson(ref_correct, ref_examples)
    delta = p1 - p2
    return delta, delta - math.hypot(p1 - l1, u2 - p2), delta + math.hypot(u1 - p1, p2 - l2)
