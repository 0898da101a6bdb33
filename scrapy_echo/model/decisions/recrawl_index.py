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
