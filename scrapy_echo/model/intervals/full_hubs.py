"""ECHO for hubs that show only their latest ``K`` links (docs/how-it-works.rst, "Planning
for hubs that fill up").

A crawl of such a hub ``τ`` after the last finds ``M(τ)`` pages worth ``V(τ)`` clicks, and is
due where its index ``W(τ)`` reaches ``ω`` (:mod:`scrapy_echo.model.intervals.hub_terms`).
:func:`solve_with_full_hubs` plans with one ``ω`` for every source: each full hub is due
where ``W(I) = ω`` and costs ``(1 + M(I))/I`` crawls a second; ECHO's solver plans the other
sources on the budget the hubs leave, and the search ends where the hubs and the rest spend
at most the budget. :class:`FullHubs` tabulates ``V, M, W`` per hub.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.hub_terms import full_hub_terms, poisson_below
from scrapy_echo.model.intervals.plan import Estimates
from scrapy_echo.model.intervals.schedule import IntervalSolution

# Hubs listing more links than this are planned as listing everything: a crawl that finds
# that many new links is rare, and the Poisson sums cost a pass per link.
MAX_SHOWN = 1000
# V, M and W are tabulated per full hub from 10 s to about 4 months (7 points per doubling)
# and read by linear interpolation in log τ.
_STEP = 2.0 ** (1.0 / 7.0)
_GRID: FloatArray = 10.0 * _STEP ** np.arange(140, dtype=np.float64)
# Hubs tabulated at a time (see FullHubs.of).
_CHUNK = 256
# The least ω the search tries (log): below it a plan is one of ω = 0.
_LOG_LEAST = -700.0
_TINY = math.exp(_LOG_LEAST)
# Spending this share past the budget is rounding, not spending past it.
_SLACK = 1e-6


def capped(estimates: Estimates) -> NDArray[np.intp]:
    """The sources planned as full hubs: a known number of links shown, and links coming
    (finite ``λ > 0``, ``P > 0`` and ``μ ≥ 0``; any other source is left to ECHO's solver)."""
    shows = estimates.shows
    if shows is None:
        return np.zeros(0, dtype=np.intp)
    lam, prof, mu = estimates.link_rate, estimates.profit, estimates.decay
    with np.errstate(invalid="ignore"):
        sound = (lam > 0) & (prof > 0) & (mu >= 0) & np.isfinite(lam + prof + mu)
    return np.flatnonzero((shows >= 1) & (shows <= MAX_SHOWN) & sound)


@dataclass(frozen=True)
class FullHubs:
    """``V``, ``M`` and ``W`` of each full hub on one grid of ``τ``, made once per plan: what
    a multiplier ``ω`` makes of its interval (:meth:`at`), and its index for the early
    recrawls weighed at every free slot (:meth:`values`)."""

    sources: NDArray[np.intp]
    value: FloatArray  # (hubs, grid)
    pages: FloatArray
    index: FloatArray
    # The index's running maximum: ``W`` rises to a peak and falls back towards what a crawl
    # of the ``K`` newest links is worth, and the first ``τ`` it reaches ``ω`` at is the
    # interval (past it the net value per second falls, and whatever it does after, it tends
    # to 0, below its value there when the hub pays).
    reached: FloatArray

    @classmethod
    def empty(cls) -> FullHubs:
        none = np.zeros((0, _GRID.size))
        return cls(np.zeros(0, dtype=np.intp), none, none, none, none)

    @classmethod
    def of(cls, estimates: Estimates) -> FullHubs:
        which = capped(estimates)
        if not which.size:
            return cls.empty()
        assert estimates.shows is not None
        lam, prof, mu = (
            a[which][:, None] for a in (estimates.link_rate, estimates.profit, estimates.decay)
        )
        shows = estimates.shows[which].astype(np.int64)[:, None]
        tables = np.empty((3, which.size, _GRID.size))
        # A few hundred hubs at a time: their arrays stay in the processor's cache (3,000 hubs
        # in one go take 2.5 times as long).
        for start in range(0, which.size, _CHUNK):
            rows = slice(start, start + _CHUNK)
            tables[:, rows] = full_hub_terms(lam[rows], prof[rows], mu[rows], shows[rows], _GRID)
        value, pages, index = tables
        return cls(which, value, pages, index, np.maximum.accumulate(index, axis=1))

    @property
    def top(self) -> float:
        """The largest index on the grid: above it no hub pays (its net value per second
        grows for every ``τ``, towards 0)."""
        return float(self.reached[:, -1].max(initial=0.0))

    def at(
        self, omega: float, bounds: tuple[float, float] = (0.0, math.inf)
    ) -> tuple[FloatArray, NDArray[np.bool_], float]:
        """Each hub's interval where its index reaches ``omega``, within ``bounds`` (the
        shortest and longest interval allowed), whether it pays for its crawl and pages there
        (inf where not), and the crawls per second the kept ones cost.

        Within bounds the best interval is the bound nearest the unbounded one: the net
        value per second rises until the index reaches ``ω`` and falls after, as long as it
        is positive (docs/how-it-works.rst, "Planning for hubs that fill up")."""
        rows = np.arange(self.sources.size)
        before = (self.reached < omega).sum(axis=1)  # grid points before the index reaches ω
        high = np.minimum(before, _GRID.size - 1)
        low = np.maximum(high - 1, 0)
        w_low, w_high = self.reached[rows, low], self.reached[rows, high]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(w_high > w_low, (omega - w_low) / (w_high - w_low), 1.0)
        share = np.clip(share, 0.0, 1.0)
        # Where on the grid (in steps from its start) it reaches ω; inf: not on the grid,
        # where the net value per second grows all along it.
        position = np.where(before < _GRID.size, low + share * (high - low), np.inf)
        position = np.clip(position, _position(bounds[0]), _position(bounds[1]))
        with np.errstate(over="ignore"):  # (and the bounds to the last bit)
            interval = np.clip(_GRID[0] * _STEP**position, *bounds)
        value, pages = _read(self.value, position), _read(self.pages, position)
        kept = np.isfinite(interval) & (value > omega * (1.0 + pages))
        interval = np.where(kept, interval, np.inf)
        cost = float(np.sum((1.0 + pages[kept]) / interval[kept]))
        return interval, kept, cost

    def values(self, elapsed: FloatArray) -> FloatArray:
        """``W`` of each hub ``elapsed`` seconds (≥ 0, one per hub) after its last crawl: past
        its peak it falls (a full hub loses its oldest links whenever it is crawled). Below
        the grid (and for a NaN ``elapsed``: never crawled) it is 0: a crawl just made finds
        nothing."""
        elapsed = np.asarray(elapsed, dtype=np.float64)
        inside = elapsed >= _GRID[0]
        return np.where(inside, _read(self.index, _position(np.where(inside, elapsed, 0.0))), 0.0)


def _position(elapsed: FloatArray | float) -> FloatArray:
    """Where ``elapsed`` falls on the grid, in steps from its start (-inf at 0)."""
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(np.divide(elapsed, _GRID[0])) / math.log(_STEP), np.float64)


