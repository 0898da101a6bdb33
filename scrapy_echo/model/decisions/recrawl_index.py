"""ECHO's value of recrawling a source now, ``V(τ) = (λP/μ) g(μτ)`` (docs/how-it-works.rst,
"The same optimum as an index"): what the policies weigh early recrawls by."""

from __future__ import annotations

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.plan import Plan


def best_early_recrawl(now: float, last_crawl: FloatArray, plan: Plan) -> tuple[int, float]:
    """The source whose recrawl now is worth most, by ``V(τ) = (λP/μ) g(μτ)`` (``λPτ`` at
    ``μ = 0``; 0 for sources the plan does not keep), and that value."""
    # A crawl time still to come (a back-off, a retired source) makes τ negative, where V
    # grows without bound and overflows to inf: the reference policy, kept as first built,
    # takes that source (tests/test_core.py). The overflow is that value, not a fault to warn
    # of at every slot; ECHO-newpages clamps τ before it gets here.
    with np.errstate(over="ignore", invalid="ignore"):
        value = early_recrawl_values(now, last_crawl, plan)
    best = int(value.argmax())
    return best, float(value[best])


def early_recrawl_values(now: float, last_crawl: FloatArray, plan: Plan) -> FloatArray:
    """``V(τ)`` of every source (see :func:`best_early_recrawl`), a fresh array."""
    mu, scale, linear = plan.index_terms
    elapsed = np.subtract(now, last_crawl)
    # g(x) = 1 - (1 + x) e^{-x}; its cancellation at tiny x only blurs values that small.
    # In place, two buffers: this runs at every slot nothing is due in.
    value = np.multiply(mu, elapsed)
    e = np.negative(value)
    np.exp(e, out=e)
    value += 1.0
    value *= e
    np.subtract(1.0, value, out=value)
    value *= scale
    value += np.multiply(linear, elapsed, out=elapsed)
    return value


__all__ = ["best_early_recrawl", "early_recrawl_values"]


def net_index_cap(
    link_rate: FloatArray, profit: FloatArray, decay: FloatArray, level: float
) -> FloatArray:
    """The most a source's recrawl index can be worth when each link it finds costs a crawl
    worth ``L`` = ``level`` (docs/how-it-works.rst, "The seed's own policies"):
    ``(λ/μ)(P - L - L ln(P/L))`` where ``P > L``, 0 where not (no link it finds pays for its
    fetch), ``λP/μ`` (the plain index's cap) at ``L = 0``; unbounded at ``μ = 0``, ``P > L``.

    A link ``u`` old is worth ``P e^{-μu} - L`` once fetched, so only links younger than
    ``u* = ln(P/L)/μ`` pay; the index ``W(τ) - τ W'(τ)`` of the net profit waiting is ECHO's
    ``(λP/μ) g(μτ)`` up to ``τ = u*`` and this constant past it.

    >>> one = [np.array([x]) for x in (1e-3, 2.0, 1e-4)]
    >>> net_index_cap(*one, level=0.0).tolist(), net_index_cap(*one, level=2.0).tolist()
    ([20.0], [0.0])
    >>> round(float(net_index_cap(*one, level=1.0)[0]), 4)  # 10 (2 - 1 - ln 2)
    3.0685
    """
    lam = np.asarray(link_rate, dtype=np.float64)
    prof = np.asarray(profit, dtype=np.float64)
    mu = np.asarray(decay, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        net = prof - level - level * np.log(np.where(level > 0, prof / level, 1.0))
        cap = np.where(mu > 0, lam * net / mu, np.inf)
    return np.asarray(np.where(prof > level, cap, 0.0), dtype=np.float64)
