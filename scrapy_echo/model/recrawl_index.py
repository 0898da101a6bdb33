"""ECHO's value of recrawling a source now, ``V(τ) = (λP/μ) g(μτ)`` (docs/how-it-works.rst,
"The same optimum as an index"): what the policies weigh early recrawls by."""

from __future__ import annotations

import numpy as np

from scrapy_echo.model.curves import FloatArray
from scrapy_echo.model.plan import Plan


def best_early_recrawl(now: float, last_crawl: FloatArray, plan: Plan) -> tuple[int, float]:
    """The source whose recrawl now is worth most, by ``V(τ) = (λP/μ) g(μτ)`` (``λPτ`` at
    ``μ = 0``; 0 for sources the plan does not keep, and while a source's crawl time is still
    to come), and that value."""
    value = early_recrawl_values(now, last_crawl, plan)
    best = int(value.argmax())
    return best, float(value[best])


def early_recrawl_values(now: float, last_crawl: FloatArray, plan: Plan) -> FloatArray:
    """``V(τ)`` of every source (see :func:`best_early_recrawl`), a fresh array."""
    mu, scale, linear = plan.index_terms
    elapsed = np.subtract(now, last_crawl)
    # A crawl time still to come (a source backing off, retired or removed) is no time
    # elapsed: worth nothing yet. (g grows again below 0, up to an overflow at RETIRED.)
    np.maximum(elapsed, 0.0, out=elapsed)
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
