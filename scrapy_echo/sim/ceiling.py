"""How far a trace lets a recrawl schedule go: the ECHO model with parameters known in hindsight.

``run`` and ``needed-rate`` measure what policies catch while they learn. This answers what
the model allows on the same trace if every source's ``λ, P, μ`` were known exactly:

- the **optimal schedule** (docs/how-it-works.rst, "The optimal schedule", with our kept-set
  repair) catches ``Σ U_i(I_i)`` clicks per second, ``U(I) = λP (1 - e^{-μI})/(μI)``;
- **BFS** crawls every new page and recrawls every source equally often, so each source gets
  ``I = n / (N - Σλ)`` (nothing when ``N ≤ Σλ``: the new pages alone take the whole budget).

Both are fractions of ``Σ λP``, the model's own upper bound. Each page is counted once, for the
source that showed it first (where a crawler finds it first). ``λ_i`` is the rate of such pages;
``P_i, μ_i`` are fitted to the clicks by age of all its pages, with the fit the crawler uses
(:func:`scrapy_echo.model.estimation.estimators.fit_profit_decay`) over a longer horizon, each age
bin averaged only over the pages old enough for it when the click log ends.

What the model leaves out works against the policies in a replay (pages that leave a hub
before a recrawl, estimates learned on the way), so the model's needed rates are a floor for
what a policy following the optimal schedule needs, and the ratio of BFS's to it the most that
trace lets ECHO save: on a trace where BFS needs 1.8 crawls/s and the optimal schedule 0.5, no
schedule of recrawls reaches the paper's 5x.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scrapy_echo.model.estimation.estimators import fit_profit_decay
from scrapy_echo.model.intervals.plan import Estimates
from scrapy_echo.model.intervals.solver import profit_rate, solve_intervals
from scrapy_echo.sim.search import needed_rate
from scrapy_echo.sim.trace import Trace

HOUR = 3600.0


@dataclass(frozen=True)
class Ceiling:
    """The model's fractions of ``Σ λP`` at each rate, and the rates needed for ``target``."""

    estimates: Estimates
    rates: list[float]
    optimal: list[float]  # fraction caught by the optimal schedule at each rate
    bfs: list[float]
    target: float
    optimal_needed: float  # crawls/s; inf: not reached below max_rate
    bfs_needed: float

    @property
    def ratio(self) -> float:
        return self.bfs_needed / self.optimal_needed

    def as_dict(self) -> dict[str, object]:
        def finite(x: float) -> float | None:
            return x if np.isfinite(x) else None

        return {
            "target": self.target,
            "new_pages_per_second": float(self.estimates.link_rate.sum()),
            "rates": [
                {"rate": r, "optimal_schedule": o, "bfs": b}
                for r, o, b in zip(self.rates, self.optimal, self.bfs, strict=True)
            ],
            "needed_rate": {
                "optimal_schedule": finite(self.optimal_needed),
                "bfs": finite(self.bfs_needed),
            },
            "ratio": finite(self.ratio),
        }


def ceiling(
    estimates: Estimates,
    *,
    rates: list[float],
    target: float = 0.99,
    max_rate: float = 100.0,
    fractions: tuple[Callable[[float], float], Callable[[float], float]] | None = None,
) -> Ceiling:
    """The model's fractions at ``rates`` and the least rates reaching ``target``.

    ``fractions``: the optimal schedule's and BFS's fraction at a rate, if not the stationary
    model's (:func:`scrapy_echo.sim.week_ceiling.week_fractions`)."""
    low = max(float(estimates.link_rate.sum()) * 1e-3, 1e-6)
    optimal, bfs = fractions or (
        lambda r: optimal_fraction(estimates, r),
        lambda r: bfs_fraction(estimates, r),
    )

    def need(fraction_at: Callable[[float], float]) -> float:
        return needed_rate(fraction_at, target, low=low, high=max_rate, precision=0.005)

    return Ceiling(
        estimates=estimates,
        rates=list(rates),
        optimal=[optimal(r) for r in rates],
        bfs=[bfs(r) for r in rates],
        target=target,
        optimal_needed=need(optimal),
        bfs_needed=need(bfs),
    )


