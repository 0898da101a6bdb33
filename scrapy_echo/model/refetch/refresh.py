"""When to fetch a page again that may change after publication (corrections, live blogs):
the cost-optimal refresh of Ford, Grimes and Tassone, *Keeping a search engine index fresh*
(Ford et al.; docs/how-it-works.rst, "Refreshing pages that change").

A page changes as a Poisson process with mean period ``Δ`` (rate ``λ = 1/Δ``) and is fetched
every ``t = rΔ``. The stored copy matches the live one for a share ``(1 - e^{-r})/r`` of the
time (:func:`freshness`), so with ``C_c`` per fetch and ``C_s`` per unit of time stale the
cost per unit of time is

    C(r) = (1 - (1 - e^{-r})/r) C_s + C_c / (rΔ)                     (expected_cost_per_hour)

Setting ``dC/dr = 0`` and multiplying by ``r²`` gives ``1 - (1 + r) e^{-r} = C_c/(C_s Δ)``:
``r* = g⁻¹(C_c/(C_s Δ))`` with ``g`` of :mod:`scrapy_echo.model.intervals.curves`, and no finite
solution (never refresh) once ``C_c ≥ C_s Δ``. For long ``Δ``, ``t* ≈ √(2ΔC_c/C_s)``.

Risk (the paper's Sec. 5.3): ``Δ`` is estimated, and an overestimate leaves the page stale far
longer than the known-``Δ`` schedule ever would. ``λ̂`` is the mode of the group's likelihood
times the prior, and ``I = λ̂²J`` its curvature there (``J``: minus the second derivative of
the log-likelihood; :class:`scrapy_echo.model.refetch.change_rates.RateEstimate`). The Gamma density
with that mode and curvature has shape ``I + 1`` and rate ``I/λ̂``: it is the posterior
exactly when every change was seen in an interval much shorter than ``Δ`` (changes counted as
Poisson events), and it keeps the right skew a normal in ``log λ`` misses (with the
pseudo-points alone the normal puts ``P(λ > 2λ̂)`` at 0.24, the truth is 0.41).
:func:`underestimate_risk` and :func:`very_stale_share` follow from it, and from the latter
:func:`conservative_shrink`, the paper's "more conservative ratio" (Sec. 6) for a young estimate.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from scrapy_echo.model.intervals.curves import FloatArray, g_inv

SHORTEST_REFRESH = 300.0  # seconds: below this a refresh lane is polling, not refreshing
LONGEST_REFRESH = 30 * 86400.0  # seconds: a page that "never" pays is still looked at monthly
_SERIES_R = 1e-4  # below this 1 - (1 - e^{-r})/r cancels; its series to r³ is exact
_NODES = 128  # midpoints over log(Δ̂/Δ) > 0 for very_stale_share (4e-4 relative)
_NO_INFORMATION = 1e-9  # below this very_stale_share is 1 to within about this much
_BISECTIONS = 20  # of log(shrink) over log(1/LEAST_SHRINK): the shrink within 1e-5
# The paper's very stale intervals were 9.1% of all under estimation (1000 h) and none with Δ
# known; a lane keeps its young groups' share at most this by refreshing them sooner.
VERY_STALE_BOUND = 0.05
LEAST_SHRINK = 1e-3  # below this shrink the floor SHORTEST_REFRESH is what bounds a page
_erfc = np.vectorize(math.erfc, otypes=[np.float64])
_lgamma = np.vectorize(math.lgamma, otypes=[np.float64])


def _array(name: str, value: ArrayLike, *, low: float, strict: bool) -> FloatArray:
    """``value`` as float64, or ``ValueError`` naming it if NaN or below ``low``."""
    out = np.asarray(value, dtype=np.float64)
    bad = np.isnan(out) | ((out <= low) if strict else (out < low))
    if bad.any():
        rule = ">" if strict else ">="
        raise ValueError(f"{name} must be {rule} {low:g}, got {out[bad].ravel()[0]!r}")
    return out


def freshness(r: ArrayLike) -> FloatArray:
    """``E(match) = (1 - e^{-r})/r``: the share of time a page fetched every ``rΔ`` is fresh.

    >>> freshness([0.0, 1.0, np.inf]).round(6).tolist()
    [1.0, 0.632121, 0.0]
    """
    r = _array("r", r, low=0.0, strict=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(r > 0, -np.expm1(-r) / r, 1.0)
    return np.where(np.isinf(r), 0.0, out)


def _staleness(r: FloatArray) -> FloatArray:
    """``1 - freshness(r)`` without the cancellation near ``r = 0``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = (r + np.expm1(-r)) / r
    series = r * (0.5 - r * (1.0 / 6.0 - r / 24.0))
    return np.where(np.isinf(r), 1.0, np.where(r < _SERIES_R, series, direct))


