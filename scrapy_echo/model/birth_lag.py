"""Pages already alive when a page-view log starts: their interest curves fitted with an
unknown birth, so Wang et al. (2008)'s temporal test ``Φ(n) > q`` is still decided for them
(docs/how-it-works.rst, "Ranking sites by how temporal they are").

A page with a view in the log's first bin was born some unknown lag ``d >= 0`` before the log
started; its views before the log are unseen. For each lag on a grid ``0, ½, 1, 2, 4, ...``
bins up to ``max_lag``, the page's bins are ``d + k + ½`` bins old and the interest curve is
fitted to the views in the log's bins alone: a lognormal density taken at the bin midpoints
and normalised over the log's bins, so the views cut off at *both* ends (before the log and
after it) are filled in by the curve, not counted as zero. That is an exponential family in
``(ln age, ln² age)``, so the fit is a concave maximum likelihood, solved by damped Newton
steps for every page at once. The lags whose log-likelihood lies within ``χ²₁(0.95)/2 = 1.92``
of the best are the plausible births (a profile-likelihood interval); the page is temporal if
the test says so at every plausible lag, untemporal if at none, and left out as
``birth_unknown`` (counted) when the plausible births disagree. Where the best fit at a lag
has an ``ln² age`` weight ``>= 0`` (no lognormal), the lognormal's best lies at the family's
edge, ``σ -> ∞`` with ``µ/σ²`` fitted: ``µ + σ z_q -> -∞`` (temporal) for views falling with
age there, ``+∞`` (untemporal) for views rising.

The views are treated as draws of the page's interest time, as in
:func:`scrapy_echo.model.temporal_sites.fit_interest_curves`, so a page with many views has a
narrow interval of births.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.temporal_sites import (
    MIN_VIEWS,
    N_DAYS,
    QUANTILE,
    BoolArray,
    IntArray,
    InterestCurves,
    TemporalPages,
    classify_pages,
)

# Half a χ² quantile with one degree of freedom at 95%: the profile-likelihood interval.
LIKELIHOOD_DROP = 1.92
BIRTH_UNKNOWN = "birth_unknown"
_ITERATIONS = 80  # Newton steps; a concave fit converges in well under 30
_HALVINGS = 30
_CELLS = 1 << 22  # pages × bins evaluated at once (32 MiB of float64)


@dataclass(frozen=True)
class BirthLags:
    """Per page alive at the log's start (``pages``) and per lag (``lag``, days before the
    log): the fitted ``mu``, ``sigma`` (``σ = ∞, µ = ±∞`` at the family's edge), the
    log-likelihood, and whether the lag is a plausible birth (``plausible``)."""

    pages: IntArray
    lag: FloatArray
    mu: FloatArray
    sigma: FloatArray
    loglik: FloatArray
    plausible: BoolArray

    def quantile_range(self, z: ArrayLike) -> tuple[FloatArray, FloatArray]:
        """The least and the greatest ``µ + σ z`` over each page's plausible lags, per
        ``z`` (shape ``(pages, len(z))``); ``+inf`` for a lag whose fit does not fall off.
        The test ``Φ(n) > q`` holds at every plausible lag iff the greatest, with
        ``z = z_q``, is below ``ln n``; at none iff the least is not."""
        z = np.atleast_1d(np.asarray(z, dtype=np.float64))
        with np.errstate(invalid="ignore"):
            v = self.mu[:, :, None] + self.sigma[:, :, None] * z[None, None, :]
        # At the family's edge µ dominates σ z (µ grows as σ²): the sign of µ decides.
        edge = np.isinf(self.sigma)[:, :, None]
        v = np.where(edge, self.mu[:, :, None], v)
        keep = self.plausible[:, :, None]
        lo = np.where(keep, v, np.inf).min(axis=1)
        hi = np.where(keep, v, -np.inf).max(axis=1)
        return lo, hi


def lag_grid(max_lag: float, bin_days: float) -> FloatArray:
    """``0, ½, 1, 2, 4, ...`` bins, in days, up to ``max_lag`` days (which ends the grid).

    >>> lag_grid(5.0, 1.0).tolist()
    [0.0, 0.5, 1.0, 2.0, 4.0, 5.0]
    """
    if not (math.isfinite(max_lag) and max_lag >= 0):
        raise ValueError(f"max_lag ({max_lag!r}) must be a finite number of days >= 0")
    if not (math.isfinite(bin_days) and bin_days > 0):
        raise ValueError(f"bin_days ({bin_days!r}) must be a finite number > 0")
    lags = [0.0]
    step = 0.5 * bin_days
    while step < max_lag:
        lags.append(step)
        step *= 2
    if max_lag > 0:
        lags.append(max_lag)
    return np.array(lags)


def fit_birth_lags(
    page: ArrayLike,
    t: ArrayLike,
    views: ArrayLike,
    curves: InterestCurves,
    *,
    bin_days: float = 1.0,
    max_lag: float | None = None,
    min_views: float = MIN_VIEWS,
) -> BirthLags:
    """Fit the pages of ``curves`` alive at the log's start at every lag of
    :func:`lag_grid`; ``page, t, views`` and ``bin_days`` are the rows and bin width
    ``curves`` was fitted from. ``max_lag`` (days; default the log's length): the earliest
    birth considered, before the log. Pages with fewer than ``min_views`` views are not
    fitted (the test leaves them out).

    Examples
    --------
    Page 0's views fall tenfold a day from the first bin: born at the log's start it is
    temporal, born 16 days before, its curve peaks 12 days old and it is not, and three days
    of views cannot tell the two apart, so its births stay undecided. Page 1's views stay
    level for a month: untemporal at its one plausible birth.

    >>> p, t, v = [0, 0, 0, 1, 1, 1, 2], [0, 1, 2, 0, 10, 20, 29], [1000, 100, 10, 300, 280, 310, 0]
    >>> from scrapy_echo.model.temporal_sites import fit_interest_curves
    >>> c = fit_interest_curves(p, t, v)
    >>> fits = fit_birth_lags(p, t, v, c, max_lag=16)
    >>> fits.lag.tolist(), fits.mu[0].round(2).tolist()
    ([0.0, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0], [-0.44, -0.08, 0.18, 0.56, 1.08, 1.74, 2.49])
    >>> fits.plausible.sum(axis=1).tolist()
    [7, 1]
    >>> classes = classify_with_birth_lags(c, fits)
    >>> classes.classified.tolist(), classes.temporal.tolist(), classes.left_out["birth_unknown"]
    ([False, True, False], [False, False, False], 1)
    """
    page = np.asarray(page)
    t, views = np.asarray(t, dtype=np.float64), np.asarray(views, dtype=np.float64)
    if page.shape != t.shape or t.shape != views.shape or page.ndim != 1:
        raise ValueError("page, t and views must be 1-d arrays of one length")
    # Pages the test leaves out for too few views are not worth the fit (most of the cost).
    alive = np.flatnonzero(curves.alive_at_start & (curves.views >= min_views)).astype(np.intp)
    span = float(np.nanmax(curves.observed)) if alive.size else 0.0  # the log's length
    lags = lag_grid(span if max_lag is None else max_lag, bin_days)
    shape = (alive.size, lags.size)
    mu, sigma, loglik = np.full(shape, np.nan), np.full(shape, np.nan), np.full(shape, -np.inf)
    if alive.size:
        # The bins of fit_interest_curves, with its tolerance for a row at a bin's start.
        k = np.floor((t - t.min()) / bin_days + 1e-9).astype(np.intp)
        bins = round(span / bin_days)
        row = np.full(curves.views.size, -1, np.intp)
        row[alive] = np.arange(alive.size)
        take = (views > 0) & (row[page] >= 0)
        r, k, w = row[page[take]], k[take], views[take]
        total = np.asarray(np.bincount(r, weights=w, minlength=alive.size), dtype=np.float64)
        for g, lag in enumerate(lags.tolist()):
            age = lag + (np.arange(bins) + 0.5) * bin_days
            mu[:, g], sigma[:, g], loglik[:, g] = _fit(np.log(age), r, k, w, total)
    plausible = loglik >= loglik.max(axis=1, initial=-np.inf, keepdims=True) - LIKELIHOOD_DROP
    return BirthLags(alive, lags, mu, sigma, loglik, plausible & np.isfinite(loglik))


def _fit(
    x: FloatArray, r: IntArray, k: IntArray, w: FloatArray, total: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """µ, σ and log-likelihood per page for one lag: ``x`` the log ages of the bins, rows
    ``(r, k, w)`` (page, bin, views), ``total`` views per page."""
    # Standardised statistics keep the 2×2 Newton systems well conditioned.
    centre, scale = float(x.mean()), float(x.std()) or 1.0
    s = (x - centre) / scale
    stats = np.stack([s, s * s])  # (2, bins)
    base = -x  # the lognormal's 1/age, per bin
    with np.errstate(invalid="ignore", divide="ignore"):
        sums = np.stack(
            [np.bincount(r, weights=w * stats[j][k], minlength=total.size) for j in (0, 1)]
        )
        mean: FloatArray = np.asarray((sums / total).T, dtype=np.float64)  # (pages, 2)
    data_base = np.bincount(r, weights=w * base[k], minlength=total.size)
    theta = np.zeros((total.size, 2))
    step = max(1, _CELLS // max(1, x.size))
    for lo in range(0, total.size, step):
        part = slice(lo, lo + step)
        theta[part] = _newton(mean[part], stats, base)
    # An optimum with ln² age weight >= 0 is no lognormal: the lognormal's best is then at
    # the family's edge, σ -> ∞ with µ/σ² fixed, a power of age fitted on ln age alone.
    edge = theta[:, 1] >= 0
    if edge.any():
        theta[edge, 1] = 0.0
        theta[edge, :1] = _newton(mean[edge, :1], stats[:1], base)
    log_z, _, _ = _moments(theta, stats, base)
    loglik = total * (np.einsum("ij,ij->i", theta, mean) - log_z) + data_base
    # Back from the standardised statistics: exponent η1 ln t + η2 ln² t.
    eta2 = theta[:, 1] / scale**2
    eta1 = theta[:, 0] / scale - 2 * centre * eta2
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.where(edge, np.inf, -0.5 / eta2)
        # At the edge µ = η1 σ² -> ±∞: all the interest at birth (η1 < 0), or none ever.
        mu = np.where(edge, np.where(eta1 < 0, -np.inf, np.inf), eta1 * var)
    good = total > 0
    return (
        np.where(good, mu, np.nan),
        np.where(good, np.sqrt(var), np.nan),
        np.where(good, loglik, -np.inf),
    )


def _moments(
    theta: FloatArray, stats: FloatArray, base: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Log-normaliser, mean ``(d,)`` and covariance ``(d, d)`` of the statistics per row."""
    e = theta @ stats + base  # (rows, bins)
    top = e.max(axis=1, keepdims=True)
    p = np.exp(e - top)
    z = p.sum(axis=1)
    d = stats.shape[0]
    # Every product of two statistics, one matrix product (the statistics are s and s²).
    pairs = [(i, j) for i in range(d) for j in range(i, d)]
    table = np.concatenate([stats, np.stack([stats[i] * stats[j] for i, j in pairs])])
    sums = (p @ table.T) / z[:, None]
    m = sums[:, :d]
    cov = np.empty((theta.shape[0], d, d))
    for k, (i, j) in enumerate(pairs):
        cov[:, i, j] = cov[:, j, i] = sums[:, d + k] - m[:, i] * m[:, j]
    return top[:, 0] + np.log(z), m, cov


def _newton(mean: FloatArray, stats: FloatArray, base: FloatArray) -> FloatArray:
    """Maximise ``θ·mean - log Z(θ)`` per row (concave) by damped Newton steps, from the
    untruncated normal of the data's moments where there is one (fewer steps), else 0."""
    theta = np.zeros_like(mean)
    if mean.shape[1] == 2:
        var = mean[:, 1] - mean[:, 0] ** 2
        start = var > 1e-6
        # exp(θ1 s + θ2 s² + base): the base's slope in s is absorbed into θ1.
        slope = float(np.polyfit(stats[0], base, 1)[0]) if stats.shape[1] > 1 else 0.0
        theta[start, 1] = -0.5 / var[start]
        theta[start, 0] = mean[start, 0] / var[start] - slope
    log_z, m, cov = _moments(theta, stats, base)
    value = np.einsum("ij,ij->i", theta, mean) - log_z
    active = np.ones(mean.shape[0], bool)
    for _ in range(_ITERATIONS):
        grad = mean - m
        active &= np.abs(grad).max(axis=1) > 1e-9
        if not active.any():
            break
        idx = np.flatnonzero(active)
        before = value[idx].copy()
        # A small ridge: when all views sit in one bin the covariance vanishes as θ grows.
        hess = cov[idx] + 1e-12 * np.eye(mean.shape[1])
        delta = np.linalg.solve(hess, grad[idx][:, :, None])[:, :, 0]
        scale = np.ones(idx.size)
        pending = np.ones(idx.size, bool)
        for _ in range(_HALVINGS):
            trial = theta[idx[pending]] + scale[pending, None] * delta[pending]
            t_log_z, t_m, t_cov = _moments(trial, stats, base)
            t_value = np.einsum("ij,ij->i", trial, mean[idx[pending]]) - t_log_z
            better = t_value >= value[idx[pending]] - 1e-13
            rows = idx[pending][better]
            theta[rows], value[rows] = trial[better], t_value[better]
            m[rows], cov[rows] = t_m[better], t_cov[better]
            still = np.flatnonzero(pending)[~better]
            pending[:] = False
            pending[still] = True
            scale[still] *= 0.5
            if not pending.any():
                break
        # No step helps, or it gains next to nothing (a fit running off to a one-bin spike
        # gains ever less): at the optimum as far as the test can see.
        gain = value[idx] - before
        active[idx[pending | (gain < 1e-9)]] = False
    return theta


def classify_with_birth_lags(
    curves: InterestCurves,
    lags: BirthLags,
    *,
    n: float = N_DAYS,
    q: float = QUANTILE,
    min_views: float = MIN_VIEWS,
) -> TemporalPages:
    """:func:`~scrapy_echo.model.temporal_sites.classify_pages`, with the pages alive at the
    log's start judged at their plausible births: ``left_out`` counts those the births
    leave undecided as ``birth_unknown``, and those ``lags`` holds no fit for as
    ``alive_at_start``."""
    classes = classify_pages(curves, n=n, q=q, min_views=min_views, keep_alive_at_start=True)
    temporal, classified = classes.temporal.copy(), classes.classified.copy()
    pages = lags.pages
    # Pages alive at the start without a fit (fitted with a higher min_views): left out.
    unfitted = curves.alive_at_start & classified
    unfitted[pages] = False
    temporal &= ~unfitted
    classified &= ~unfitted
    lo, hi = lags.quantile_range([NormalDist().inv_cdf(q)])
    cut = math.log(n)
    yes, no = hi[:, 0] < cut, lo[:, 0] >= cut
    judged = classified[pages]
    temporal[pages] = judged & yes
    classified[pages] = judged & (yes | no)
    left_out = dict(classes.left_out)
    left_out["alive_at_start"] = int(unfitted.sum())
    left_out[BIRTH_UNKNOWN] = int((judged & ~(yes | no)).sum())
    return TemporalPages(temporal, classified, left_out)
