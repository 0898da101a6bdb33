"""The week's publishing cycle: the profile's arithmetic, what it learns from crawl intervals,
and what echo-cycles does with it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.estimation.cycles import BINS, HOUR, WEEK, WeekProfile, rate_factor
from scrapy_echo.model.intervals.plan import Estimates


def true_cycle() -> np.ndarray:
    """Busy afternoons, quiet nights and weekends (as the synthetic trace), mean 1."""
    hour = np.arange(BINS) % 24
    day = np.arange(BINS) // 24
    level = (1 + 0.6 * np.sin(2 * math.pi * (hour - 9) / 24)) * np.where(day >= 5, 0.6, 1.0)
    return level / level.mean()


def profile_with(level: np.ndarray) -> WeekProfile:
    profile = WeekProfile()
    profile.level = level.copy()
    return profile


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 10 * WEEK), st.floats(0, 3 * WEEK), st.floats(0, 3 * WEEK))
def test_the_cumulative_intensity_adds_up(start: float, first: float, second: float) -> None:
    profile = profile_with(true_cycle())
    a, b, c = start, start + first, start + first + second
    cum = profile.cumulative(np.array([a, b, c]))
    assert cum[2] - cum[0] == pytest.approx((cum[1] - cum[0]) + (cum[2] - cum[1]), abs=1e-6)
    assert np.all(np.diff(cum) >= -1e-9)  # m > 0: it only grows
    week = profile.cumulative(np.array([a + WEEK]))[0] - cum[0]
    assert week == pytest.approx(WEEK, rel=1e-9)  # m averages 1 over any week


def test_a_flat_week_stays_flat_and_changes_no_rate() -> None:
    rng = np.random.default_rng(0)
    profile = WeekProfile()
    profile.enabled = True
    for day in range(14):
        for source in range(50):
            start = day * 86400.0 + rng.uniform(0, 80000)
            end = start + rng.uniform(600, 7200)
            profile.observe(source, start, end, int(rng.poisson((end - start) * 1e-3)))
        profile.fit((day + 1) * 86400.0, np.full(50, 1e-3))
    assert np.abs(profile.level - 1).max() < 0.25
    assert rate_factor(profile, np.array([np.nan]), np.array([np.nan])).tolist() == [1.0]


def test_the_profile_learns_a_daily_and_weekly_cycle_from_crawl_intervals() -> None:
    truth = true_cycle()
    helper = profile_with(truth)
    rng = np.random.default_rng(1)
    profile = WeekProfile()
    profile.enabled = True
    rates = rng.lognormal(-7, 1, 200)
    for day in range(21):
        for source, rate in enumerate(rates):
            t = day * 86400.0 + rng.uniform(0, 3600)
            while t < (day + 1) * 86400.0:
                gap = rng.uniform(0.5, 8) * HOUR  # crawls from half an hour to 8 h apart
                expected = rate * float(np.diff(helper.cumulative(np.array([t, t + gap])))[0])
                profile.observe(source, t, t + gap, int(rng.poisson(expected)))
                t += gap
        profile.fit((day + 1) * 86400.0, rates)
    assert np.corrcoef(profile.level, truth)[0, 1] > 0.95
    by_hour = profile.level.reshape(7, 24).mean(axis=0)
    true_by_hour = truth.reshape(7, 24).mean(axis=0)
    assert by_hour.max() / by_hour.min() > 0.7 * true_by_hour.max() / true_by_hour.min()
    # A rate measured over a quiet night is raised to its weekly average, a busy one lowered.
    night, afternoon = 3 * HOUR, 15 * HOUR
    factor = rate_factor(profile, np.array([night, afternoon]), np.array([night, afternoon]) + HOUR)
    assert factor[0] > 1.5 and factor[1] < 0.9


def test_echo_cycles_recrawls_sooner_after_a_busy_spell_than_after_a_quiet_one() -> None:
    policy = make_policy("echo-cycles")
    policy.profile = profile_with(true_cycle())
    policy.profile.fitted = True
    lam, prof, mu = np.full(2, 1e-3), np.full(2, 2.0), np.full(2, 1e-5)
    plan = policy.replan(Estimates(lam, prof, mu), 0.01)
    interval = float(plan.intervals[0])
    assert 0 < interval < HOUR
    # Crawled 0.9 of the average rate's interval ago: after a busy afternoon it is due, after
    # a quiet night not.
    ago = 0.9 * interval
    now_afternoon, now_night = 16 * HOUR, 4 * HOUR
    busy = policy._due_source(now_afternoon, np.array([now_afternoon - ago, 1e9]), plan)
    assert busy is not None and busy.source == 0
    quiet = policy._due_source(now_night + WEEK, np.array([now_night + WEEK - ago, 1e9]), plan)
    assert quiet is None
    # Without a profile it is ECHO-newpages: neither is due before its interval.
    plain = make_policy("echo-newpages")
    plain_plan = plain.replan(Estimates(lam, prof, mu), 0.01)
    assert (
        plain._due_source(now_afternoon, np.array([now_afternoon - ago, 1e9]), plain_plan) is None
    )
    assert policy.choose(now_afternoon, np.array([now_afternoon - ago, 1e9]), Frontier(2)) == busy


def test_intervals_are_kept_only_for_a_policy_that_reads_them() -> None:
    profile = WeekProfile()
    profile.observe(0, 0.0, HOUR, 3)
    profile.fit(HOUR, np.ones(1))
    assert not profile.fitted  # (echo-newpages: nothing kept, nothing to fold)
    profile.enabled = True
    profile.observe(0, 0.0, HOUR, 3)
    profile.fit(HOUR, np.ones(1))
    assert profile.fitted
