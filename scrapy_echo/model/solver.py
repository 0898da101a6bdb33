"""Optimal recrawl intervals: Algorithm 1 of the ECHO paper, vectorised and budget-feasible.

Source ``i`` recrawled every ``I_i`` seconds earns ``U_i(I) = λ_i P_i (1 - e^{-μ_i I})/(μ_i I)``
clicks per second and costs ``1/I_i + λ_i`` crawls per second (the recrawls plus its new pages).
We maximise ``Σ U_i`` over the kept sources subject to ``Σ_kept (1/I_i + λ_i) <= N``.

For a multiplier ``ω`` (the value of one crawl) the stationary interval is
``I_i = g⁻¹(ω μ_i / (λ_i P_i)) / μ_i`` and the source is kept only if it pays for itself at that
interval, ``μ_i e^{-x_i} > λ_i g(x_i)`` with ``x_i = μ_i I_i`` (ECHO.md, "where we go past the
paper", and docs/how-it-works). Cost falls monotonically in ``ω``; a safeguarded Newton search
in ``log ω`` finds the smallest feasible ``ω``. When ``N > Σ λ_i`` and every source is kept this
is exactly the paper's equation ``Σ (1/I_i + λ_i) = N``.

Dropping a source frees its whole ``λ_i`` at once, so the Lagrangian can leave budget unused.
:func:`solve_intervals` then repairs: it refills the kept set's intervals to spend the whole
budget, greedily re-admits dropped sources that fit, and, for a few sources, searches all kept
sets exactly (:mod:`scrapy_echo.model.kept_sets`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from scrapy_echo.model.curves import FloatArray
from scrapy_echo.model.kept_sets import best_kept_set
from scrapy_echo.model.omega import BoolArray, Members, OmegaSearch, Point, Problem
from scrapy_echo.model.repair import repair_schedule

_NO_DECAY = 1e-200
# Budget left idle by a kept-set jump below this share of N is not worth a repair pass.
_REPAIR_MIN_IDLE = 1e-6


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
    """

    intervals: FloatArray
    omega: float
    kept: BoolArray
    objective: float
    cost: float
    converged: bool
    iterations: int
    method: str


def solve_intervals(
    link_rate: ArrayLike,
    profit: ArrayLike,
    decay: ArrayLike,
    crawl_rate: float,
    *,
    rtol: float = 1e-9,
    max_iter: int = 200,
    repair: bool = True,
    repair_candidates: int = 16,
    repair_solves: int = 400,
    exact_max: int = 10,
) -> IntervalSolution:
    """Recrawl intervals that maximise expected profit per second under a crawl budget.

    Parameters
    ----------
    link_rate : array_like
        ``λ_i``, new links per second appearing on each source (>= 0).
    profit : array_like
        ``P_i``, expected total clicks of a new page from each source (>= 0).
    decay : array_like
        ``μ_i``, decay rate of those clicks, 1/s (>= 0; 0 means no decay).
    crawl_rate : float
        ``N``, crawls per second for sources and new pages together (>= 0).
    rtol : float, optional
        Relative tolerance on the spent budget.
    max_iter : int, optional
        Most budget evaluations in one search for ``ω``.
    repair : bool, optional
        Close the gap the Lagrangian leaves when dropping a source frees budget.
    repair_candidates : int, optional
        Dropped sources tried for re-admission per round of the repair's local search,
        best value per crawl first (and half as many kept sources tried for removal).
    repair_solves : int, optional
        Most fixed-set solves the local search may spend.
    exact_max : int, optional
        With at most this many candidate sources, search every kept set exactly.

    Returns
    -------
    IntervalSolution

    Examples
    --------
    Two equal sources share the budget equally; the paper's constraint holds exactly:

    >>> sol = solve_intervals([0.01, 0.01], [5.0, 5.0], [1e-4, 1e-4], crawl_rate=0.1)
    >>> bool(np.isclose(np.sum(1 / sol.intervals) + 0.02, 0.1)), sol.method
    (True, 'lagrangian')
    """
    problem = _validate(link_rate, profit, decay, crawl_rate, rtol=rtol, max_iter=max_iter)
    solver = Solver(problem, rtol=rtol, max_iter=max_iter)
    best = solver.lagrangian()
    idle = (problem.crawl_rate - best.cost) / max(problem.crawl_rate, 1e-300)
    if repair and idle > _REPAIR_MIN_IDLE:
        few = int(problem.active.sum()) <= exact_max
        best = repair_schedule(
            problem,
            solver,
            best,
            candidates=repair_candidates,
            # With few sources the exact search below settles the kept set.
            solves=0 if few else repair_solves,
        )
        if few:
            exact = best_kept_set(problem, solver)
            if exact is not None and exact.objective > best.objective:
                best = exact
    return best


