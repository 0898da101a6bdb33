"""Schedules from ω searches: what :func:`~scrapy_echo.model.intervals.solver.solve_intervals`
returns, and the searches (over all sources, or a fixed kept set) that the Lagrangian, the repair
and the exact kept-set search share."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.omega import BoolArray, Members, OmegaSearch, Point, Problem


@dataclass(frozen=True)
class IntervalSolution:
    """What :func:`solve_intervals` found.

    Attributes
    ----------
    intervals : ndarray
        Recrawl interval per source, seconds; ``inf`` where the source is not recrawled.
    omega : float
        The Lagrange multiplier: profit one more crawl per second would buy, in clicks per
        crawl. A new page whose expected remaining profit is below ``omega`` is worth less than
        the crawl it costs.
    kept : ndarray of bool
        Sources whose new pages the schedule pays for (``intervals`` may still be ``inf`` for a
        source with no decay, whose pages keep their value however late they are found).
    objective : float
        ``Σ_kept U_i``: expected profit per second of the schedule.
    cost : float
        ``Σ_kept (1/I_i + λ_i)``: crawls per second the schedule spends (``<= crawl_rate``).
    converged : bool
        Whether the search met its tolerance within ``max_iter``.
    iterations : int
        Evaluations of the budget over all sources.
    method : str
        ``"lagrangian"`` (the paper's solution, no gap), ``"repaired"`` or ``"exact"``.
    source_omega : ndarray or None
        Under per-host limits, per source the value of a crawl on its host:
        ``max(omega, ν_h)`` (docs/how-it-works.rst, "Per-host capacity"); ``None``: ``omega``
        for all.
    page_share : ndarray or None
        Under per-host limits, per source the share of its new pages the plan fetches (a
        host that cannot take them all fetches its best ones); ``None``: all.
    """

    intervals: FloatArray
    omega: float
    kept: BoolArray
    objective: float
    cost: float
    converged: bool
    iterations: int
    method: str
    source_omega: FloatArray | None = None
    page_share: FloatArray | None = None


class Solver:
    """Runs ω searches over the whole problem or a fixed kept set, and turns their points
    into solutions."""

    def __init__(self, problem: Problem, *, rtol: float, max_iter: int) -> None:
        self.problem = problem
        self.search = OmegaSearch(problem, rtol=rtol, max_iter=max_iter)

    @property
    def evaluations(self) -> int:
        return self.search.evaluations

    def lagrangian(self) -> IntervalSolution:
        members = Members.of(self.problem)
        return self._solution(members, *self.search.run(members, fixed=False), "lagrangian")

    def fixed(
        self, kept: BoolArray, method: str = "repaired", *, near: float | None = None
    ) -> IntervalSolution | None:
        """Best schedule that keeps exactly ``kept``, spending the whole budget; ``None`` if
        their new pages alone exceed it."""
        p = self.problem
        if float(np.sum(p.link_rate[kept & p.active])) >= p.crawl_rate:
            return None
        members = Members.of(p, kept)
        return self._solution(members, *self.search.run(members, fixed=True, near=near), method)

    def _solution(
        self, members: Members, point: Point, converged: bool, method: str
    ) -> IntervalSolution:
        p = self.problem
        kept = np.zeros(p.size, bool)
        kept[members.index[point.kept]] = True
        kept[members.static_index[point.static_kept]] = True
        intervals = np.full(p.size, np.inf)
        recrawled = point.kept & (point.x > 0) & point.alive
        chosen = members.index[recrawled]
        x = point.x[recrawled]
        mu = p.decay[chosen]
        with np.errstate(over="ignore"):
            intervals[chosen] = x / mu
        static = members.static_index[point.static_kept]
        # U = λP (1 - e^{-x})/x for the recrawled, λP for static sources, 0 for kept but
        # never recrawled ones (their pages are found too late to be worth anything).
        earned = p.link_rate[chosen] * p.profit[chosen] * -np.expm1(-x) / x
        return IntervalSolution(
            intervals=intervals,
            omega=point.omega,
            kept=kept,
            objective=float(np.sum(earned)) + float(np.sum(p.link_rate[static] * p.profit[static])),
            cost=float(np.sum(mu / x)) + float(np.sum(p.link_rate[kept])),
            converged=converged,
            iterations=self.search.evaluations,
            method=method,
        )
