"""Seed 004's baselines (round robin, OD-WIN, the GREEDY oracle) and its coverage measure."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.intervals.plan import Estimates, Plan
from scrapy_echo.sim.engine import SimSettings, simulate
from scrapy_echo.sim.oracle import GreedyOracle
from scrapy_echo.sim.results import HOUR, coverage, score
from scrapy_echo.sim.trace import Trace

NOW = 100_000.0


def rates_plan(*link_rates: float) -> Plan:
    n = len(link_rates)
    est = Estimates(np.array(link_rates), np.ones(n), np.full(n, 1e-4))
    return Plan(est, np.full(n, np.inf), 0.0, np.zeros(n, bool))


@pytest.mark.parametrize("name", ["rr", "od-win"])
def test_new_pages_go_first_newest_first(name: str) -> None:
    policy = make_policy(name)
    policy.plan = rates_plan(1.0, 1.0)
    frontier = Frontier(2)
    frontier.push(0, "old", appeared=NOW - 50, discovered=NOW - 40)
    frontier.push(1, "new", appeared=NOW - 30, discovered=NOW - 10)
    assert policy.choose(NOW, np.array([NOW - 5, NOW - 5]), frontier) == Decision("page", 1)


def test_round_robin_recrawls_the_source_crawled_longest_ago() -> None:
    policy = make_policy("rr")
    last = np.array([NOW - 10, NOW - 300, NOW - 20])
    assert policy.choose(NOW, last, Frontier(3)) == Decision("source", 1)


def test_od_win_takes_the_best_yield_among_sources_rested_a_cycle() -> None:
    policy = make_policy("od-win")
    policy.plan = rates_plan(5.0, 1.0, 2.0)
    # Source 0 yields most but was crawled 10 minutes ago: within the hour's cycle.
    last = np.array([NOW - 600, NOW - 4000, NOW - 3700])
    assert policy.choose(NOW, last, Frontier(3)) == Decision("source", 2)
    # Nothing rested: the source crawled longest ago.
    last = np.array([NOW - 600, NOW - 900, NOW - 60])
    assert policy.choose(NOW, last, Frontier(3)) == Decision("source", 1)


def overlap_trace() -> Trace:
    """Three sources: page 0 on sources 0 and 1, pages 1-2 on source 1, page 3 on source 2;
    every link shows from t=1000 on (after every source's first crawl)."""
    source = np.array([0, 1, 1, 1, 2])
    page = np.array([0, 0, 1, 2, 3])
    return Trace(
        duration=8000.0,
        warmup=0.0,
        source_ids=["a", "b", "c"],
        source_urls=[f"https://{s}.example/" for s in "abc"],
        page_urls=[f"https://x.example/{p}" for p in range(4)],
        page_created=np.full(4, 1000.0),
        link_source=source,
        link_page=page,
        link_appeared=np.full(5, 1000.0),
        link_disappeared=np.full(5, np.inf),
        click_page=np.arange(4),
        click_ts=np.full(4, 7000.0),
        click_count=np.ones(4),
    )


def test_greedy_oracle_crawls_the_source_with_most_pages_nobody_found() -> None:
    trace = overlap_trace()
    policy = GreedyOracle()
    discovered = np.full(4, np.nan)
    policy.attach(trace, discovered)
    last = np.array([0.0, 0.0, 0.0])  # first crawls done, before anything appeared
    assert policy.choose(1100.0, last, Frontier(3)) == Decision("source", 1)  # 3 unfound
    # Set cover: source 1 covers page 0 too, so source 0 has nothing left; source 2 has page 3.
    assert policy.choose(1101.0, last, Frontier(3)) == Decision("source", 2)
    # Nothing left this cycle: the rotation goes on.
    assert policy.choose(1102.0, last, Frontier(3)) == Decision("source", 0)
    # Counted again an hour later: page 0 (shared) was found meanwhile, so source 0 has
    # nothing left and source 2 has page 3.
    discovered[:3] = 1150.0
    assert policy.choose(1100.0 + HOUR, last, Frontier(3)) == Decision("source", 2)


def test_greedy_oracle_in_a_replay_finds_every_page_and_needs_the_trace() -> None:
    trace = overlap_trace()
    replay = simulate(trace, GreedyOracle(), SimSettings(crawl_rate=0.01))
    assert not np.isnan(replay.discovered).any()
    assert not np.isnan(replay.crawled).any()
    with pytest.raises(RuntimeError, match="reads the trace"):
        GreedyOracle().choose(NOW, np.zeros(3), Frontier(3))


def test_coverage_counts_pages_found_within_the_period() -> None:
    trace = overlap_trace()
    replay = simulate(trace, make_policy("rr"), SimSettings(crawl_rate=0.01))
    assert coverage(trace, replay, within=np.inf) == 1.0  # rr finds everything in time
    replay.discovered[:] = trace.page_created + np.array([10.0, HOUR + 1, 5 * HOUR, np.nan])
    assert coverage(trace, replay, within=HOUR) == 0.25
    assert coverage(trace, replay, within=4 * HOUR) == 0.5
    assert coverage(trace, replay, within=np.inf) == 0.75
    s = score(trace, replay)
    assert (s.coverage_1h, s.coverage_4h, s.coverage) == (0.25, 0.5, 0.75)
