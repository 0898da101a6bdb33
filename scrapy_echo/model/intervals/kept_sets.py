"""Exact search over kept sets, for the few-source case the Lagrangian cannot settle.

Every kept source pays a fixed ``λ_i`` for its new pages, so choosing which sources to keep is a
knapsack: no multiplier need spend the budget exactly. With ``m`` candidate sources there are
``2^m`` kept sets; for each we find the ``ω`` that spends the budget on that set alone (a
bisection in ``log ω`` vectorised over all sets at once), score it, and refine the winner with
the solver's own search.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scrapy_echo.model.intervals.curves import g_inv
from scrapy_echo.model.intervals.omega import SATURATED_GROUP

if TYPE_CHECKING:
    from scrapy_echo.model.intervals.omega import Problem
    from scrapy_echo.model.intervals.schedule import IntervalSolution, Solver

# Steps of the bisection in log ω: the bracket starts 80 wide and every set's halves together,
# so 40 leave it 7e-11 wide. That only ranks the sets (the best few are refined exactly), and
# twice as many steps cost a host with six sources twice the time on the reactor.
_BISECTIONS = 40
_REFINED = 4


def best_kept_set(problem: Problem, solver: Solver) -> IntervalSolution | None:
    """The best schedule over all subsets of the active sources, or ``None`` if none fits."""
    members = np.flatnonzero(problem.active)
    m = members.size
    if m == 0:
        return None
    lam = problem.link_rate[members]
    prof = problem.profit[members]
    mu = problem.decay[members]
    static = problem.static[members]
    with np.errstate(divide="ignore", over="ignore"):
        scale = np.where(static, 0.0, lam * prof / np.where(static, 1.0, mu))
    # Row r keeps member j when bit j of r is set.
    masks = ((np.arange(1 << m)[:, None] >> np.arange(m)[None, :]) & 1).astype(bool)
    spare = problem.crawl_rate - masks @ lam
    masks, spare = masks[spare > 0], spare[spare > 0]
    if masks.shape[0] == 0:
        return None
    recrawl = masks & ~static[None, :]
    # Sets with nothing to recrawl spend only λ: their schedule needs no search.
    top = np.where(recrawl.any(axis=1), np.max(np.where(recrawl, scale, 0.0), axis=1), 1.0)
    log_lo = np.log(top) - 80.0  # e^-80: intervals far shorter than any crawl slot
    log_hi = np.log(top)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (log_lo + log_hi)
        cost = _recrawl_rate(np.exp(mid), recrawl, scale, mu)
        over = cost > spare
        log_lo = np.where(over, mid, log_lo)
        log_hi = np.where(over, log_hi, mid)
    omega = np.exp(log_hi)
    with np.errstate(over="ignore"):
        x = g_inv(np.where(recrawl, omega[:, None] / np.where(scale > 0, scale, 1.0), np.inf))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        fraction = np.where(np.isfinite(x) & (x > 0), -np.expm1(-x) / x, 0.0)
    fraction = np.where(static[None, :], 1.0, fraction)
    value = np.sum(np.where(masks, lam * prof * fraction, 0.0), axis=1)
    value = np.maximum(
        value, _saturated_value(omega, x, recrawl, static, masks, lam, prof, mu, scale, spare)
    )
    # Refine the best few with the solver's own search and keep the best refined one: a set
    # whose schedule needs very long intervals can refine to less than its coarse value.
    best: IntervalSolution | None = None
    rows = np.argsort(-value, kind="stable")[:_REFINED].tolist()
    # A set with nothing to recrawl has its exact value already; coarse values of sets that
    # recrawl can overstate them (refined, they fall below it), so the best such set is
    # always among those refined.
    plain = np.flatnonzero(~recrawl.any(axis=1))
    if plain.size:
        rows.append(int(plain[np.argmax(value[plain])]))
    for row in dict.fromkeys(rows):
        kept = np.zeros(problem.size, bool)
        kept[members[masks[row]]] = True
        solution = solver.fixed(kept, method="exact")
        if solution is not None and (best is None or solution.objective > best.objective):
            best = solution
    return best


def _saturated_value(
    omega: np.ndarray,
    x: np.ndarray,
    recrawl: np.ndarray,
    static: np.ndarray,
    masks: np.ndarray,
    lam: np.ndarray,
    prof: np.ndarray,
    mu: np.ndarray,
    scale: np.ndarray,
    spare: np.ndarray,
) -> np.ndarray:
    """Each set's value when the crawls its sources above the margin leave go to the sources
    at the margin (``a`` within ``SATURATED_GROUP`` of the set's ``ω``) at one shared ``x``:
    the saturated regime, where ω cannot resolve ``x`` (the solver's fixed search does the
    same). A feasible schedule, so taking the larger of this and the bisection's value is
    safe."""
    group = recrawl & (np.abs(scale[None, :] - omega[:, None]) <= SATURATED_GROUP * omega[:, None])
    above = recrawl & ~group & np.isfinite(x) & (x > 0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        left = spare - np.sum(np.where(above, mu / x, 0.0), axis=1)
        shared = np.sum(np.where(group, mu, 0.0), axis=1) / left
        fraction = np.where(shared > 0, -np.expm1(-shared) / shared, 1.0)
        above_value = np.where(above, lam * prof * -np.expm1(-x) / x, 0.0)
    earned = np.sum(np.where(group, lam * prof, 0.0), axis=1) * fraction
    static_value = np.sum(np.where(masks & static[None, :], lam * prof, 0.0), axis=1)
    value = np.sum(above_value, axis=1) + earned + static_value
    return np.where((left > 0) & group.any(axis=1), np.nan_to_num(value, nan=0.0), 0.0)


def _recrawl_rate(
    omega: np.ndarray, recrawl: np.ndarray, scale: np.ndarray, mu: np.ndarray
) -> np.ndarray:
    """``Σ_j μ_j / x_j`` per kept set at its own ``ω``."""
    with np.errstate(over="ignore"):  # y = inf: dead at this ω
        y = np.where(recrawl, omega[:, None] / np.where(scale > 0, scale, 1.0), np.inf)
    x = g_inv(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(recrawl & np.isfinite(x), mu / x, 0.0)
    total: np.ndarray = np.sum(rate, axis=1)
    return total