def optimal_fraction(est: Estimates, rate: float) -> float:
    """Share of ``Σ λP`` the optimal schedule catches at ``rate`` crawls/s."""
    bound = _bound(est)
    if bound <= 0:
        return 1.0
    sol = solve_intervals(est.link_rate, est.profit, est.decay, rate)
    return min(sol.objective / bound, 1.0)


def bfs_fraction(est: Estimates, rate: float) -> float:
    """Share of ``Σ λP`` BFS catches at ``rate`` crawls/s: every source recrawled every
    ``n / (N - Σλ)`` seconds, every new page crawled."""
    bound = _bound(est)
    if bound <= 0:
        return 1.0
    spare = rate - float(est.link_rate.sum())
    if spare <= 0:
        return 0.0
    interval = np.full(len(est), len(est) / spare)
    return min(profit_rate(est.link_rate, est.profit, est.decay, interval) / bound, 1.0)


def hindsight_estimates(
    trace: Trace, *, bin_width: float = HOUR, horizon: float = 7 * 24 * HOUR
) -> Estimates:
    """``λ, P, μ`` per source from the whole trace (see the module docstring)."""
    n = trace.n_sources
    source, first_seen = first_sources(trace)
    new = np.isfinite(first_seen) & (first_seen > 0) & (first_seen < trace.duration)
    created = trace.page_created
    link_rate = np.bincount(source[new], minlength=n) / trace.duration

    bins = max(int(horizon // bin_width), 1)
    click_end = float(trace.click_ts.max()) if trace.click_ts.size else trace.duration
    # Bins each page was watched for in full before the click log ends (right censoring).
    watched = np.clip((click_end - created) // bin_width, 0, bins)
    watched = np.where(new, watched, 0).astype(np.intp)
    # Pages behind bin k of a source: its pages watched for more than k bins.
    per_length = np.zeros((n, bins + 1))
    np.add.at(per_length, (source[new], watched[new]), 1.0)
    pages = per_length[:, ::-1].cumsum(axis=1)[:, ::-1][:, 1:]

    page = trace.click_page
    age_bin = np.maximum((trace.click_ts - created[page]) // bin_width, 0).astype(np.intp)
    counted = new[page] & (age_bin < watched[page])
    flat = source[page[counted]] * bins + age_bin[counted]
    totals = np.bincount(flat, weights=trace.click_count[counted], minlength=n * bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(pages > 0, totals.reshape(n, bins) / pages, 0.0)
    fit = fit_profit_decay(
        means,
        pages,
        bin_width=bin_width,
        decay_min=1e-3 / (bins * bin_width),
        decay_max=10.0 / bin_width,
    )
    decay = fit.decay[np.isfinite(fit.decay)]
    typical_decay = float(np.median(decay)) if decay.size else np.log(2.0) / (24 * HOUR)
    # No pages, or no clicks to fit: worth nothing as far as the trace shows.
    profit = np.where(np.isfinite(fit.profit), fit.profit, 0.0)
    return Estimates(
        link_rate.astype(np.float64),
        profit,
        np.where(np.isfinite(fit.decay), fit.decay, typical_decay),
    )


def first_sources(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per page: the source whose link to it appeared first, and when (NaN: no link)."""
    order = np.lexsort((trace.link_appeared, trace.link_page))
    pages = trace.link_page[order]
    first = order[np.concatenate([[True], pages[1:] != pages[:-1]])] if pages.size else order
    source = np.zeros(trace.n_pages, dtype=np.intp)
    appeared = np.full(trace.n_pages, np.nan)
    source[trace.link_page[first]] = trace.link_source[first]
    appeared[trace.link_page[first]] = trace.link_appeared[first]
    return source, appeared


def _bound(est: Estimates) -> float:
    return float(np.sum(est.link_rate * est.profit))
