"""A budget that changes mid-run (Busa-Fekete et al.: the discrete policy "automatically
adapts to the new optimal solution when the total bandwidth changes"): after the change the
crawl spends the new rate, and earns about what a crawl at that rate all along earns."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings, simulate
from scrapy_echo.sim.results import page_value
from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.trace import Trace

DAY = 86400.0
LOW, HIGH = 0.003, 0.009
CHANGE = 2 * DAY


@pytest.fixture(scope="module")
def trace() -> Trace:
    return synthesize(SynthParams(sources=200, days=6, warmup_days=1, seed=11))


def _second_half(trace: Trace, policy: str, settings: SimSettings) -> tuple[float, int]:
    """Profit of the pages created from day 4 on, and the crawls made after the change at
    day 2 (sources, pages and refetches)."""
    slots: list[tuple[float, str, str]] = []
    replay = simulate(trace, make_policy(policy), settings, decisions=slots)
    value = page_value(trace, replay.crawled, None)
    late = (trace.page_created >= 4 * DAY) & (trace.page_created < trace.duration)
    return float(value[late].sum()), sum(1 for when, _, _ in slots if when >= CHANGE)


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["echo-newpages", "greedy"])
def test_after_a_budget_change_the_crawl_earns_what_the_new_budget_earns(
    trace: Trace, policy: str
) -> None:
    low, _ = _second_half(trace, policy, SimSettings(LOW))
    high, high_crawls = _second_half(trace, policy, SimSettings(HIGH))
    changed, crawls = _second_half(trace, policy, SimSettings(LOW, rate_changes=((CHANGE, HIGH),)))
    assert crawls == pytest.approx(HIGH * 4 * DAY, abs=2) == high_crawls
    assert high > 1.2 * low  # the budget matters on this trace, so the test can tell
    assert changed == pytest.approx(high, rel=0.03)
    # And down: a cut is spent at the lower rate from the change on. It earns more than the
    # lower budget all along (what the better-funded days taught it stays: 35% more for
    # echo-newpages when this test was written), never less, and less than the higher.
    cut, cut_crawls = _second_half(trace, policy, SimSettings(HIGH, rate_changes=((CHANGE, LOW),)))
    assert cut_crawls == pytest.approx(LOW * 4 * DAY, abs=2)
    assert 0.97 * low <= cut < high


def test_rate_changes_must_be_ordered_and_positive() -> None:
    with pytest.raises(ValueError, match="rate_changes"):
        SimSettings(0.1, rate_changes=((100.0, 0.2), (50.0, 0.3)))
    with pytest.raises(ValueError, match="rate_changes"):
        SimSettings(0.1, rate_changes=((100.0, 0.0),))


def test_without_changes_the_slots_are_the_ones_they_always_were(trace: Trace) -> None:
    slots: list[tuple[float, str, str]] = []
    simulate(trace, make_policy("bfs"), SimSettings(LOW), decisions=slots)
    times = np.array([when for when, _, _ in slots])
    count = int(np.floor(trace.duration * LOW))
    assert times.size == count
    assert np.array_equal(times, np.arange(count) * (1.0 / LOW))
