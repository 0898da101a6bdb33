"""The model's ceiling when every source's rate follows the trace's week (sim ceiling --week)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from scrapy_echo.model.intervals.plan import Estimates
from scrapy_echo.sim.ceiling import bfs_fraction, ceiling, optimal_fraction
from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.week_ceiling import (
    HOURS,
    Week,
    _seconds_per_hour,
    by_hour,
    trace_week,
    week_fractions,
)

HOUR = 3600.0
DAY = 24 * HOUR


def unequal_sources(n: int = 300) -> Estimates:
    rng = np.random.default_rng(3)
    return Estimates(
        rng.lognormal(0, 1.3, n) * 5e-5, rng.lognormal(1, 1.5, n), np.full(n, np.log(2) / 43200)
    )


def two_level_week(busy: float, quiet: float) -> Week:
    """Half the week at ``busy``, half at ``quiet`` times the mean."""
    level = np.where(np.arange(HOURS) < HOURS // 2, busy, quiet)
    return Week(level, np.full(HOURS, HOUR))


def test_a_flat_week_is_the_stationary_model() -> None:
    est = unequal_sources()
    for rate in (0.005, 0.02, 0.1):
        flat = Week.flat()
        assert by_hour(optimal_fraction, est, rate, flat) == pytest.approx(
            optimal_fraction(est, rate), rel=1e-12
        )
        assert by_hour(bfs_fraction, est, rate, flat) == pytest.approx(
            bfs_fraction(est, rate), rel=1e-12
        )


def test_each_hour_is_solved_for_its_own_rates_and_weighed_by_its_pages() -> None:
    est = unequal_sources()
    week = two_level_week(1.6, 0.4)
    rate = 0.02
    busy = optimal_fraction(Estimates(est.link_rate * 1.6, est.profit, est.decay), rate)
    quiet = optimal_fraction(Estimates(est.link_rate * 0.4, est.profit, est.decay), rate)
    # Each half's bound is its rate times Σ λP: the busy half holds 80% of the pages.
    assert by_hour(optimal_fraction, est, rate, week) == pytest.approx(0.8 * busy + 0.2 * quiet)
    assert quiet > busy  # fewer pages, the same budget


@pytest.mark.slow  # (over 6 s: the README's quick command leaves it out)
def test_a_shared_cycle_costs_the_optimal_schedule_budget() -> None:
    # New pages take their share of the budget first, most of it when they come fastest: the
    # schedule best for every hour needs more crawls for the same fraction, not fewer.
    est = unequal_sources()
    flat = ceiling(est, rates=[0.01], target=0.95)
    cycled = ceiling(
        est, rates=[0.01], target=0.95, fractions=week_fractions(est, two_level_week(1.6, 0.4))
    )
    assert cycled.optimal[0] < flat.optimal[0]
    assert cycled.optimal_needed > flat.optimal_needed * 1.02


def test_the_trace_week_follows_the_generators_cycle() -> None:
    params = SynthParams(sources=200, days=14, day_amplitude=0.6, weekend_factor=0.5)
    trace = synthesize(params)
    week = trace_week(trace)
    assert week.seconds.sum() == pytest.approx(trace.duration)
    # The mean over the trace's time is 1, so the week-average λ is the trace's.
    assert np.average(week.level, weights=week.seconds) == pytest.approx(1.0)
    hour_of_day = np.arange(HOURS) % 24
    weekday = np.arange(HOURS) < 5 * 24  # day 0 of the synthetic trace is a Monday
    afternoon = week.level[weekday & (hour_of_day >= 13) & (hour_of_day < 18)].mean()
    weekday_night = week.level[weekday & (hour_of_day < 5)].mean()
    weekend = week.level[~weekday].mean()
    # The generator: 1 + 0.6 sin(...) peaking at 15:00, weekends at half; over the week's
    # mean (0.857) that is about 1.8 in the afternoon, 0.5 at night and 0.58 on weekends.
    assert afternoon > 1.5
    assert weekday_night < 0.75
    assert 0.4 < weekend < 0.75


def test_seconds_per_hour_cover_the_trace() -> None:
    seconds = _seconds_per_hour(1.5 * 7 * DAY + 0.5 * HOUR)
    assert seconds.sum() == pytest.approx(1.5 * 7 * DAY + 0.5 * HOUR)
    assert seconds[0] == 2 * HOUR and seconds[HOURS - 1] == HOUR
    assert seconds[84] == 1.5 * HOUR and seconds[85] == HOUR
    assert np.array_equal(_seconds_per_hour(2 * HOUR)[:3], [HOUR, HOUR, 0.0])


def test_a_trace_with_no_new_page_has_a_flat_week() -> None:
    trace = synthesize(SynthParams(sources=20, days=1))
    empty = replace(trace, link_appeared=np.zeros_like(trace.link_appeared))
    assert np.array_equal(trace_week(empty).level, np.ones(HOURS))


@pytest.mark.parametrize(
    ("level", "seconds", "message"),
    [
        (np.ones(24), np.ones(24), "a week has 168 hours"),
        (np.full(HOURS, np.nan), np.ones(HOURS), "level must be finite"),
        (-np.ones(HOURS), np.ones(HOURS), "level must be finite and >= 0"),
        (np.ones(HOURS), np.full(HOURS, np.inf), "seconds must be finite"),
        (np.ones(HOURS), np.zeros(HOURS), "must cover some time"),
    ],
)
def test_a_malformed_week_is_refused(level: np.ndarray, seconds: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Week(level, seconds)


@pytest.mark.slow
def test_cli_ceiling_week(tmp_path: Path) -> None:
    trace_dir, out = tmp_path / "trace", tmp_path / "out"
    python = [sys.executable, "-m", "scrapy_echo.sim"]
    synth = ["synth", "--out", str(trace_dir), "--sources", "60", "--days", "8"]
    subprocess.run([*python, *synth], check=True, capture_output=True, text=True)
    ceiling_cmd = ["ceiling", "--trace", str(trace_dir), "--rates", "0.01", "--week"]
    done = subprocess.run(
        [*python, *ceiling_cmd, "--out", str(out)], check=True, capture_output=True, text=True
    )
    assert "the trace's week: new pages by hour of the week" in done.stdout
    assert "every rate following the trace's week" in done.stdout
    saved = json.loads((out / "ceiling.json").read_text())
    week = saved["week"]
    assert week["needed_rate"]["optimal_schedule"] > saved["needed_rate"]["optimal_schedule"]
    assert [r["rate"] for r in week["rates"]] == [0.01]