def _read(table: FloatArray, position: FloatArray) -> FloatArray:
    """Each row of ``table`` at its ``position`` on the grid, linear in between, its first
    or last value outside the grid."""
    position = np.clip(np.nan_to_num(position, nan=0.0), 0.0, _GRID.size - 1.0)
    low = np.minimum(position.astype(np.intp), _GRID.size - 2)
    share = position - low
    rows = np.arange(table.shape[0])
    read: FloatArray = table[rows, low] * (1.0 - share) + table[rows, low + 1] * share
    return read


@dataclass(frozen=True)
class _Point:
    """One ``ω`` tried: how far (in log) the ``ω`` the rest buys with what the hubs leave
    lies above it, and both plans there."""

    log_omega: float
    gap: float
    hubs: tuple[FloatArray, NDArray[np.bool_], float]
    rest: IntervalSolution | None
    spent: float  # crawls a second, the hubs' and the rest's


def solve_with_full_hubs(
    estimates: Estimates,
    crawl_rate: float,
    solve: Callable[[Estimates, float], IntervalSolution],
    *,
    bounds: tuple[float, float] = (0.0, math.inf),
    rtol: float = 1e-3,
    max_solves: int = 40,
) -> tuple[IntervalSolution, FullHubs]:
    """The schedule of ECHO with the full hubs planned as such: one ``ω`` for all, each full
    hub due where its index reaches it (within ``bounds``, the shortest and longest interval
    allowed), the other sources by ``solve`` (ECHO's solver, with whatever limits it
    honours) on the budget the hubs leave. ``ω`` is where the two agree: the lower ``ω``,
    the more the hubs spend, and the higher the ``ω`` the rest then buys.

    The search ends at an ``ω`` where the hubs and the rest, solved for what they leave,
    spend at most the budget (the higher end of its bracket, where the rest buys at most that
    ``ω``), after at most ``max_solves`` solves; where the hubs never pay it is the rest's
    own ``ω`` (and the budget may not hold: the recrawls of a maximum interval come first),
    and where the budget is more than all can spend it is ``e^-700``. A hub
    not kept keeps what ``solve`` gave it as a source without new links (no crawl, or the
    longest interval allowed, whose crawls it counts). ``objective`` and ``cost`` are NaN
    (nothing reads them)."""
    hubs = FullHubs.of(estimates)
    if not hubs.sources.size:
        return solve(estimates, crawl_rate), hubs
    rest_rate = estimates.link_rate.copy()
    rest_rate[hubs.sources] = 0.0  # (to the solver a hub is never worth a crawl: it is ours)
    rest = replace(estimates, link_rate=rest_rate, shows=None)
    others = bool(np.any((rest_rate > 0) & (estimates.profit > 0)))
    tries = 0

    def point(log_omega: float) -> _Point:
        nonlocal tries
        tries += 1
        plan = hubs.at(math.exp(log_omega), bounds)
        if not others:  # then ω is where the hubs spend the budget
            return _Point(log_omega, _log(plan[2]) - _log(crawl_rate), plan, None, plan[2])
        solution = solve(rest, max(crawl_rate - plan[2], 0.0))
        # The rest may spend more than it is left: the recrawls of a maximum interval come
        # first (ECHO_MAX_INTERVAL), and those of the sources it keeps no longer pay.
        spent = plan[2] + (solution.cost if solution.cost > 0 else 0.0)
        gap = _log(solution.omega) - log_omega
        if spent > crawl_rate * (1 + _SLACK):  # ω is too low, whatever the rest would buy
            gap = max(gap, _log(spent) - _log(crawl_rate))
        return _Point(log_omega, gap, plan, solution, spent)

    # Above the largest index no hub pays: if the rest alone buys an ω there, that is the plan.
    log_top = _log(hubs.top) + 1e-9
    high = point(log_top)
    if high.gap >= 0:
        omega = max(math.exp(log_top), high.rest.omega if high.rest is not None else 0.0)
        return _solution(estimates, hubs, omega, hubs.at(omega, bounds), high.rest, tries), hubs
    # Below: from the ω the rest buys with what the hubs leave up there (spending at least that
    # much lower, they leave it less, so it buys as much or more), a factor e and more at a time.
    bought = high.rest.omega if high.rest is not None else 0.0
    if not bought > _TINY:
        # The rest spends all it can (ω = 0), or there is none: if so too with the hubs
        # spending all they can, the budget is more than all need.
        low = point(_LOG_LEAST)
        if low.gap <= 0:
            return _solution(estimates, hubs, _TINY, low.hubs, low.rest, tries), hubs
    start = _log(bought) if bought > _TINY else high.log_omega - 1.0
    low = point(max(min(start, high.log_omega - rtol), _LOG_LEAST))
    step = 1.0
    while low.gap < 0 and low.log_omega > _LOG_LEAST and tries < max_solves:
        high, low = low, point(max(low.log_omega - step, _LOG_LEAST))
        step *= 2.0
    if low.gap < 0:  # even at the least ω the hubs and the rest do not spend the budget
        end, converged = low, low.log_omega <= _LOG_LEAST
    else:
        low, high = _regula_falsi(point, low, high, crawl_rate, rtol, max_solves - tries)
        end, converged = high, high.log_omega - low.log_omega <= rtol
    omega = math.exp(end.log_omega)
    return _solution(estimates, hubs, omega, end.hubs, end.rest, tries, converged), hubs


