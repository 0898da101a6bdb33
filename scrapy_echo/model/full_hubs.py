"""ECHO for hubs that show only their latest ``K`` links (docs/how-it-works.rst, "Planning
for hubs that fill up").

ECHO values a crawl of a source after ``τ`` at every link that appeared meanwhile. A hub that
lists only its latest ``K`` links shows at most ``K`` of them: links arrive as a Poisson process
of rate ``λ``, the ``j``-th newest is ``A_j ~ Gamma(j, λ)`` old at the crawl, and is found if
``j ≤ K`` and it appeared after the last crawl (``A_j < τ``). With ``N ~ Poisson(λτ)``,
``C = P(N ≤ K-1)`` and ``S = P(Poisson((λ+μ)τ) ≥ K)``, a crawl after ``τ`` finds

- pages: ``M(τ) = E[min(N, K)] = λτ C + K P(N ≥ K+1)``;
- clicks: ``V(τ) = (λP/μ) (1 - e^{-μτ} C - q^K S)``, ``q = λ/(λ+μ)``;

and the index at which it is due (the stationary point of ``(V - ω(1 + M))/τ``, the value of a
crawl net of its pages' crawls, per second):

``W(τ) = (λP/μ) (g(μτ) + (1 + μτ) e^{-μτ} (1 - C) - q^K S) / (1 + K P(N ≥ K+1))``,

``g(x) = 1 - (1 + x) e^{-x}``. As ``K → ∞`` these are ECHO's own: ``M = λτ``,
``V = (λP/μ)(1 - e^{-μτ})``, ``W = (λP/μ) g(μτ)``.

:func:`solve_with_full_hubs` plans with one ``ω`` for every source: each full hub is due
where ``W(I) = ω`` and costs ``(1 + M(I))/I`` crawls a second; ECHO's solver plans the other
sources on the budget the hubs leave. :class:`FullHubs` tabulates ``V, M, W`` per hub.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.curves import FloatArray
from scrapy_echo.model.plan import Estimates
from scrapy_echo.model.schedule import IntervalSolution

# Hubs listing more links than this are planned as listing everything: a crawl that finds
# that many new links is rare, and the Poisson sums below cost a pass per link.
MAX_SHOWN = 1000
# V, M and W are tabulated per full hub from 10 s to about 4 months (7 points per doubling)
# and read by linear interpolation in log τ.
_STEP = 2.0 ** (1.0 / 7.0)
_GRID = 10.0 * _STEP ** np.arange(140)


def poisson_below(mean: FloatArray, shows: NDArray[np.int64]) -> tuple[FloatArray, FloatArray]:
    """``P(N ≤ K-1)`` and ``P(N = K)`` for ``N ~ Poisson(mean)``, ``K = shows`` (≥ 1; any
    shape ``mean`` broadcasts to), elementwise. The sum costs a term per link shown, only
    where ``K`` is that large.

    >>> below, at = poisson_below(np.array([2.0]), np.array([1]))
    >>> round(float(below[0]), 6), round(float(at[0]), 6)  # e^-2, 2 e^-2
    (0.135335, 0.270671)
    """
    mean = np.asarray(mean, dtype=np.float64)
    shows = np.broadcast_to(np.asarray(shows, dtype=np.int64), mean.shape).ravel()
    flat = mean.ravel()
    order = np.argsort(-shows, kind="stable")  # the largest K first: a shrinking prefix
    m, k_of = flat[order], shows[order]
    log_m = np.log(np.maximum(m, 1e-300))
    below = np.zeros(m.size)
    # (Each term from its logarithm: e^{-m} alone underflows past m = 745.)
    for k in range(int(k_of.max(initial=0))):
        n = int(np.searchsorted(-k_of, -k, side="left"))  # elements with K > k
        below[:n] += np.exp(k * log_m[:n] - m[:n] - math.lgamma(k + 1))
    log_factorial = np.array([math.lgamma(k + 1.0) for k in range(int(k_of.max(initial=0)) + 1)])
    at = np.exp(k_of * log_m - m - log_factorial[k_of])
    out_below, out_at = np.empty(m.size), np.empty(m.size)
    out_below[order], out_at[order] = np.minimum(below, 1.0), at
    return out_below.reshape(mean.shape), out_at.reshape(mean.shape)


def full_hub_terms(
    link_rate: FloatArray,
    profit: FloatArray,
    decay: FloatArray,
    shows: NDArray[np.int64],
    elapsed: FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(V, M, W)`` of crawling each hub ``elapsed`` seconds after its last crawl (see the
    module docstring); ``λ > 0``, ``shows ≥ 1``; ``μ = 0`` is no decay (``V = P M``).

    >>> lam, p, mu = np.array([1 / 600]), np.array([3.0]), np.array([1e-5])
    >>> v, m, w = full_hub_terms(lam, p, mu, np.array([1000]), np.array([6000.0]))
    >>> round(float(m[0]), 6), round(float(v[0]), 4)  # 1000 shown: ECHO's λτ and value
    (10.0, 29.1177)
    """
    lam = np.asarray(link_rate, dtype=np.float64)
    prof = np.asarray(profit, dtype=np.float64)
    mu = np.asarray(decay, dtype=np.float64)
    tau = np.asarray(elapsed, dtype=np.float64)
    shows = np.asarray(shows, dtype=np.int64)
    arrivals = lam * tau
    below, at = poisson_below(arrivals, shows)
    above = np.maximum(1.0 - below - at, 0.0)  # P(N ≥ K+1)
    pages = arrivals * below + shows * above
    cost = 1.0 + shows * above  # 1 + M - τM'
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = mu * tau
        late, _ = poisson_below((lam + mu) * tau, shows)
        tail = np.where(mu > 0, np.exp(shows * np.log(lam / (lam + mu))) * (1.0 - late), 0.0)
        e = np.exp(-x)
        scale = np.where(mu > 0, lam * prof / np.where(mu > 0, mu, 1.0), 0.0)
        value = scale * (-np.expm1(-x) + e * (1.0 - below) - tail)
        g = _g(x)
        index = scale * (g + (1.0 + x) * e * (1.0 - below) - tail) / cost
    # No decay: every page found is worth P, and τM' is λτC.
    value = np.where(mu > 0, value, prof * pages)
    index = np.where(mu > 0, index, prof * shows * above / cost)
    return np.maximum(value, 0.0), pages, np.maximum(index, 0.0)