def expected_cost_per_hour(
    r: ArrayLike, delta: ArrayLike, crawl_cost: ArrayLike, stale_cost: ArrayLike
) -> FloatArray:
    """The paper's ``C(r) = (1 - (1 - e^{-r})/r) C_s + C_c/(rΔ)``, per unit of time.

    The unit is that of ``delta`` and of ``stale_cost`` (cost of one unit of time stale):
    hours in the paper. ``r = 0`` costs ``inf`` (unless fetching is free), ``r = inf`` costs
    ``C_s``.

    >>> round(float(expected_cost_per_hour(1 / 3, 24.0, 1.0, 1.0)), 4)  # the paper's Fig. 1
    0.2746
    """
    r = _array("r", r, low=0.0, strict=False)
    delta = _array("delta", delta, low=0.0, strict=True)
    crawl = _array("crawl_cost", crawl_cost, low=0.0, strict=False)
    stale = _array("stale_cost", stale_cost, low=0.0, strict=False)
    with np.errstate(divide="ignore", invalid="ignore"):
        fetching = np.where(crawl > 0, crawl / (r * delta), 0.0)
    out: FloatArray = _staleness(r) * stale + fetching
    return out


def optimal_ratio(delta: ArrayLike, crawl_cost: ArrayLike, stale_cost: ArrayLike) -> FloatArray:
    """``r* = t*/Δ`` minimising :func:`expected_cost_per_hour`: the root of
    ``1 - (1 + r) e^{-r} = C_c/(C_s Δ)``; ``inf`` (never refresh) where ``C_c ≥ C_s Δ``.

    ``stale_cost`` must be > 0 (staleness that costs nothing is never worth a fetch).

    >>> optimal_ratio([24.0, 24.0, 1.0], 1.0, [1.0, 4.0, 1.0]).round(4).tolist()
    [0.3208, 0.1518, inf]
    """
    delta = _array("delta", delta, low=0.0, strict=True)
    crawl = _array("crawl_cost", crawl_cost, low=0.0, strict=False)
    stale = _array("stale_cost", stale_cost, low=0.0, strict=True)
    if np.isinf(crawl).any() or np.isinf(stale).any():
        raise ValueError("crawl_cost and stale_cost must be finite")
    z = crawl / (stale * delta)  # Δ = inf gives 0: a page that never changes
    return g_inv(np.atleast_1d(z)).reshape(z.shape)