def _validate(
    link_rate: ArrayLike,
    profit: ArrayLike,
    decay: ArrayLike,
    crawl_rate: float,
    *,
    rtol: float,
    max_iter: int,
) -> Problem:
    arrays = {}
    for name, value in (("link_rate", link_rate), ("profit", profit), ("decay", decay)):
        arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
        if arr.ndim != 1:
            raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite (no NaN or inf)")
        if np.any(arr < 0):
            raise ValueError(f"{name} must be >= 0")
        arrays[name] = arr
    shapes = {arr.shape for arr in arrays.values()}
    if len(shapes) != 1:
        raise ValueError(f"link_rate, profit and decay must have one shape, got {sorted(shapes)}")
    n = float(crawl_rate)
    if not math.isfinite(n) or n < 0:
        raise ValueError(f"crawl_rate must be finite and >= 0, got {crawl_rate!r}")
    if not 0 < rtol < 1:
        raise ValueError(f"rtol must be in (0, 1), got {rtol!r}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be >= 1, got {max_iter!r}")
    lam, prof, mu = arrays["link_rate"], arrays["profit"], arrays["decay"]
    with np.errstate(under="ignore", over="ignore", divide="ignore"):
        value = lam * prof
        # λP/μ below the smallest normal double: too poor to represent, never worth a crawl.
        scale = value / np.where(mu > 0, mu, 1.0)
        active = (value > 0) & (scale >= np.finfo(np.float64).tiny)
        # Decay slower than 1e-200 of the crawl rate is no decay at all on any horizon the
        # crawl will see; treating it as μ = 0 keeps x = μI representable.
        mu = np.where(mu < n * _NO_DECAY, 0.0, mu)
    return Problem(lam, prof, mu, n, active, active & (mu == 0))


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


def profit_rate(
    link_rate: ArrayLike,
    profit: ArrayLike,
    decay: ArrayLike,
    intervals: ArrayLike,
    kept: ArrayLike | None = None,
) -> float:
    """``Σ_kept U_i(I_i)``, expected clicks per second of a schedule.

    ``U(I) = λP (1 - e^{-μI})/(μI)``; ``U(∞) = 0`` when ``μ > 0`` and ``λP`` when ``μ = 0``
    (no decay: a page is worth ``P`` however late it is found).
    """
    lam = np.asarray(link_rate, dtype=np.float64)
    prof = np.asarray(profit, dtype=np.float64)
    mu = np.asarray(decay, dtype=np.float64)
    interval = np.asarray(intervals, dtype=np.float64)
    mask = np.ones(lam.shape, bool) if kept is None else np.asarray(kept, dtype=bool)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        x = mu * interval  # 0 * inf (no decay, never recrawled) is NaN; μ == 0 is set below
        # (1 - e^{-x})/x: 1 at x -> 0, 0 at x -> inf.
        fraction = np.where(x > 1e-12, -np.expm1(-x) / x, 1.0 - 0.5 * x)
    fraction = np.where(np.isinf(x), 0.0, fraction)
    fraction = np.where(mu == 0, 1.0, fraction)
    return float(np.sum((lam * prof * fraction)[mask]))