def _g(x: FloatArray) -> FloatArray:
    """``g(x) = 1 - (1 + x) e^{-x}``, by its series where the difference cancels."""
    with np.errstate(over="ignore", invalid="ignore"):
        direct = -np.expm1(-x) - x * np.exp(-x)
    series = x * x * (0.5 - x * (1.0 / 3.0 - x * (0.125 - x / 30.0)))
    return np.where(x < 1e-2, series, direct)


def capped(estimates: Estimates) -> NDArray[np.intp]:
    """The sources planned as full hubs: a known number of links shown, and links coming."""
    shows = estimates.shows
    if shows is None:
        return np.zeros(0, dtype=np.intp)
    return np.flatnonzero(
        (shows >= 1) & (shows <= MAX_SHOWN) & (estimates.link_rate > 0) & (estimates.profit > 0)
    )


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
        grid = (which.size, _GRID.size)

        def column(values: NDArray[Any]) -> NDArray[Any]:
            return np.broadcast_to(values[which][:, None], grid)

        value, pages, index = full_hub_terms(
            column(estimates.link_rate),
            column(estimates.profit),
            column(estimates.decay),
            column(estimates.shows.astype(np.int64)),
            np.broadcast_to(_GRID[None, :], grid),
        )
        return cls(which, value, pages, index, np.maximum.accumulate(index, axis=1))

    def at(self, omega: float) -> tuple[FloatArray, NDArray[np.bool_], float]:
        """Each hub's interval where its index reaches ``omega`` (inf: never), whether it pays
        for its crawl and pages there, and the crawls per second the kept ones cost."""
        rows = np.arange(self.sources.size)
        before = (self.reached < omega).sum(axis=1)  # grid points before the index reaches ω
        reach = before < _GRID.size
        high = np.minimum(before, _GRID.size - 1)
        low = np.maximum(high - 1, 0)
        w_low, w_high = self.reached[rows, low], self.reached[rows, high]
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(w_high > w_low, (omega - w_low) / (w_high - w_low), 1.0)
        share = np.clip(share, 0.0, 1.0)
        interval = _GRID[0] * _STEP ** (low + share * (high - low))
        value = _lerp(self.value, rows, low, high, share)
        pages = _lerp(self.pages, rows, low, high, share)
        kept = reach & (value > omega * (1.0 + pages))
        interval = np.where(kept, interval, np.inf)
        cost = float(np.sum(np.where(kept, (1.0 + pages) / interval, 0.0)))
        return interval, kept, cost

    def values(self, elapsed: FloatArray) -> FloatArray:
        """``W`` of each hub ``elapsed`` seconds (≥ 0, one per hub) after its last crawl: past
        its peak it falls (a full hub loses its oldest links whenever it is crawled)."""
        position = np.log(np.maximum(elapsed, _GRID[0]) / _GRID[0]) / math.log(_STEP)
        position = np.minimum(position, _GRID.size - 1.0)
        low = np.minimum(position.astype(np.intp), _GRID.size - 2)
        rows = np.arange(self.sources.size)
        value = _lerp(self.index, rows, low, low + 1, position - low)
        # Below the grid W falls to 0 with τ (a crawl just made finds nothing).
        return np.where(elapsed >= _GRID[0], value, 0.0)


