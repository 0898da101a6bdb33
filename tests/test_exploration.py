"""Seed 004's exploration: UCB1 over exploitation ratios, and echo-explore spending the
explored share of source crawls on the source crawled longest ago."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_echo.model.decisions.exploration import SEED_RATIOS, ExplorationShare, Ucb1
from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.intervals.plan import Estimates


def test_ucb1_plays_every_arm_once_then_mostly_the_best() -> None:
    bandit = Ucb1(3)
    first = []
    for _ in range(3):
        arm = bandit.choose()
        first.append(arm)
        bandit.update(arm, 0.5)
    assert sorted(first) == [0, 1, 2]
    rng = np.random.default_rng(0)
    pays = (0.2, 0.8, 0.4)
    for _ in range(2000):
        arm = bandit.choose()
        bandit.update(arm, float(rng.random() < pays[arm]))
    assert bandit.plays[1] > 0.7 * sum(bandit.plays)
    assert bandit.means()[1] == pytest.approx(0.8, abs=0.05)


def test_ucb1_refuses_rewards_outside_zero_one_and_empty_bandits() -> None:
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        Ucb1(2).update(0, 1.5)
    with pytest.raises(ValueError, match="at least one arm"):
        Ucb1(0)
    with pytest.raises(ValueError, match="shares in"):
        ExplorationShare((0.5, 1.2))


@pytest.mark.parametrize("ratio", [0.6, 0.9, 1.0])
def test_a_cycle_explores_one_minus_its_ratio_of_source_crawls(ratio: float) -> None:
    share = ExplorationShare((ratio,))
    explored = 0
    for _ in range(100):
        explore = share.explore_next()
        explored += explore
        share.crawled(explored=explore)
    assert explored == round((1 - ratio) * 100)


def test_a_cycle_is_rewarded_by_value_per_crawl_against_the_best_cycle() -> None:
    share = ExplorationShare((0.6, 1.0))
    assert share.ratio == 0.6  # each arm once, in order
    for _ in range(4):
        share.crawled(explored=False)
    share.found(8.0)  # 2 per crawl: the best so far, reward 1
    share.next_cycle()
    assert share.ratio == 1.0 and share.bandit.totals == [1.0, 0.0]
    for _ in range(4):
        share.crawled(explored=False)
    share.found(4.0)  # 1 per crawl: half the best
    share.found(float("nan"))  # (ignored, as is a negative value)
    share.next_cycle()
    assert share.bandit.totals == [1.0, 0.5] and share.cycles == 2
    share.next_cycle()  # a cycle without source crawls teaches nothing
    assert share.cycles == 2 and share.bandit.plays == [1, 1]
    assert SEED_RATIOS == (0.6, 0.7, 0.8, 0.9, 1.0)


def test_echo_explore_sends_the_explored_crawls_to_the_source_crawled_longest_ago() -> None:
    policy = make_policy("echo-explore")
    assert policy.exploration is not None
    policy.exploration = ExplorationShare((0.5,))
    est = Estimates(np.array([1e-3, 1e-3, 1e-9]), np.ones(3), np.full(3, 1e-4))
    policy.replan(est, crawl_rate=1.0)
    now = 100_000.0
    # Source 2 (worth nothing: never scheduled) was crawled longest ago; 0 and 1 are overdue.
    last = np.array([now - 5000.0, now - 4000.0, now - 90_000.0])
    picks = []
    for _ in range(4):
        decision = policy.choose(now, last, Frontier(3))
        assert decision is not None and decision.kind == "source"
        picks.append(decision.source)
        last[decision.source] = now
        now += 1.0
    assert picks.count(2) == 1 and set(picks[:2]) == {0, 2}  # every other crawl explores
    assert not hasattr(make_policy("echo-newpages"), "exploration")  # not the default


def test_echo_explore_credits_the_value_its_crawls_find() -> None:
    policy = make_policy("echo-explore")
    est = Estimates(np.array([1e-3, 1e-3]), np.array([2.0, 4.0]), np.array([0.0, 0.0]))
    policy.replan(est, crawl_rate=1.0)
    assert policy.exploration is not None
    policy.links_found(1, [10.0, 20.0], now=30.0)  # two pages worth P = 4 each (no decay)
    policy.links_found(7, [10.0], now=30.0)  # a source not in the plan yet: skipped
    assert policy.exploration.value == pytest.approx(8.0)
