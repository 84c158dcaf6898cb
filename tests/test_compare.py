"""Uncertainty and A/B comparison on synthetic samples: intervals against hand-computed values, and verdicts that
are `slower` only for a change both beyond the threshold and beyond the noise."""

import math

import numpy as np
import pytest

from harness.measure import stats
from harness.measure.metrics import summarize
from harness.measure.records import BatchSample
from plots.compare import judge, welch


@pytest.mark.parametrize("df,expected", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452),
                                         (1000, 1.9623)])
def test_t_critical_values_match_the_table(df, expected):
    assert stats.t_critical(df) == pytest.approx(expected, abs=1e-4)


def test_t_cdf_is_symmetric_and_bounded():
    assert stats.t_cdf(0, 5) == pytest.approx(0.5)
    assert stats.t_cdf(-2.0, 7) == pytest.approx(1 - stats.t_cdf(2.0, 7))
    assert stats.t_cdf(2.5706, 5) == pytest.approx(0.975, abs=1e-4)


@pytest.mark.parametrize("df", [1, 2, 4.3, 8])
def test_t_cdf_holds_far_in_the_tail(df):
    """Closed forms for df 1 and 2; a change many intervals wide is near-certain, never less (a fixed grid over t
    once gave 0.94 at t = 1e4, and more than 1 at 1e5)."""
    assert stats.t_cdf(2.0, 1) == pytest.approx(0.5 + math.atan(2.0) / math.pi, abs=1e-12)
    assert stats.t_cdf(3.0, 2) == pytest.approx(0.5 + 3.0 / (2 * math.sqrt(11.0)), abs=1e-12)
    tail = [stats.t_cdf(x, df) for x in (10.0, 1e2, 1e4, 1e5, 1e9)]
    assert tail == sorted(tail) and all(0.96 < p <= 1.0 for p in tail)


def test_mean_interval_by_hand():
    values = [10.0, 12.0, 11.0, 13.0, 9.0]  # mean 11, sample std sqrt(2.5)
    interval = stats.mean_interval(values)
    half = 2.7764 * math.sqrt(2.5) / math.sqrt(5)
    assert (interval.low, interval.high) == pytest.approx((11 - half, 11 + half), abs=1e-3)
    assert stats.mean_interval([5.0]) is None
    assert stats.cv(values) == pytest.approx(math.sqrt(2.5) / 11)


def test_ratio_interval_is_exact_for_a_constant_rate_and_widens_with_noise():
    exact = stats.ratio_interval([100, 200, 300], [1.0, 2.0, 3.0])
    assert (exact.low, exact.high) == pytest.approx((100, 100))
    noisy = stats.ratio_interval([100, 220, 280, 150], [1.0, 2.0, 3.0, 1.5])
    ratio = (100 + 220 + 280 + 150) / 7.5
    assert noisy.low < ratio < noisy.high


def test_median_interval_takes_the_binomial_order_statistics():
    # n = 30: P(Bin(30, 1/2) <= 9) = 0.0214, so the 10th and 21st values cover the median with 95.7%; the 11th and
    # 20th would cover 90.1%, too little.
    assert stats.median_interval(list(range(1, 31))) == stats.Interval(10.0, 21.0)
    assert stats.median_interval([3.0, 1.0, 2.0, 6.0, 5.0, 4.0]) == stats.Interval(1.0, 6.0)  # 1 - 2/64 = 96.9%
    assert stats.median_interval([1.0] * 5) is None  # 1 - 2/32 = 93.8%: no pair reaches 95%


def test_median_interval_covers_a_heavy_tailed_median_as_promised():
    rng = np.random.default_rng(0)
    hits = [(i := stats.median_interval(list(rng.standard_cauchy(30)))).low <= 0 <= i.high for _ in range(2000)]
    assert 0.94 <= np.mean(hits) <= 0.975  # 95.7% by construction; a t interval of the mean fails on Cauchy


def test_within_the_target_share():
    assert stats.within(stats.Interval(98.5, 101.5), 2.0)
    assert not stats.within(stats.Interval(97.0, 103.0), 2.0)
    assert not stats.within(None, 2.0)


def test_a_point_gets_intervals_and_a_cv():
    samples = [BatchSample(i, latency, 10.0 + i, 1.0, (16,), (8,)) for i, latency in enumerate([100, 104, 96, 100])]
    row = summarize(samples)
    mean_half = stats.t_critical(3) * np.std([100, 104, 96, 100], ddof=1) / 2
    assert row["latency_ms_ci95_low"] == pytest.approx(100 - mean_half)
    assert row["latency_ms_ci95_high"] == pytest.approx(100 + mean_half)
    assert row["throughput_tokens_per_s_ci95_low"] < row["throughput_tokens_per_s"] < \
        row["throughput_tokens_per_s_ci95_high"]
    assert row["latency_ms_cv"] == pytest.approx(np.std([100, 104, 96, 100], ddof=1) / 100)
    one = summarize(samples[:1])
    assert one["latency_ms_ci95_low"] is None and one["latency_ms_cv"] is None


def draws(mean: float, noise: float, seed: int, n: int = 10):
    return list(np.random.default_rng(seed).normal(mean, noise * mean, n))


def verdict(base, new, metric="latency_ms_mean", threshold=0.05):
    return judge(("hf", "random", 1, 16, 8), metric, float(np.mean(base)), float(np.mean(new)), base, new, threshold)


def test_identical_distributions_are_the_same():
    v = verdict(draws(100, 0.02, 1), draws(100, 0.02, 2))
    assert v.verdict == "same"
    assert v.ratio_low < 1 < v.ratio_high


def test_a_ten_percent_shift_with_low_noise_is_slower():
    v = verdict(draws(100, 0.01, 1), draws(110, 0.01, 2))
    assert v.verdict == "slower" and v.p_value < 1e-6
    assert v.ratio == pytest.approx(1.1, abs=0.01) and v.ratio_low > 1.05


def test_a_ten_percent_shift_hidden_in_thirty_percent_noise_is_the_same():
    v = verdict(draws(100, 0.30, 3), draws(110, 0.30, 4))
    assert v.verdict == "same" and v.p_value > 0.05


def test_a_significant_change_under_the_threshold_is_the_same():
    v = verdict(draws(100, 0.001, 1), draws(103, 0.001, 2))
    assert v.p_value < 1e-6 and v.verdict == "same"


def test_higher_throughput_is_faster():
    v = verdict(draws(1000, 0.01, 1), draws(1200, 0.01, 2), metric="throughput_tokens_per_s")
    assert v.verdict == "faster" and v.change > 0


def test_welch_needs_two_samples_a_side():
    assert welch([1.0], [1.0, 2.0]) == (None, None)
    v = verdict([100.0], [150.0])
    assert v.verdict == "same" and v.ratio == 1.5 and v.ratio_low is None  # no samples, no verdict beyond same
