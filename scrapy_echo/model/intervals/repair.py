"""Closing the gap the Lagrangian leaves when the budget is below ``Σ λ``.

Every kept source pays a fixed ``λ_i`` for its new pages, so choosing the kept set is a
knapsack and no ``ω`` may spend the budget exactly: the Lagrangian's kept set can leave
crawls idle or keep a poor set (one large valuable source dropped for several small ones).
The repair first *refills*: it re-solves the intervals of the kept set alone, so the idle
crawls go to recrawling kept sources more often. When the idle share was large enough to
matter, it tries a few greedy fills (dropped sources re-admitted best value per crawl first, up
to a share of the budget), then a local search over kept sets (add a dropped source, drop a
kept one, or swap the two) takes the best improving move per round until none improves or its
solve budget is spent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scrapy_echo.model.intervals.curves import g_inv

if TYPE_CHECKING:
    from scrapy_echo.model.intervals.omega import BoolArray, IntArray, Problem
    from scrapy_echo.model.intervals.schedule import IntervalSolution, Solver

# The local search runs only when the Lagrangian left at least this share of N idle: with many
# small sources the jump is a sliver of the budget, and the refill already recovers it.
LOCAL_SEARCH_MIN_IDLE = 1e-3
_IMPROVEMENT = 1e-12
# Shares of the spare budget a greedy fill lets new pages of re-admitted sources take; the rest
# pays for recrawls.
_FILL_SHARES = (0.3, 0.5, 0.7, 0.85)  # relative: smaller gains are rounding, and would loop forever


def repair_schedule(
    problem: Problem,
    solver: Solver,
    lagrangian: IntervalSolution,
    *,
    candidates: int,
    solves: int,
) -> IntervalSolution:
    """The best schedule found from the Lagrangian's by refilling and local search."""
    best = lagrangian
    refilled = solver.fixed(lagrangian.kept, near=lagrangian.omega)
    if refilled is not None and refilled.objective > best.objective:
        best = refilled
    idle = (problem.crawl_rate - lagrangian.cost) / problem.crawl_rate
    if idle < LOCAL_SEARCH_MIN_IDLE:
        return best
    for filled in _greedy_fills(problem, lagrangian, solver):
        if filled.objective > best.objective:
            best = filled
    spent = 0
    while spent < solves:
        round_best = best
        for kept in _moves(problem, best, candidates):
            if spent >= solves:
                break
            spent += 1
            trial = solver.fixed(kept)
            if trial is not None and trial.objective > round_best.objective * (1 + _IMPROVEMENT):
                round_best = trial
        if round_best is best:
            break
        best = round_best
    return best


def _greedy_fills(
    problem: Problem, lagrangian: IntervalSolution, solver: Solver
) -> list[IntervalSolution]:
    """Kept sets grown from the Lagrangian's by dropped sources, best value per crawl first,
    until their new pages take a share of the budget. Where many sources are alike (a cold
    start: every source has the same priors) they all drop at the same ω, the Lagrangian keeps
    none, and one move at a time would take hundreds of moves to fill the budget."""
    order = _dropped_by_value(problem, lagrangian, problem.size)
    if not order.size:
        return []
    spare = problem.crawl_rate - float(np.sum(problem.link_rate[lagrangian.kept]))
    taken = np.cumsum(problem.link_rate[order])
    out = []
    for share in _FILL_SHARES:
        count = int(np.searchsorted(taken, share * spare, side="right"))
        if count == 0:
            continue
        kept = lagrangian.kept.copy()
        kept[order[:count]] = True
        solution = solver.fixed(kept)
        if solution is not None:
            out.append(solution)
    return out


def _moves(problem: Problem, current: IntervalSolution, limit: int) -> list[BoolArray]:
    """Kept sets one move away: add, drop, or swap, most promising first."""
    kept = current.kept
    spare = problem.crawl_rate - float(np.sum(problem.link_rate[kept]))
    incoming = _dropped_by_value(problem, current, limit)
    outgoing = _kept_by_value(problem, current, max(1, limit // 2))
    moves = []
    for c in incoming:
        if problem.link_rate[c] < spare:
            moves.append(_flip(kept, c))
    for k in outgoing:
        moves.append(_flip(kept, k))
        for c in incoming:
            if problem.link_rate[c] < spare + problem.link_rate[k]:
                moves.append(_flip(_flip(kept, k), c))
    return moves


def _flip(kept: BoolArray, index: np.intp) -> BoolArray:
    out = kept.copy()
    out[index] = not out[index]
    return out


def _dropped_by_value(problem: Problem, current: IntervalSolution, limit: int) -> IntArray:
    """Dropped sources that could fit alone, by profit per crawl at the current ``ω``."""
    pool = np.flatnonzero(problem.active & ~current.kept & (problem.link_rate < problem.crawl_rate))
    if pool.size == 0 or limit <= 0:
        return pool[:0]
    lam, prof, mu = problem.link_rate[pool], problem.profit[pool], problem.decay[pool]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = g_inv(np.where(mu > 0, current.omega * mu / (lam * prof), np.inf))
        earn = np.where(mu > 0, lam * prof * -np.expm1(-x) / x, lam * prof)
        spend = np.where(mu > 0, mu / x, 0.0) + lam
        density = np.nan_to_num(earn / spend, nan=0.0, posinf=0.0)
    return pool[np.argsort(-density, kind="stable")][:limit]


def _kept_by_value(problem: Problem, current: IntervalSolution, limit: int) -> IntArray:
    """Kept sources by what they earn per crawl they cost, worst first."""
    pool = np.flatnonzero(current.kept)
    if pool.size == 0:
        return pool
    lam, prof, mu = problem.link_rate[pool], problem.profit[pool], problem.decay[pool]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = mu * current.intervals[pool]
        fraction = np.where(np.isfinite(x) & (x > 0), -np.expm1(-x) / x, 0.0)
        fraction = np.where(mu == 0, 1.0, fraction)
        density = lam * prof * fraction / (1.0 / current.intervals[pool] + lam)
    return pool[np.argsort(np.nan_to_num(density), kind="stable")][:limit]