def _regula_falsi(
    point: Callable[[float], _Point],
    low: _Point,
    high: _Point,
    budget: float,
    rtol: float,
    solves: int,
) -> tuple[_Point, _Point]:
    """Narrow ``low`` (gap ≥ 0) and ``high`` (gap < 0) to ``rtol`` apart in log ω, or to one
    point whose gap is below it and that spends at most ``budget``, in at most ``solves``
    points: regula falsi with the Illinois halving (neither end sticks), and a bisection
    after any step that did not halve the bracket (where a source stops paying the gap
    jumps, and a secant crawls towards the jump)."""
    f_low, f_high, side = low.gap, high.gap, 0
    width = math.inf
    for _ in range(solves):
        previous, width = width, high.log_omega - low.log_omega
        if width <= rtol:
            break
        if width > 0.5 * previous:
            middle = 0.5 * (low.log_omega + high.log_omega)
        else:
            middle = (low.log_omega * f_high - high.log_omega * f_low) / (f_high - f_low)
        mid = point(middle)
        if abs(mid.gap) < rtol and mid.spent <= budget * (1 + _SLACK):
            return mid, mid
        if mid.gap > 0:
            low, f_low = mid, mid.gap
            f_high *= 0.5 if side == 1 else 1.0
            side = 1
        else:
            high, f_high = mid, mid.gap
            f_low *= 0.5 if side == -1 else 1.0
            side = -1
    return low, high