def refresh_interval(
    delta: ArrayLike,
    crawl_cost: ArrayLike,
    stale_cost: ArrayLike,
    *,
    shortest: float = SHORTEST_REFRESH,
    longest: float = LONGEST_REFRESH,
    shrink: ArrayLike = 1.0,
) -> FloatArray:
    """``t* = r*Δ``, times ``shrink``, clipped to ``[shortest, longest]``.

    ``shrink < 1`` is the paper's "more conservative ratio" for a young estimate (from
    :func:`conservative_shrink` in the refresh lane). Never-refresh pages
    (``C_c ≥ C_s Δ``, or ``Δ = inf``) get ``longest``.

    >>> refresh_interval([24.0, 1.0, 1e4], 1.0, 1.0, shortest=2.0, longest=100.0).round(2)
    array([  7.7, 100. , 100. ])
    """
    if not 0 <= shortest <= longest:
        raise ValueError(f"need 0 <= shortest <= longest, got {shortest!r}, {longest!r}")
    shrink = _array("shrink", shrink, low=0.0, strict=True)
    delta = _array("delta", delta, low=0.0, strict=True)
    r = optimal_ratio(delta, crawl_cost, stale_cost)
    crawl = np.broadcast_to(np.asarray(crawl_cost, dtype=np.float64), r.shape)
    with np.errstate(invalid="ignore"):
        t = r * delta  # 0 * inf where Δ = inf: the limit √(2ΔC_c/C_s) is inf, or 0 if free
    t = np.where(np.isinf(delta), np.where(crawl > 0, np.inf, 0.0), t)
    return np.clip(t * shrink, shortest, longest)


def underestimate_risk(information: ArrayLike, *, factor: float = 2.0) -> FloatArray:
    """Probability that the true change rate exceeds ``factor`` times the estimate ``λ̂``.

    ``λ/λ̂ ~ Gamma(I + 1, rate I)`` (module docstring), so the risk is ``P(G > kI)`` for
    ``G ~ Gamma(I + 1)``, by the Wilson-Hilferty cube-root normal (within 0.003 of it down
    to ``I = 1``). ``I`` is about the number of changes seen (each at most 1, about 1 when its
    interval is much shorter than ``Δ``). ``I = 0`` (no change, or eq. 2 had no root):
    nothing bounds the rate, risk 1.

    >>> underestimate_risk([0.0, 1.0, 10.0, np.inf]).round(3).tolist()
    [1.0, 0.407, 0.011, 0.0]
    """
    if not (math.isfinite(factor) and factor > 1):
        raise ValueError(f"factor must be a finite number > 1, got {factor!r}")
    info = _array("information", information, low=0.0, strict=False)
    shape = info + 1.0
    with np.errstate(invalid="ignore"):
        z = (np.cbrt(factor * info / shape) - 1.0 + 1.0 / (9.0 * shape)) * np.sqrt(9.0 * shape)
    z = np.where(np.isinf(info), np.inf, z)
    out: FloatArray = np.where(info > 0, 0.5 * _erfc(z / math.sqrt(2.0)), 1.0)
    return out


def very_stale_share(
    ratio: ArrayLike, information: ArrayLike, *, shrink: ArrayLike = 1.0
) -> FloatArray:
    """Expected share of refresh intervals "very stale" (the paper's Sec. 5.3): stale for at
    least ``rΔ``, the longest a page can be stale when ``Δ`` is known.

    Fetching every ``s·rΔ̂`` (``s = shrink``, the conservative ratio of the paper's Sec. 6), an
    interval is very stale iff the first change comes before ``s·rΔ̂ - rΔ``: probability
    ``1 - exp(-r (sQ - 1))`` for ``Q = Δ̂/Δ = λ/λ̂ > 1/s``, and 0 otherwise, averaged over
    ``Q ~ Gamma(I + 1, rate I)`` (module docstring; midpoint rule over ``log Q > -log s``).
    ``I = 0``: 1, as for :func:`underestimate_risk`.

    >>> very_stale_share(1 / 3, [0.0, 1.0, 10.0, 100.0, np.inf]).round(4).tolist()
    [1.0, 0.2529, 0.0562, 0.0147, 0.0]
    >>> very_stale_share(1 / 3, 1.0, shrink=[1.0, 0.5, 0.25]).round(4).tolist()
    [0.2529, 0.0746, 0.0083]
    """
    r = _array("ratio", ratio, low=0.0, strict=True)
    if np.isinf(r).any():
        raise ValueError("ratio must be finite (a page never refreshed has no intervals)")
    info = _array("information", information, low=0.0, strict=False)
    s = _array("shrink", shrink, low=0.0, strict=True)
    if (s > 1).any():
        raise ValueError(f"shrink must be in (0, 1], got {s[s > 1].ravel()[0]!r}")
    r, info, s = np.broadcast_arrays(r, info, s)
    live = (info > _NO_INFORMATION) & np.isfinite(info)
    a = np.where(live, info, 1.0)[..., None]
    shape = a + 1.0
    # Q's mean is 1 + 1/I: up to ~12 standard deviations past it, however small I is.
    top = np.log(shape + 12.0 * np.sqrt(shape) + 40.0) - np.log(a)
    low = -np.log(s)[..., None]  # only Q > 1/s can leave a page very stale
    step = np.maximum(top - low, 0.0) / _NODES  # (0: 1/s is past the tail, share 0)
    y = low + (np.arange(_NODES) + 0.5) * step
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.exp(y)
        log_density = shape * (np.log(a) + y) - a * q - _lgamma(shape)  # of log Q
        stale = -np.expm1(-r[..., None] * (s[..., None] * q - 1.0))
        share = (stale * np.exp(log_density) * step).sum(axis=-1)
    out: FloatArray = np.where(live, share, np.where(np.isinf(info), 0.0, 1.0))
    return out


