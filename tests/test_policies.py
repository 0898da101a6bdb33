"""Each policy's decision rule on small hand-made states with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision
from scrapy_echo.model.decisions.registry import POLICIES, make_policy
from scrapy_echo.model.intervals.plan import Estimates, Plan

NOW = 10_000.0


def plan(lam, prof, mu, intervals, omega=0.0, kept=None) -> Plan:
    lam, prof, mu, intervals = (np.asarray(v, dtype=float) for v in (lam, prof, mu, intervals))
    kept = np.isfinite(intervals) if kept is None else np.asarray(kept, bool)
    return Plan(Estimates(lam, prof, mu), intervals, omega, kept)


def policy_with(name: str, p: Plan):
    policy = make_policy(name, seed=1)
    policy.plan = p
    return policy


def last(*times):
    return np.array(times, dtype=float)


# -- echo-newpages --------------------------------------------------------------------
def test_newpages_crawls_a_worthy_page_before_an_overdue_source() -> None:
    p = plan([0.01, 0.01], [10, 10], [1e-4, 1e-4], [100, 100], omega=1.0)
    frontier = Frontier(2)
    frontier.push(0, "page", appeared=NOW - 60, discovered=NOW - 10)
    policy = policy_with("echo-newpages", p)
    # Source 1 is 50 intervals overdue, but the page is worth ~9.9 > ω = 1.
    assert policy.choose(NOW, last(NOW, NOW - 5000), frontier) == Decision("page", 0)


def test_newpages_on_a_busy_host_recrawls_its_due_hub_before_a_page_worth_less_than_its_turn() -> (
    None
):
    # Source 0's host binds: a crawl there is worth 8 (ν_h), one elsewhere 1 (ω). Its waiting
    # page, worth ~5, is more than a crawl elsewhere, less than a turn of its own host.
    base = plan([1.0, 0.01], [10, 10], [0.01, 1e-4], [10, 100], omega=1.0)
    p = Plan(base.estimates, base.intervals, base.omega, base.kept, np.array([8.0, 1.0]))
    frontier = Frontier(2)
    frontier.push(0, "stale", appeared=NOW - 69, discovered=NOW - 60)  # 10 e^-0.69 ≈ 5.0
    newpages, paper = policy_with("echo-newpages", p), policy_with("echo-paper", p)
    crawled = last(NOW - 20, NOW)  # source 0 is due: 20 s of a 10 s interval
    assert newpages.choose(NOW, crawled, frontier) == Decision("source", 0)
    assert paper.choose(NOW, crawled, frontier) == Decision("page", 0)  # (by ω alone)
    # A page worth its host's turn goes first, as any page worth a crawl does.
    frontier.push(0, "fresh", appeared=NOW - 1, discovered=NOW)  # ≈ 9.9
    assert newpages.choose(NOW, crawled, frontier) == Decision("page", 0)


def test_newpages_takes_the_page_worth_most_now() -> None:
    # Source 0: P=10, fast decay; source 1: P=5, no decay to speak of.
    p = plan([0.01, 0.01], [10, 5], [1e-2, 1e-6], [100, 100], omega=0.1)
    frontier = Frontier(2)
    frontier.push(0, "fast", appeared=NOW - 300, discovered=NOW)  # 10 e^-3 ≈ 0.50
    frontier.push(1, "slow", appeared=NOW - 300, discovered=NOW)  # 5 e^-0.0003 ≈ 5.0
    policy = policy_with("echo-newpages", p)
    assert policy.choose(NOW, last(NOW, NOW), frontier) == Decision("page", 1)
    frontier.pop(1)
    assert policy.choose(NOW, last(NOW, NOW), frontier) == Decision("page", 0)


def test_newpages_recrawls_the_source_most_behind_schedule() -> None:
    p = plan([0.01] * 3, [1] * 3, [1e-3] * 3, [100, 1000, 200], omega=0.5)
    policy = policy_with("echo-newpages", p)
    # τ/I = 0.5, 0.4, 1.5: only source 2 is due, and it is the most behind.
    decision = policy.choose(NOW, last(NOW - 50, NOW - 400, NOW - 300), Frontier(3))
    assert decision == Decision("source", 2)


def test_newpages_first_crawls_a_new_source_before_due_ones() -> None:
    p = plan([0.01] * 2, [1] * 2, [1e-3] * 2, [100, 100], omega=0.5)
    policy = policy_with("echo-newpages", p)
    assert policy.choose(NOW, last(NOW - 900, np.nan), Frontier(2)) == Decision("source", 1)


def test_newpages_defers_a_page_worth_less_than_a_crawl() -> None:
    p = plan([0.01] * 2, [1, 1], [1e-3, 1e-3], [100, 100], omega=0.5)
    frontier = Frontier(2)
    frontier.push(0, "stale", appeared=NOW - 3000, discovered=NOW)  # e^-3 ≈ 0.05 < ω
    policy = policy_with("echo-newpages", p)
    assert policy.choose(NOW, last(NOW, NOW - 150), frontier) == Decision("source", 1)
    # With nothing due, the deferred page and an early recrawl compete on value.
    # Source 1 recrawled 10 s ago: V = (λP/μ) g(μτ) = 10 g(0.01) ≈ 5e-4 < 0.05.
    assert policy.choose(NOW, last(NOW, NOW - 10), frontier) == Decision("page", 0)
    # A richer source recrawled 99 s ago (not yet due): V = 100 g(0.099) ≈ 0.45 > 0.05.
    richer = plan([0.1, 0.1], [1, 1], [1e-3, 1e-3], [100, 100], omega=0.5)
    policy.plan = richer
    assert policy.choose(NOW, last(NOW, NOW - 99), frontier) == Decision("source", 1)


def test_newpages_never_freezes_when_the_plan_values_nothing() -> None:
    # No source kept: rather than idle forever (nothing would ever change the estimates),
    # recrawl the source crawled longest ago; idle only while every source was just crawled
    # or is backing off.
    p = plan([0.0, 0.0], [0.0, 0.0], [1e-3] * 2, [np.inf] * 2, omega=0.0, kept=[False, False])
    policy = policy_with("echo-newpages", p)
    assert policy.choose(NOW, last(NOW - 10, NOW - 30), Frontier(2)) == Decision("source", 1)
    assert policy.choose(NOW, last(NOW, NOW + 60), Frontier(2)) is None


# -- echo-schedule and frequency ------------------------------------------------------
def test_schedule_crawls_due_sources_strictly_then_newest_discovered_pages() -> None:
    p = plan([0.01] * 3, [1] * 3, [1e-3] * 3, [100, 100, 100], omega=0.5)
    frontier = Frontier(3)
    frontier.push(0, "old", appeared=NOW - 500, discovered=NOW - 400)
    frontier.push(1, "new", appeared=NOW - 500, discovered=NOW - 100)
    policy = policy_with("echo-schedule", p)
    assert policy.choose(NOW, last(NOW - 10, NOW - 10, NOW - 120), frontier) == Decision(
        "source", 2
    )
    assert policy.choose(NOW, last(NOW - 10, NOW - 10, NOW - 20), frontier) == Decision("page", 1)
    frontier.pop(1)
    frontier.pop(0)
    assert policy.choose(NOW, last(NOW - 10, NOW - 10, NOW - 20), frontier) is None


def test_frequency_ignores_clicks() -> None:
    est = Estimates(np.array([0.01, 0.01]), np.array([100.0, 1.0]), np.array([1e-3, 1e-4]))
    echo = make_policy("echo-schedule").replan(est, crawl_rate=0.1)
    freq = make_policy("frequency").replan(est, crawl_rate=0.1)
    assert echo.intervals[0] < echo.intervals[1] / 2  # ECHO favours the valuable source
    assert np.isclose(freq.intervals[0], freq.intervals[1])  # equal λ, equal interval
    assert np.array_equal(freq.estimates.profit, est.profit)  # real estimates kept


# -- echo-greedy ----------------------------------------------------------------------
def test_greedy_takes_pages_first_then_most_profit_waiting() -> None:
    p = plan([0.01, 0.1, 0.02], [10, 2, 1], [1, 1, 1], [np.inf] * 3)
    policy = policy_with("echo-greedy", p)
    frontier = Frontier(3)
    frontier.push(2, "x", appeared=NOW - 5, discovered=NOW)
    assert policy.choose(NOW, last(NOW - 100, NOW - 100, NOW - 100), frontier) == Decision(
        "page", 2
    )
    frontier.pop(2)
    # P λ τ = 0.1·100 = 10, 0.2·100 = 20, 0.02·1000 = 20.0..: source 2 has waited longest.
    assert policy.choose(NOW, last(NOW - 100, NOW - 100, NOW - 1001), frontier) == Decision(
        "source", 2
    )
    assert policy.choose(NOW, last(NOW - 100, NOW - 100, NOW - 999), frontier) == Decision(
        "source", 1
    )


# -- bfs ------------------------------------------------------------------------------
def test_bfs_cycles_through_every_source_in_a_fixed_random_order() -> None:
    policy = make_policy("bfs", seed=7)
    times = np.zeros(6)
    frontier = Frontier(6)
    first = [policy.choose(NOW, times, frontier).source for _ in range(6)]
    second = [policy.choose(NOW, times, frontier).source for _ in range(6)]
    assert sorted(first) == list(range(6))
    assert first == second
    assert first != list(range(6))  # random, not index order (fixed by the seed)
    frontier.push(4, "p", appeared=NOW, discovered=NOW)
    assert policy.choose(NOW, times, frontier) == Decision("page", 4)


# -- fixed-quota ----------------------------------------------------------------------
def test_fixed_quota_gives_half_the_crawls_to_sources() -> None:
    p = plan([0.01] * 4, [1] * 4, [1e-3] * 4, [1e6] * 4, omega=0.5)
    policy = policy_with("fixed-quota", p)
    frontier = Frontier(4)
    times = last(NOW - 1, NOW - 2, NOW - 3, NOW - 4)
    kinds = []
    for i in range(100):
        frontier.push(i % 4, f"p{i}", appeared=NOW, discovered=NOW)
        decision = policy.choose(NOW, times, frontier)
        kinds.append(decision.kind)
        if decision.kind == "page":
            frontier.pop(decision.source)
    assert kinds.count("source") == 50


def test_fixed_quota_schedules_sources_the_full_budget_solve_drops() -> None:
    """The paper's Fixed-quota: intervals solved for the sources' half of the budget alone.
    A full-budget solve here keeps no source (each one's new pages alone exceed N); with the
    pages paid from the other half, every source gets an interval."""
    est = Estimates(np.array([2.0, 3.0]), np.array([1.0, 2.0]), np.array([1e-3, 1e-3]))
    policy = make_policy("fixed-quota")
    plan = policy.replan(est, crawl_rate=1.0)
    assert np.isfinite(plan.intervals).all()
    assert np.sum(1 / plan.intervals) == pytest.approx(0.5, rel=1e-6)
    assert plan.estimates is est


# -- echo-greedy ----------------------------------------------------------------------
def test_greedy_ranks_sources_by_plain_average_clicks() -> None:
    """ECHO-greedy's P is the plain average clicks per page, not the fitted P."""
    est = Estimates(
        np.array([0.01, 0.01]),
        np.array([50.0, 1.0]),  # the fit says source 0
        np.array([1e-3, 1e-3]),
        mean_clicks=np.array([1.0, 5.0]),  # the plain averages say source 1
    )
    policy = make_policy("echo-greedy")
    policy.replan(est, crawl_rate=1.0)
    assert policy.choose(NOW, last(NOW - 100, NOW - 100), Frontier(2)) == Decision("source", 1)


def test_learner_gives_plain_average_clicks() -> None:
    from scrapy_echo.model.estimation.learning import SourceLearner

    learner = SourceLearner(2, bin_width=60.0, bins=4, grace=0.0)
    learner.add_page("a", source=0, appeared=0.0, crawled=0.0)
    learner.add_page("b", source=0, appeared=0.0, crawled=0.0)
    learner.add_clicks(["a", "a", "b"], [10.0, 70.0, 130.0], [4, 2, 6])
    est = learner.estimates(now=1000.0)
    assert est.mean_clicks is not None
    assert est.mean_clicks[0] == pytest.approx(6.0)  # (4 + 2 + 6) / 2 pages
    assert est.mean_clicks[1] == est.profit[1]  # no pages yet: the cold start


# -- echo-paper -----------------------------------------------------------------------
def test_echo_paper_decides_as_echo_newpages_first_built() -> None:
    """The reference policy: the same decisions as this build's ECHO-newpages."""
    p = plan([0.01] * 3, [1, 5, 2], [1e-3] * 3, [100, 1000, 200], omega=0.5)
    frontier = Frontier(3)
    frontier.push(1, "page", appeared=NOW - 60, discovered=NOW - 10)
    times = last(NOW - 50, NOW - 400, NOW - 300)
    decisions = {
        name: policy_with(name, p).choose(NOW, times, frontier)
        for name in ("echo-paper", "echo-newpages")
    }
    assert decisions["echo-paper"] == decisions["echo-newpages"] == Decision("page", 1)


# -- the interface --------------------------------------------------------------------
def test_every_named_policy_exists_and_unknown_names_fail() -> None:
    assert set(POLICIES) == {
        "echo-newpages",
        "echo-cycles",
        "echo-explore",
        "echo-censored",
        "echo-earned",
        "echo-signal-profit",
        "echo-host-priced",
        "echo-paper",
        "echo-schedule",
        "echo-greedy",
        "bfs",
        "fixed-quota",
        "frequency",
        "greedy",
        "greedy-cis",
        "lds",
        "rr",
        "od-win",
        "adaptive",
    }
    with pytest.raises(ValueError, match="unknown policy 'echo'"):
        make_policy("echo")


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_sources_added_after_the_plan_get_a_first_crawl(name: str) -> None:
    policy = make_policy(name)
    est = Estimates(np.array([0.01]), np.array([1.0]), np.array([1e-3]))
    policy.replan(est, crawl_rate=1.0)
    decisions = {policy.choose(NOW, last(NOW, np.nan), Frontier(2)) for _ in range(2)}
    assert Decision("source", 1) in decisions


# -- the production anchor -------------------------------------------------------------
def test_adaptive_intervals_shrink_on_news_and_grow_on_none_within_bounds() -> None:
    from scrapy_echo.model.decisions.adaptive_policy import AdaptiveInterval

    policy = AdaptiveInterval()
    policy.source_crawled(1, 3, True)  # a first crawl: the starting 12 h stand
    assert policy.intervals.tolist() == [43200.0, 43200.0]
    policy.source_crawled(1, 2, False)  # news: 0.8 I + 0.2 * 90 min
    assert policy.intervals[1] == 0.8 * 43200 + 0.2 * 5400
    for _ in range(40):  # nothing, again and again: up to 90 days, no further
        policy.source_crawled(0, 0, False)
    assert policy.intervals[0] == 90 * 86400
    frontier = Frontier(2)
    times = last(NOW - 40000, NOW - 36000)
    assert policy.choose(NOW, times, frontier) == Decision("source", 1)  # overdue by 900 s
    assert policy.choose(NOW - 1000, times, frontier) is None  # none due: the slot idles
    frontier.push(0, "page", appeared=NOW - 5, discovered=NOW - 1)
    assert policy.choose(NOW, times, frontier) == Decision("page", 0)  # new pages first
    back = AdaptiveInterval()
    back.load_data(policy.to_data())
    assert back.intervals.tolist() == policy.intervals.tolist()


def test_the_core_tells_a_policy_each_crawls_outcome() -> None:
    from scrapy_echo.core import CrawlCore
    from scrapy_echo.core.events import SourceFetched, SourceNotModified
    from scrapy_echo.sim.engine import SimSettings

    core = CrawlCore(SimSettings(crawl_rate=1.0, backlog="crawl"), make_policy("adaptive"))
    hub = "http://a.test/"
    core.apply(SourceFetched(hub, 100.0, ((hub + "1", None),)))  # first: nothing learned
    core.apply(SourceFetched(hub, 200.0, ((hub + "1", None), (hub + "2", None))))
    core.apply(SourceNotModified(hub, 300.0))
    expected = (0.8 * 43200 + 0.2 * 5400) * 1.5
    assert core.policy.intervals.tolist() == [expected]  # type: ignore[attr-defined]
