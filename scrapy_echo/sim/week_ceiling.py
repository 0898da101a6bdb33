"""What the model allows when sources publish in a weekly cycle and the budget is per second.

:mod:`scrapy_echo.sim.ceiling` takes each source's rate as constant. On a trace whose pages
come faster by day and on weekdays, this measures the trace's week: the rate of new pages by
hour of the week (relative to the trace's mean) scales every source's ``λ``, and in each hour
the schedule best for that hour's rates (the optimal schedule solved for ``λ_i m_h`` at the
whole budget) catches what the model says. The fraction is over the whole trace, each hour
weighed by the time the trace spent in it.

So a schedule that knew the cycle and re-planned every hour would catch this; with one cycle
shared by every source it is less than the stationary figure, not more: new pages take their
share of the budget first, most of it when they come fastest, and what a cycle changes is only
how much is left for recrawls (docs/how-it-works.rst, "What a cycle allows").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.plan import Estimates
from scrapy_echo.sim.ceiling import bfs_fraction, first_sources, optimal_fraction
from scrapy_echo.sim.trace import Trace

HOUR = 3600.0
HOURS = 168  # of the week; hour 0 is the trace's first hour, whatever day that is


@dataclass(frozen=True)
class Week:
    """New pages by hour of the week, relative to the trace's mean rate."""

    level: FloatArray  # (HOURS,): rate in that hour over the mean (1 for an hour never seen)
    seconds: FloatArray  # (HOURS,): how long the trace spent in that hour

    def __post_init__(self) -> None:
        if self.level.shape != (HOURS,) or self.seconds.shape != (HOURS,):
            raise ValueError(f"a week has {HOURS} hours, got {self.level.shape}")
        if not (np.all(np.isfinite(self.level)) and np.all(self.level >= 0)):
            raise ValueError("Week.level must be finite and >= 0")
        if not (np.all(np.isfinite(self.seconds)) and np.all(self.seconds >= 0)):
            raise ValueError("Week.seconds must be finite and >= 0")
        if not self.seconds.sum() > 0:
            raise ValueError("Week.seconds must cover some time")

    @classmethod
    def flat(cls) -> Week:
        return cls(np.ones(HOURS), np.full(HOURS, HOUR))


def trace_week(trace: Trace) -> Week:
    """The trace's week, from when each page was first linked (as the hindsight rates count
    them: pages already there at the start, or never linked, are not new pages)."""
    _, appeared = first_sources(trace)
    new = np.isfinite(appeared) & (appeared > 0) & (appeared < trace.duration)
    hour = (appeared[new] // HOUR).astype(np.intp) % HOURS
    pages = np.bincount(hour, minlength=HOURS).astype(np.float64)
    seconds = _seconds_per_hour(trace.duration)
    if not pages.sum() > 0:
        return Week(np.ones(HOURS), seconds)
    mean_rate = pages.sum() / seconds.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        level = np.where(seconds > 0, pages / seconds / mean_rate, 1.0)
    return Week(level, seconds)


def _seconds_per_hour(duration: float) -> FloatArray:
    """How long a trace of ``duration`` seconds spends in each hour of its week."""
    whole, rest = divmod(duration, HOURS * HOUR)
    seconds = np.full(HOURS, whole * HOUR)
    full_hours, part = divmod(rest, HOUR)
    seconds[: int(full_hours)] += HOUR
    if int(full_hours) < HOURS:
        seconds[int(full_hours)] += part
    return seconds


def by_hour(
    fraction: Callable[[Estimates, float], float], est: Estimates, rate: float, week: Week
) -> float:
    """Share of the trace's ``Σ λ m P`` caught when every hour gets ``fraction``'s schedule
    for that hour's rates at ``rate`` crawls/s (hours of equal level solved once)."""
    weight = week.seconds * week.level
    if not weight.sum() > 0:
        return 1.0
    levels, at = np.unique(week.level, return_inverse=True)
    caught = np.array([fraction(replace(est, link_rate=est.link_rate * m), rate) for m in levels])
    return float(np.sum(weight * caught[at]) / weight.sum())


def week_fractions(
    est: Estimates, week: Week
) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """The optimal schedule's and BFS's fractions at a rate, hour by hour over ``week``."""
    return (
        lambda rate: by_hour(optimal_fraction, est, rate, week),
        lambda rate: by_hour(bfs_fraction, est, rate, week),
    )


__all__ = ["HOURS", "Week", "by_hour", "trace_week", "week_fractions"]