def _solution(
    estimates: Estimates,
    hubs: FullHubs,
    omega: float,
    plan: tuple[FloatArray, NDArray[np.bool_], float],
    rest: IntervalSolution | None,
    tries: int,
    converged: bool = True,
) -> IntervalSolution:
    """The hubs' plan and the rest's as one schedule."""
    interval, kept, _ = plan
    n = len(estimates)
    intervals = np.full(n, np.inf) if rest is None else rest.intervals.copy()
    all_kept = np.zeros(n, bool) if rest is None else rest.kept.copy()
    # A hub not kept keeps what the solver gave it as a source without new links: no crawl,
    # or the longest interval allowed (and the solver counted those crawls).
    intervals[hubs.sources] = np.where(kept, interval, intervals[hubs.sources])
    all_kept[hubs.sources] = kept
    return IntervalSolution(
        intervals=intervals,
        omega=omega,
        kept=all_kept,
        objective=float("nan"),
        cost=float("nan"),
        converged=converged,
        iterations=tries,
        method="full-hubs",
        # (Hosts' own values are the rest's: full hubs are planned only on unlimited hosts.)
        source_omega=None
        if rest is None or rest.source_omega is None
        else np.maximum(omega, rest.source_omega),
    )


def _log(x: float) -> float:
    """``log x`` for an ``ω``: 0 (and NaN) at the least tried, inf at the largest float."""
    return math.log(min(x, sys.float_info.max)) if x > _TINY else _LOG_LEAST


__all__ = [
    "MAX_SHOWN",
    "FullHubs",
    "capped",
    "full_hub_terms",
    "poisson_below",
    "solve_with_full_hubs",
]
