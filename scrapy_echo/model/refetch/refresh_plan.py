"""The refresh lane's arithmetic, page by page: Ford, Grimes and Tassone's intervals (*Keeping a
search engine index fresh: risk and optimality in estimating refresh rates for web pages*)
at ECHO's prices, shrunk per group by the conservative ratio, fitted to the lane's share of the
budget, and the risks the plan leaves (docs/how-it-works.rst, "Refreshing pages that change").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray, g_inv
from scrapy_echo.model.refetch.refresh import (
    conservative_shrink,
    refresh_interval,
    underestimate_risk,
    very_stale_share,
)

_BISECTIONS = 60


def optimal_ratios(crawl_cost: float, stale: FloatArray, delta: FloatArray | float) -> FloatArray:
    """The paper's optimal ratio ``g⁻¹(C_c/(C_s Δ))`` per page; inf where no refetch pays."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(stale > 0, crawl_cost / (stale * delta), np.inf)
    ratio = np.full(z.shape, np.inf)
    worth = z < 1.0
    ratio[worth] = g_inv(z[worth])
    return ratio


def planned_intervals(
    crawl_cost: float, stale: FloatArray, delta: FloatArray, shrink: FloatArray, *,
    shortest: float, longest: float,
) -> FloatArray:  # fmt: skip
    """The paper's interval ``g⁻¹(C_c/(C_s Δ)) Δ`` per page, times ``shrink``, clipped to
    ``[shortest, longest]``; inf where no refetch pays (the paper's "never refresh": not
    ``refresh_interval``'s ``longest``, which would spend the lane on pages worth less than a
    crawl elsewhere)."""
    out = np.full(stale.shape, np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        worth = crawl_cost < stale * delta
    if worth.any():
        out[worth] = refresh_interval(
            delta[worth], crawl_cost, stale[worth], shrink=shrink[worth],
            shortest=shortest, longest=longest,
        )  # fmt: skip
    return out


def fit_to_cap(cap: float, crawl_cost: float, intervals: Callable[[float], FloatArray]) -> float:
    """The least crawl cost above ``crawl_cost`` at which ``intervals(cost)`` asks at most
    ``cap`` refetches per second: bisection on its log (the rate falls as the cost rises)."""
    low, high = math.log(crawl_cost), math.log(crawl_cost)
    while np.sum(1.0 / intervals(math.exp(high))) > cap:
        high += math.log(4.0)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (low + high)
        if np.sum(1.0 / intervals(math.exp(mid))) > cap:
            low = mid
        else:
            high = mid
    return math.exp(high)


def group_shrinks(
    ratio: FloatArray, groups: NDArray[np.intp], information: FloatArray, *, bound: float
) -> FloatArray:
    """Each group's conservative shrink (:func:`~scrapy_echo.model.refetch.refresh.
    conservative_shrink`), set at the longest finite ratio among its pages: the very stale
    share grows with the ratio, so the bound then holds for all of them. 1 where none."""
    longest = np.zeros(information.size)
    finite = np.isfinite(ratio)
    np.maximum.at(longest, groups[finite], ratio[finite])
    shrink = np.ones(information.size)
    some = longest > 0
    shrink[some] = conservative_shrink(longest[some], information[some], bound=bound)
    return shrink


class PlanRisks(NamedTuple):
    """What a plan expects (NaN where nothing is planned): the share of its refetches very
    stale, each weighted by how often it comes; the mean over the pages kept of the chance
    their group's rate is over twice its estimate; the mean shrink of a refetch."""

    very_stale_share: float
    underestimate_risk: float
    shrink: float


def plan_risks(
    information: FloatArray, intervals: FloatArray, ratio: FloatArray, delta: FloatArray,
    shrink: FloatArray, kept: NDArray[np.bool_], *, shortest: float,
) -> PlanRisks:  # fmt: skip
    """Per page: its group's ``information``, planned ``intervals``, optimal ``ratio`` at the
    plan's crawl cost, ``delta`` (``Δ̂``) and ``shrink``. A refetch every ``t`` where the
    known-``Δ`` one is ``rΔ`` has the shrink ``t/(rΔ̂)``; one held at ``shortest`` is never
    very stale (with ``Δ`` known it would be refetched at ``shortest`` too)."""
    risk = float(underestimate_risk(information[kept]).mean()) if kept.any() else math.nan
    planned = np.isfinite(intervals) & np.isfinite(ratio)
    if not planned.any():
        return PlanRisks(math.nan, risk, math.nan)
    weight = 1.0 / intervals[planned]
    effective = np.clip(intervals[planned] / (ratio[planned] * delta[planned]), 1e-12, 1.0)
    share = very_stale_share(ratio[planned], information[planned], shrink=effective)
    share = np.where(intervals[planned] <= shortest, 0.0, share)
    return PlanRisks(
        float(np.sum(share * weight) / np.sum(weight)),
        risk,
        float(np.sum(shrink[planned] * weight) / np.sum(weight)),
    )


__all__ = [
    "PlanRisks",
    "fit_to_cap",
    "group_shrinks",
    "optimal_ratios",
    "plan_risks",
    "planned_intervals",
]
