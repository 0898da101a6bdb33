"""``V``, ``M`` and ``W`` of a hub that shows only its latest ``K`` links
(docs/how-it-works.rst, "Planning for hubs that fill up").

ECHO values a crawl of a source after ``τ`` at every link that appeared meanwhile. A hub that
lists only its latest ``K`` links shows at most ``K`` of them: links arrive as a Poisson process
of rate ``λ``, the ``j``-th newest is ``A_j ~ Gamma(j, λ)`` old at the crawl, and is found if
``j ≤ K`` and it appeared after the last crawl (``A_j < τ``). With ``N ~ Poisson(λτ)``,
``C = P(N ≤ K-1)`` and ``S = P(Poisson((λ+μ)τ) ≥ K)``, a crawl after ``τ`` finds

- pages: ``M(τ) = E[min(N, K)] = λτ C + K P(N ≥ K+1)``;
- clicks: ``V(τ) = (λP/μ) (1 - e^{-μτ} C - q^K S)``, ``q = λ/(λ+μ)``;

and the index at which it is due (the stationary point of ``(V - ω(1 + M))/τ``, the value of a
crawl net of its pages' crawls, per second):

``W(τ) = (λP/μ) (g(μτ) + (1 + μτ) e^{-μτ} (1 - C) - q^K S) / (1 + K P(N ≥ K+1))``,

``g(x) = 1 - (1 + x) e^{-x}``. As ``K → ∞`` these are ECHO's own: ``M = λτ``,
``V = (λP/μ)(1 - e^{-μτ})``, ``W = (λP/μ) g(μτ)``.

Numerically: the Poisson sums run only where neither tail is negligible (most of a hub's
``τ`` lie far from ``K/λ``), and a decay too small to tell from none (``μ min(τ, K/λ) <
1e-8``, where the closed forms above cancel) is none (:func:`full_hub_terms`).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray, g_and_exp

# A Poisson tail below e^-40 (4e-18) counts as 0: V, M and W need absolute accuracy only, and
# at most of a hub's τ the links that came are far more or far fewer than K.
_NEGLIGIBLE = 40.0
# The Poisson terms are summed from e^{-m} lifted by up to e^{LIFT} (without, it underflows
# past m = 745); means past 2 LIFT sum theirs from their logarithms.
_LIFT = 700.0
# A decay this small over a found link's age counts as none (see full_hub_terms).
_SLOW = 1e-8


def poisson_below(mean: FloatArray, shows: NDArray[np.int64]) -> tuple[FloatArray, FloatArray]:
    """``P(N ≤ K-1)`` and ``P(N = K)`` for ``N ~ Poisson(mean)``, ``K = shows`` (≥ 1; any
    shape ``mean`` broadcasts to), elementwise, leaving out tails below ``e^-40`` (``4e-18``):
    each sum costs a term per link shown, and only where neither tail is that small.

    >>> below, at = poisson_below(np.array([2.0]), np.array([1]))
    >>> round(float(below[0]), 6), round(float(at[0]), 6)  # e^-2, 2 e^-2
    (0.135335, 0.270671)
    """
    mean = np.asarray(mean, dtype=np.float64)
    k = np.asarray(shows, dtype=np.int64)
    if k.ndim > mean.ndim:
        raise ValueError("shows must broadcast to the shape of mean")
    # Far from K on either side one tail holds all the mass: every term below K, or none.
    below = (mean < k).astype(np.float64)
    at = np.zeros(mean.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_m = np.log(mean)
        # Chernoff's bound on P(N ≥ K) (mean < K) or P(N ≤ K) (mean > K): e^{-m} (e m/K)^K.
        log_bound: FloatArray = log_m * k
        log_bound += k * (1.0 - np.log(k))
        log_bound -= mean
    near = np.flatnonzero(~(log_bound < -_NEGLIGIBLE))  # (NaN stays near, and comes out NaN)
    if near.size:
        k_near = np.broadcast_to(k, mean.shape).reshape(-1)[near]
        sums = _poisson_sums(mean.reshape(-1)[near], log_m.reshape(-1)[near], k_near)
        below.reshape(-1)[near], at.reshape(-1)[near] = sums
    return below, at


def _poisson_sums(
    mean: FloatArray, log_mean: FloatArray, shows: NDArray[np.int64]
) -> tuple[FloatArray, FloatArray]:
    """:func:`poisson_below` of flat arrays (and the means' logarithms), every term summed."""
    # (Stable: numpy sorts 16-bit integers by radix, in one pass.)
    keys = -shows.astype(np.int16) if shows.max() < 2**15 else -shows
    order = np.argsort(keys, kind="stable")
    m, k_of = mean[order], shows[order]  # the largest K first: a shrinking prefix has K > k
    log_m = log_mean[order]
    ends = np.searchsorted(-k_of, -np.arange(int(k_of[0])), side="left").tolist()
    # Each term is the last times m/k, from e^{-m} lifted by e^{lift}: e^{-m} alone underflows
    # past m = 745, and the lift keeps it and the largest term (about e^{lift}) within range.
    lift = np.clip(m - _LIFT, 0.0, _LIFT)
    term = np.exp(lift - m)
    below = np.zeros(m.size)
    for k, n in enumerate(ends):
        if k:
            t = term[:n]
            t *= m[:n]
            t *= 1.0 / k
        below[:n] += term[:n]
    below *= np.exp(-lift)
    huge = np.flatnonzero(m > 2.0 * _LIFT)  # (past the lift's range: a K of a thousand or more)
    if huge.size:
        below[huge] = _sum_by_logs(m[huge], log_m[huge], k_of[huge])
    with np.errstate(invalid="ignore"):
        at = np.exp(k_of * log_m - m - _log_factorial(k_of))
    at[m == 0] = k_of[m == 0] == 0
    out_below, out_at = np.empty(m.size), np.empty(m.size)
    out_below[order], out_at[order] = np.minimum(below, 1.0), at
    return out_below, out_at


def _sum_by_logs(mean: FloatArray, log_mean: FloatArray, shows: NDArray[np.int64]) -> FloatArray:
    """``P(N ≤ K-1)`` each term from its logarithm; ``shows`` from the largest down."""
    ends = np.searchsorted(-shows, -np.arange(int(shows[0])), side="left").tolist()
    below = np.zeros(mean.size)
    for k, n in enumerate(ends):
        below[:n] += np.exp(k * log_mean[:n] - mean[:n] - math.lgamma(k + 1.0))
    return below


def _log_factorial(k: NDArray[np.int64]) -> FloatArray:
    return np.array([math.lgamma(n + 1.0) for n in range(int(k.max(initial=0)) + 1)])[k]


def full_hub_terms(
    link_rate: FloatArray,
    profit: FloatArray,
    decay: FloatArray,
    shows: NDArray[np.int64],
    elapsed: FloatArray,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(V, M, W)`` of crawling each hub ``elapsed`` seconds after its last crawl (see the
    module docstring); ``λ > 0``, ``shows ≥ 1``, all finite; ``μ = 0`` is no decay
    (``V = P M``), and so is a decay too slow to tell from none: where a found link's decay
    ``μ min(τ, K/λ)`` is below ``1e-8`` the closed forms, differences of terms near 1 scaled
    by ``λ/μ``, lose more to rounding (``~1e-16`` over that decay) than leaving it out does.

    >>> lam, p, mu = np.array([1 / 600]), np.array([3.0]), np.array([1e-5])
    >>> v, m, w = full_hub_terms(lam, p, mu, np.array([1000]), np.array([6000.0]))
    >>> round(float(m[0]), 6), round(float(v[0]), 4)  # 1000 shown: ECHO's λτ and value
    (10.0, 29.1177)
    """
    lam = np.asarray(link_rate, dtype=np.float64)
    prof = np.asarray(profit, dtype=np.float64)
    mu = np.asarray(decay, dtype=np.float64)
    tau = np.asarray(elapsed, dtype=np.float64)
    shows = np.asarray(shows, dtype=np.int64)
    # (In place where it can be: FullHubs.of runs this over every hub and grid point.)
    arrivals = lam * tau
    below, at = poisson_below(arrivals, shows)
    above = np.subtract(1.0, below)
    above -= at
    np.maximum(above, 0.0, out=above)  # P(N ≥ K+1)
    cost: FloatArray = above * shows
    pages = arrivals * below
    pages += cost
    cost += 1.0  # 1 + M - τM'
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = mu * tau
        late, _ = poisson_below(arrivals + x, shows)
        # Per hub: λP/μ and q^K, q = λ/(λ + μ) (its logarithm -ln(1 + μ/λ): exact for small μ)
        scale = lam * prof / mu
        q_k = np.exp(shows * -np.log1p(mu / lam))
        g, e = g_and_exp(x)
        tail = np.subtract(1.0, late)
        tail *= q_k  # q^K S
        shown = np.subtract(1.0, below)
        shown *= e  # e^{-μτ} (1 - C)
        value = x * e
        value += g  # 1 - e^{-μτ}, without its cancellation: g(x) + x e^{-x}
        value += shown
        value -= tail
        value *= scale
        index = x * shown
        index += shown
        index += g
        index -= tail
        index *= scale
        index /= cost
    slow = _slow(lam, mu, shows, tau)
    if slow.any():  # No decay: every page found is worth P, and τM' is λτC.
        np.copyto(value, prof * pages, where=slow)
        np.copyto(index, prof * (cost - 1.0) / cost, where=slow)
    return np.maximum(value, 0.0, out=value), pages, np.maximum(index, 0.0, out=index)


def _slow(
    lam: FloatArray, mu: FloatArray, shows: NDArray[np.int64], tau: FloatArray
) -> NDArray[np.bool_]:
    """Where a found link's decay, ``μ min(τ, K/λ)``, is below :data:`_SLOW` (see
    :func:`full_hub_terms`): ``τ < _SLOW/μ``, or anywhere if ``μ K/λ < _SLOW``."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        until = np.where(mu * shows / lam < _SLOW, np.inf, _SLOW / mu)
    return np.asarray(tau < until)


__all__ = ["full_hub_terms", "poisson_below"]