def conservative_shrink(
    ratio: ArrayLike,
    information: ArrayLike,
    *,
    bound: float = VERY_STALE_BOUND,
    least: float = LEAST_SHRINK,
) -> FloatArray:
    """The largest ``s`` in ``[least, 1]`` whose :func:`very_stale_share` at ``ratio`` is at
    most ``bound``: the paper's Sec. 6, "bounding the probability of being overly stale ...
    to choose a more conservative ratio" (it gives no rule; this is the bound made one).

    The share grows with ``s`` (a longer interval leaves a page stale longer), so bisection
    on ``log s`` finds it; the share at the ``s`` returned is at most ``bound`` unless even
    ``least`` cannot bring it there (``I = 0``: nothing bounds the rate). Much information
    leaves ``s`` at 1, the estimate as it stands.

    >>> conservative_shrink(1 / 3, [0.0, 1.0, 10.0, 100.0]).round(3).tolist()
    [0.001, 0.425, 0.972, 1.0]
    >>> conservative_shrink([0.01, 0.1, 1.0], 1.0).round(3).tolist()  # a short ratio risks less
    [1.0, 0.681, 0.316]
    """
    if not (math.isfinite(bound) and 0 < bound < 1):
        raise ValueError(f"bound must be a number in (0, 1), got {bound!r}")
    if not (math.isfinite(least) and 0 < least <= 1):
        raise ValueError(f"least must be a number in (0, 1], got {least!r}")
    r = _array("ratio", ratio, low=0.0, strict=True)
    if np.isinf(r).any():
        raise ValueError("ratio must be finite (a page never refreshed needs no shrink)")
    r, info = np.broadcast_arrays(r, _array("information", information, low=0.0, strict=False))
    lo = np.full(r.shape, math.log(least))  # share(lo) <= bound, or lo = least: taken
    hi = np.zeros(r.shape)
    done = very_stale_share(r, info) <= bound
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        ok = very_stale_share(r, info, shrink=np.exp(mid)) <= bound
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    floor = lo <= math.log(least)  # (least itself, not exp(log(least)) off by rounding)
    out: FloatArray = np.where(done, 1.0, np.where(floor, least, np.exp(lo)))
    return out


__all__ = [
    "LEAST_SHRINK",
    "LONGEST_REFRESH",
    "SHORTEST_REFRESH",
    "VERY_STALE_BOUND",
    "conservative_shrink",
    "expected_cost_per_hour",
    "freshness",
    "optimal_ratio",
    "refresh_interval",
    "underestimate_risk",
    "very_stale_share",
]
