"""`request_rates: auto`: doubling, then bisecting to the highest rate within the SLO."""

import pytest

from harness.scenarios.rate_search import RateSearch


def search_for(capacity: float, start=1.0, precision=0.1, max_probes=16) -> RateSearch:
    """An engine that meets the SLO exactly up to `capacity` requests/s."""
    search = RateSearch(start, precision, max_probes)
    while (rate := search.next_rate()) is not None:
        search.record(rate, rate <= capacity)
    return search


@pytest.mark.parametrize("capacity", [1.0, 3.3, 7.9, 40.0, 1000.0])
def test_finds_the_capacity_within_the_precision(capacity):
    search = search_for(capacity)
    assert search.converged
    assert search.sustained <= capacity < search.failed <= search.sustained * 1.1
    first_miss = next(i for i, (_, met) in enumerate(search.probes) if not met)
    doubling = [r for r, _ in search.probes[: first_miss + 1]]
    assert doubling == [2.0**i for i in range(len(doubling))]  # doubles from the start rate until a miss


def test_halves_when_even_the_start_rate_fails():
    search = search_for(0.3)
    assert [r for r, _ in search.probes][:3] == [1.0, 0.5, 0.25]
    assert search.sustained <= 0.3 < search.failed


def test_gives_up_without_an_answer_when_nothing_is_sustained():
    search = search_for(0.0)
    assert search.sustained is None and not search.converged
    assert len(search.probes) == 11  # the start rate, then ten halvings
    assert search.describe().endswith("(not converged: no rate probed met the SLO)")


def test_max_probes_bounds_the_search():
    search = search_for(1000.0, max_probes=5)
    assert len(search.probes) == 5 and not search.converged and search.sustained == 16.0
    assert search.describe() == ("probes: 1/s met, 2/s met, 4/s met, 8/s met, 16/s met (not converged: every rate "
                                 "probed met the SLO; raise search.max_probes (5) or start_rate)")