def _lerp(
    table: FloatArray,
    rows: NDArray[np.intp],
    low: NDArray[np.intp],
    high: NDArray[np.intp],
    share: FloatArray,
) -> FloatArray:
    return table[rows, low] * (1.0 - share) + table[rows, high] * share


def solve_with_full_hubs(
    estimates: Estimates,
    crawl_rate: float,
    solve: Callable[[Estimates, float], IntervalSolution],
    *,
    rtol: float = 1e-3,
    max_solves: int = 40,
) -> tuple[IntervalSolution, FullHubs]:
    """The schedule of ECHO with the full hubs planned as such: one ``ω`` for all, each full
    hub due where its index reaches it, the other sources by ``solve`` (ECHO's solver, with
    whatever limits it honours) on the budget the hubs leave. ``ω`` is where the two agree:
    the lower ``ω``, the more the hubs spend, and the higher the ``ω`` the rest then buys."""
    hubs = FullHubs.of(estimates)
    if not hubs.sources.size:
        return solve(estimates, crawl_rate), hubs
    rest_rate = estimates.link_rate.copy()
    rest_rate[hubs.sources] = 0.0  # (to the solver a hub is never worth a crawl: it is ours)
    rest = replace(estimates, link_rate=rest_rate, shows=None)
    others = bool(np.any((rest_rate > 0) & (estimates.profit > 0)))

    def gap(log_omega: float) -> tuple[float, IntervalSolution | None]:
        """How far (in log ω) the ``ω`` the rest buys with what the hubs leave lies above
        this one; without other sources, how far the hubs' cost lies above the budget."""
        omega = math.exp(log_omega)
        _, _, cost = hubs.at(omega)
        if not others:
            return math.log(max(cost, 1e-300) / max(crawl_rate, 1e-300)), None
        solution = solve(rest, max(crawl_rate - cost, 0.0))
        return math.log(max(solution.omega, 1e-300)) - log_omega, solution

    start = math.log(max(solve(estimates, crawl_rate).omega, 1e-12))
    low = high = start
    f_low, _ = gap(start)
    f_high = f_low
    solves = 2
    # Bracket the root (the gap falls as ω rises), a factor e at a time.
    while f_low < 0 and solves < max_solves:
        high, f_high = low, f_low
        low -= 1.0
        f_low, _ = gap(low)
        solves += 1
    while f_high > 0 and solves < max_solves:
        low, f_low = high, f_high
        high += 1.0
        f_high, _ = gap(high)
        solves += 1
    # Regula falsi in log ω, Illinois-style so that neither end sticks.
    stuck = 0
    while solves < max_solves and high - low > rtol and f_low > 0 > f_high:
        mid = (low * f_high - high * f_low) / (f_high - f_low)
        f_mid, _ = gap(mid)
        solves += 1
        if abs(f_mid) < rtol:
            low = high = mid
        elif f_mid > 0:
            low, f_low = mid, f_mid
            f_high, stuck = (f_high / 2, 0) if stuck == 1 else (f_high, 1)
        else:
            high, f_high = mid, f_mid
            f_low, stuck = (f_low / 2, 0) if stuck == -1 else (f_low, -1)
    log_omega = 0.5 * (low + high)
    interval, kept, _ = hubs.at(math.exp(log_omega))
    _, rest_solution = gap(log_omega)
    n = len(estimates)
    intervals = np.full(n, np.inf) if rest_solution is None else rest_solution.intervals.copy()
    all_kept = np.zeros(n, bool) if rest_solution is None else rest_solution.kept.copy()
    intervals[hubs.sources] = interval
    all_kept[hubs.sources] = kept
    solution = IntervalSolution(
        intervals=intervals,
        omega=math.exp(log_omega),
        kept=all_kept,
        objective=float("nan"),
        cost=float("nan"),
        converged=high - low <= rtol,
        iterations=solves,
        method="full-hubs",
    )
    return solution, hubs


__all__ = [
    "MAX_SHOWN",
    "FullHubs",
    "capped",
    "full_hub_terms",
    "poisson_below",
    "solve_with_full_hubs",
]
