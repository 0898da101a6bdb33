"""``λ`` from crawls whose counts may be floors: a Poisson rate with right-censored counts.

A crawl of a hub that overflowed (:mod:`scrapy_echo.model.estimation.overflow`) found ``n`` new
links where ``N ≥ n`` came: Ford et al.'s incomplete observations, here as counts rather than
changed or not (Ford, Grimes, Tassone; docs/how-it-works.rst, "Hubs that show only their latest
links"). The maximum-likelihood rate over a source's window solves

    Σ_complete (n_j - λ t_j) + Σ_floors (E[N_j | N_j ≥ n_j; λ t_j] - λ t_j) = 0,

by bisection on ``log λ`` between the plain rate and :data:`MAX_RAISE` times it (the left
side falls as ``λ`` grows: ``E[N | N ≥ n; Λ] - Λ`` shrinks as the floor matters less). When
every crawl in a window is a floor the likelihood grows without bound (any rate above ``n/t``
explains them): the rate is then held at the cap, a floor the report flags as such.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray

MAX_RAISE = 4.0  # at most this many times the plain rate: past it a window cannot tell
# Terms of the series for P(N ≥ n) / p(n - 1): enough up to Λ = n + 6√n + 10 for n ≤ 300;
# past that the floor says nothing (E[N | N ≥ n] = Λ to 1e-8) and no series is summed.
_TERMS = 160
_FAR = 6.0


def mean_above(floor: FloatArray, expected: FloatArray) -> FloatArray:
    """``E[N | N ≥ floor]`` for ``N ~ Poisson(expected)``, elementwise (``floor >= 1``).

    ``E[N | N ≥ n] = Λ (1 + p(n-1) / P(N ≥ n))`` and ``P(N ≥ n) / p(n-1) = Σ_{j≥1} Λ^j / (n)_j``
    (a rising factorial), summed in logs so that no term overflows.

    >>> round(float(mean_above(np.array([1.0]), np.array([2.0]))[0]), 6)  # 2 / (1 - e^-2)
    2.313035
    """
    n_all = np.asarray(floor, dtype=np.float64)
    lam_all = np.maximum(np.asarray(expected, dtype=np.float64), 1e-300)
    n_all, lam_all = np.broadcast_arrays(n_all, lam_all)
    out: FloatArray = lam_all.astype(np.float64, copy=True)
    near = lam_all < n_all + _FAR * np.sqrt(n_all) + 10.0
    if near.any():
        n, lam = n_all[near][:, None], lam_all[near][:, None]
        logs = np.cumsum(np.log(lam) - np.log(n + np.arange(_TERMS)), axis=1)
        top = logs.max(axis=1, keepdims=True)
        log_ratio = (top + np.log(np.exp(logs - top).sum(axis=1, keepdims=True)))[:, 0]
        out[near] = lam[:, 0] * (1.0 + np.exp(-log_ratio))
    return out


def censored_rate(
    counts: FloatArray, spans: FloatArray, floors: NDArray[np.bool_], *, iterations: int = 30
) -> FloatArray:
    """``λ`` per row from crawl counts over ``spans`` seconds, ``floors`` marking counts that
    are only floors; rows with no span give NaN. Rows with no floor give the plain rate.

    >>> counts = np.array([[2.0, 3.0, 10.0]])
    >>> spans = np.array([[100.0, 100.0, 100.0]])
    >>> plain = float(censored_rate(counts, spans, np.zeros((1, 3), bool))[0])
    >>> aware = float(censored_rate(counts, spans, np.array([[False, False, True]]))[0])
    >>> round(plain, 4), aware > plain
    (0.05, True)
    """
    counts = np.asarray(counts, dtype=np.float64)
    spans = np.asarray(spans, dtype=np.float64)
    floors = np.asarray(floors, dtype=bool) & (counts >= 1)
    total = spans.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        plain = np.where(total > 0, counts.sum(axis=1) / total, np.nan)
    rows = np.flatnonzero(floors.any(axis=1) & (total > 0))
    if not rows.size:
        return plain
    c, s, f = counts[rows], spans[rows], floors[rows]
    complete_links = np.where(f, 0.0, c).sum(axis=1)
    complete_span = np.where(f, 0.0, s).sum(axis=1)

    row, col = np.nonzero(f)  # the floors alone: a window has a few among its crawls

    def score(lam: FloatArray) -> FloatArray:
        """The likelihood's slope times ``λ``: positive below the estimate."""
        expected = lam[row] * s[row, col]
        excess = mean_above(c[row, col], expected) - expected
        floors_excess = np.bincount(row, weights=excess, minlength=lam.size)
        return np.asarray(complete_links - lam * complete_span + floors_excess)

    low = np.log(plain[rows])  # the score is >= 0 here: floors only add
    high = low + np.log(MAX_RAISE)
    capped = score(np.exp(high)) >= 0
    for _ in range(iterations):
        mid = 0.5 * (low + high)
        up = score(np.exp(mid)) > 0
        low, high = np.where(up, mid, low), np.where(up, high, mid)
    out = plain.copy()
    out[rows] = np.where(capped, MAX_RAISE * plain[rows], np.exp(0.5 * (low + high)))
    return out


__all__ = ["MAX_RAISE", "censored_rate", "mean_above"]
