"""What a request to a saturated host is worth: a hub crawl valued per request of its host
(docs/how-it-works.rst, "Per-host capacity").

On a host that cannot take every request the plan would send it, each request displaces
another: a hub crawl there is worth what it will bring per request it costs, the crawl itself
and the pages it reveals, each fetched one host delay ``d`` after the last. After ``τ``
since the last crawl, the ``j``-th newest page that appeared since is ``Γ(j, λ)`` old; it is
there and new with probability ``P(Γ(j, λ) ≤ τ)``, and fetched ``j d`` after the crawl it is
worth on average

.. math:: P \\left(\\frac{λ}{λ+μ}\\right)^j e^{-μ j d}\\, P(Γ(j, λ+μ) ≤ τ),

(the expectation of ``P e^{-μ(\\text{age} + j d)}`` over the age's density up to ``τ``). A
crawl followed by its ``m`` newest new pages takes ``m + 1`` requests; its value per request
is the best over ``m`` of the sum of the first ``m`` terms over ``m + 1``.

>>> import numpy as np
>>> value = hub_value_per_request(
...     np.array([0.0, 10.0]), rate=np.array([1.0, 1.0]), profit=np.array([5.0, 5.0]),
...     decay=np.array([0.01, 0.01]), delay=np.array([2.0, 2.0]), most=10)
>>> float(value[0]), round(float(value[1]), 2)
(0.0, 3.8)
"""

from __future__ import annotations

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray


def hub_value_per_request(
    elapsed: FloatArray,
    *,
    rate: FloatArray,
    profit: FloatArray,
    decay: FloatArray,
    delay: FloatArray,
    most: int,
) -> FloatArray:
    """Per source, the value per request of its host of crawling it ``elapsed`` seconds after
    its last crawl, then fetching its best number (at most ``most``) of newest new pages, one
    per host ``delay`` (see the module). All arrays per source; ``rate`` ``λ`` (links per
    second), ``profit`` ``P``, ``decay`` ``μ``."""
    elapsed = np.maximum(np.asarray(elapsed, dtype=np.float64), 0.0)
    rate = np.asarray(rate, dtype=np.float64)
    profit = np.asarray(profit, dtype=np.float64)
    decay = np.asarray(decay, dtype=np.float64)
    total = rate + decay
    share = np.divide(rate, total, out=np.zeros_like(rate), where=total > 0)
    x = total * elapsed  # Γ(j, λ+μ) ≤ τ is Poisson(x) ≥ j
    term = np.exp(-x)  # Poisson(x)'s pmf at i, built up
    below = term.copy()  # P(Poisson(x) < j)
    step = share * np.exp(-decay * np.asarray(delay, dtype=np.float64))
    factor = np.ones_like(rate)
    gain = np.zeros_like(rate)
    best = np.zeros_like(rate)
    for j in range(1, most + 1):
        factor = factor * step
        gain = gain + profit * factor * np.maximum(1.0 - below, 0.0)
        best = np.maximum(best, gain / (j + 1))
        term = term * x / j
        below = below + term
    return np.nan_to_num(best, nan=0.0, posinf=0.0)


__all__ = ["hub_value_per_request"]
