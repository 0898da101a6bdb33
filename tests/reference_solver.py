"""An independent reference for the interval problem, for tests only.

It shares no code and no formula with :mod:`scrapy_echo.model.intervals.solver`: it works in recrawl
rates ``r = 1/I``, finds each source's best rate for a multiplier ``ω`` by golden-section
search on ``U(r) - ω r`` (``U`` concave in ``r``), bisects ``ω`` to spend the budget, and
enumerates every kept set. Slow, simple, and vectorised over kept sets only so that the
tests finish.
"""

from __future__ import annotations

import itertools

import numpy as np

_GOLDEN = (np.sqrt(5.0) - 1.0) / 2.0


def utility(lam, prof, mu, rate):
    """Profit per second of recrawling at ``rate`` (1/s): ``λP r (1 - e^{-μ/r}) / μ``."""
    lam, prof, mu, rate = np.broadcast_arrays(*map(np.asarray, (lam, prof, mu, rate)))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        out = lam * prof * rate * -np.expm1(-mu / rate) / mu
    out = np.where(rate <= 0, 0.0, out)
    return np.where(mu == 0, lam * prof, out)


def _best_rates(lam, prof, mu, omega, rate_max):
    """argmax_r U(r) - ω r on [0, rate_max], per entry (golden section)."""
    a = np.zeros_like(omega * lam)
    b = np.broadcast_to(rate_max, a.shape).astype(float)
    for _ in range(64):
        c = b - _GOLDEN * (b - a)
        d = a + _GOLDEN * (b - a)
        fc = utility(lam, prof, mu, c) - omega * c
        fd = utility(lam, prof, mu, d) - omega * d
        left = fc >= fd
        b = np.where(left, d, b)
        a = np.where(left, a, c)
    return 0.5 * (a + b)


def best_schedule(lam, prof, mu, budget):
    """(objective, kept mask) of the best schedule over all kept sets."""
    lam, prof, mu = (np.asarray(v, dtype=float) for v in (lam, prof, mu))
    n = lam.size
    masks = np.array(list(itertools.product([False, True], repeat=n)), dtype=bool)[1:]
    spare = budget - masks @ lam
    masks, spare = masks[spare > 0], spare[spare > 0]
    if masks.shape[0] == 0:
        return 0.0, np.zeros(n, bool)
    values = _fixed_set_values(masks, lam, prof, mu, spare)
    best = int(np.argmax(values))
    return float(values[best]), masks[best]


def _fixed_set_values(masks, lam, prof, mu, spare):
    """Best profit of each kept set (row of ``masks``) with ``spare`` recrawls/s to share."""
    rate_max = spare[:, None] * np.ones_like(masks, dtype=float)
    scale = float(np.max(lam * prof / np.where(mu > 0, mu, 1.0))) * 10 + 1.0
    lo = np.full(masks.shape[0], scale * 1e-18)
    hi = np.full(masks.shape[0], scale)
    # Bisection on ω in log space: recrawl spending falls as ω rises.
    for _ in range(70):
        mid = np.sqrt(lo * hi)
        rates = np.where(masks, _best_rates(lam, prof, mu, mid[:, None], rate_max), 0.0)
        over = rates.sum(axis=1) > spare
        lo = np.where(over, mid, lo)
        hi = np.where(over, hi, mid)
    rates = np.where(masks, _best_rates(lam, prof, mu, hi[:, None], rate_max), 0.0)
    # Spend what the bisection left (U rises in r) in proportion: still feasible.
    total = rates.sum(axis=1, keepdims=True)
    rates = np.where(total > 0, rates * (spare[:, None] / np.where(total > 0, total, 1.0)), rates)
    return np.sum(np.where(masks, utility(lam, prof, mu, rates), 0.0), axis=1)
