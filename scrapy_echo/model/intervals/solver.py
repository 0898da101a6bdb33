"""Optimal recrawl intervals: Algorithm 1 of the ECHO paper, vectorised and budget-feasible.

Source ``i`` recrawled every ``I_i`` seconds earns ``U_i(I) = λ_i P_i (1 - e^{-μ_i I})/(μ_i I)``
clicks per second and costs ``1/I_i + λ_i`` crawls per second (the recrawls plus its new pages).
We maximise ``Σ U_i`` over the kept sources subject to ``Σ_kept (1/I_i + λ_i) <= N``.

For a multiplier ``ω`` (the value of one crawl) the stationary interval is
``I_i = g⁻¹(ω μ_i / (λ_i P_i)) / μ_i`` and the source is kept only if it pays for itself at that
interval, ``μ_i e^{-x_i} > λ_i g(x_i)`` with ``x_i = μ_i I_i`` (docs/how-it-works.rst, "Where the
code goes past the paper"). Cost falls monotonically in ``ω``; a safeguarded Newton search
in ``log ω`` finds the smallest feasible ``ω``. When ``N > Σ λ_i`` and every source is kept this
is exactly the paper's equation ``Σ (1/I_i + λ_i) = N``.

Dropping a source frees its whole ``λ_i`` at once, so the Lagrangian can leave budget unused.
:func:`solve_intervals` then repairs: it refills the kept set's intervals to spend the whole
budget, greedily re-admits dropped sources that fit, and, for a few sources, searches all kept
sets exactly (:mod:`scrapy_echo.model.intervals.kept_sets`).
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike

from scrapy_echo.model.intervals.kept_sets import best_kept_set
from scrapy_echo.model.intervals.omega import Problem
from scrapy_echo.model.intervals.repair import repair_schedule
from scrapy_echo.model.intervals.schedule import IntervalSolution, Solver

# Recrawls cost at most N per second, so x = μI >= μ/N: with μ >= 1e-100 N the stationary
# point y ≈ x²/2 stays above 1e-201, and with a >= 1e-100 (in units of the largest a) ω = a y
# stays a normal double.
_NO_DECAY = 1e-100
_NEGLIGIBLE = 1e-100
# Budget left idle by a kept-set jump below this share of N is not worth a repair pass.
_REPAIR_MIN_IDLE = 1e-6


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
    problem, unit = _validate(link_rate, profit, decay, crawl_rate, rtol=rtol, max_iter=max_iter)
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
    return replace(best, omega=best.omega * unit, objective=best.objective * unit)


def _validate(
    link_rate: ArrayLike,
    profit: ArrayLike,
    decay: ArrayLike,
    crawl_rate: float,
    *,
    rtol: float,
    max_iter: int,
) -> tuple[Problem, float]:
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
        # Decay slower than 1e-100 of the crawl rate is no decay at all on any horizon the
        # crawl will see; treating it as μ = 0 keeps x = μI and y = g(x) representable.
        mu = np.where(mu < n * _NO_DECAY, 0.0, mu)
        value = lam * prof
        # λP below the smallest normal double (subnormal inputs) is worth nothing.
        worth = value >= np.finfo(np.float64).tiny
        # What one crawl can be worth: λP/μ (P without decay). Profits are taken in units of
        # the largest, so ω lies in (0, 1]; a source worth less than 1e-100 of the best is
        # never worth a crawl, which keeps ω = a g(x) above the smallest double.
        scale = np.where(mu > 0, value / np.where(mu > 0, mu, 1.0), prof)
        unit = float(np.max(scale, where=worth, initial=0.0))
        unit = unit if 0 < unit < math.inf else 1.0
        active = worth & (scale / unit >= _NEGLIGIBLE)
        profit = np.where(active, prof / unit, 0.0)
        # The normalised λP as well; P/unit overflows only for a λ too small to matter.
        active &= np.isfinite(profit) & (lam * profit >= np.finfo(np.float64).tiny)
        profit[~active] = 0.0
    return Problem(lam, profit, mu, n, active, active & (mu == 0)), unit


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
