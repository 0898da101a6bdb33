"""Estimating ``λ, P, μ`` per source (docs/how-it-works.rst, "Estimating the parameters").

- ``λ``: new links found on the last ``k`` crawls of a source divided by the time those crawls
  span (the paper: ``k`` = 7). The first crawl of a source only records what is there.
  Past the paper: that window is shrunk toward the source's own long-run rate (all its crawls,
  fading over ``memory`` seconds). A source worth recrawling every quarter hour has its last
  7 crawls within two hours and two or three new links in them: alone, such a window is off
  by a factor of two as often as not, and the schedule with it.
- ``P, μ``: least squares of ``m_k ≈ P (e^{-μ kΔ} - e^{-μ (k+1)Δ})`` to the average clicks
  per page in each age bin over the pages that bin was observed for (from
  :class:`scrapy_echo.model.estimation.clicks.ClickHistogram`: finished, and after the crawl when
  the feed only logs clicks from then on), weighted by the pages behind each bin. For a fixed
  ``μ`` the best ``P`` is closed form, so the fit is a one-dimensional search over ``log μ``,
  vectorised over all sources: a grid, then golden-section refinement around the best grid
  point. No step size to tune.
- Priors and the cold start: :mod:`scrapy_echo.model.estimation.priors`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scrapy_echo.model.intervals.curves import FloatArray

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class DecayFit:
    """``P, μ`` per source; NaN and ``fitted == False`` where there was no data."""

    profit: FloatArray
    decay: FloatArray
    pages: FloatArray  # pages behind the fit (the most behind any one bin)
    residual: FloatArray
    fitted: NDArray[np.bool_]


def fit_profit_decay(
    increments: ArrayLike,
    pages: ArrayLike,
    *,
    bin_width: float = 1200.0,
    decay_min: float = 1e-7,
    decay_max: float = 1e-1,
    grid: int = 48,
    refine: int = 16,
    min_coverage: float = 0.1,
    cumulative: bool = False,
) -> DecayFit:
    """Fit ``m_k ≈ P (e^{-μ kΔ} - e^{-μ (k+1)Δ})`` per source by weighted least squares.

    Parameters
    ----------
    increments : array_like, shape (sources, bins)
        Mean clicks per page at ages ``[kΔ, (k+1)Δ)`` (``Δ = bin_width``).
    pages : array_like, shape (sources, bins)
        Pages behind each mean (the weights; 0 ignores the bin: not observed).
    bin_width : float
        Seconds per bin.
    decay_min, decay_max : float
        Range searched for ``μ`` (1/s). Clicks as frequent at the end of the horizon as at
        its start fit at ``decay_min``; clicks all in the first bin at ``decay_max``.
    grid, refine : int
        Points of the log-spaced grid, and golden-section steps around its best point.
    min_coverage : float
        Least share of a page's clicks the fitted curve may put in the bins that were
        observed. Below it ``P`` is mostly extrapolation: from a flat stretch (tiny ``μ``) or
        from late bins alone when the early ones went unobserved (huge ``μ``); one noisy bin
        would then set ``P`` at any value. A source with no ``μ`` that covers that share is
        left unfitted (its prior stands).
    cumulative : bool
        ``increments`` holds cumulative means instead, ``c_k ≈ P (1 - e^{-μ (k+1)Δ})`` (valid
        only when every bin from age 0 was observed).

    Examples
    --------
    >>> t = 1200.0 * np.arange(73)
    >>> m = 8.0 * -np.diff(np.exp(-1e-4 * t))
    >>> fit = fit_profit_decay(m[None, :], np.full((1, 72), 50))
    >>> round(float(fit.profit[0]), 3), round(float(fit.decay[0]) * 1e4, 3)
    (8.0, 1.0)
    """
    c = np.atleast_2d(np.asarray(increments, dtype=np.float64))
    w = np.atleast_2d(np.asarray(pages, dtype=np.float64))
    if c.shape != w.shape:
        raise ValueError(f"increments and pages must have one shape, got {c.shape} and {w.shape}")
    if not (np.isfinite(c) | (w == 0)).all() or (c < 0).any() or (w < 0).any():
        raise ValueError("increments and pages must be finite and >= 0 where pages > 0")
    if not 0 <= min_coverage < 1:
        raise ValueError(f"min_coverage must be in [0, 1), got {min_coverage!r}")
    if not 0 < decay_min < decay_max:
        raise ValueError(f"need 0 < decay_min < decay_max, got {decay_min!r}, {decay_max!r}")
    c = np.where(w > 0, c, 0.0)
    fitted = w.sum(axis=1) > 0
    sources = c.shape[0]
    # Only sources with data are fitted (early in a crawl, most have none).
    c, w = c[fitted], w[fitted]
    starts = bin_width * np.arange(c.shape[1])  # bin k covers ages [kΔ, (k+1)Δ)
    wc = w * c
    wcc = (wc * c).sum(axis=1)
    seen = (w > 0).astype(np.float64)

    def sse(log_mu: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Residual and best ``P`` per source for per-source ``log μ`` (``inf`` where the
        curve covers too little of the observed bins)."""
        h = shares(np.exp(log_mu))
        a = (wc * h).sum(axis=-1)
        b = (w * h * h).sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            best = np.where(b > 0, a / b, 0.0)
        covered = coverage_each(h) >= min_coverage
        return np.where(covered, wcc - best * a, np.inf), best

    def shares(mu: FloatArray) -> FloatArray:
        if cumulative:  # share of clicks by the end of each bin
            return -np.expm1(-np.asarray(mu)[..., None] * (starts + bin_width))
        return _bin_shares(mu, starts, bin_width)

    # Share of a page's clicks a curve puts in what was observed: the sum of its observed
    # bins, or, for cumulative curves (which only grow), its value at the last observed bin.
    last = seen.shape[1] - 1 - np.argmax(seen[:, ::-1], axis=1)
    rows = np.arange(seen.shape[0])

    def coverage_each(h: FloatArray) -> FloatArray:
        """Per source, for its own curve ``h[source]``."""
        covered: FloatArray = h[rows, last] if cumulative else (seen * h).sum(axis=-1)
        return covered

    def coverage_grid(h: FloatArray) -> FloatArray:
        """Per source and grid point, for curves ``h[point]`` shared by all sources."""
        covered: FloatArray = h[:, last].T if cumulative else seen @ h.T
        return covered

    # Grid over log μ, all sources at once: h is (grid, bins), products are (sources, grid).
    logs = np.linspace(math.log(decay_min), math.log(decay_max), grid)
    h = shares(np.exp(logs))
    a = wc @ h.T
    b = w @ (h * h).T
    with np.errstate(invalid="ignore", divide="ignore"):
        residual = wcc[:, None] - np.where(b > 0, a * a / b, 0.0)
    residual = np.where(coverage_grid(h) >= min_coverage, residual, np.inf)
    identifiable = np.isfinite(residual).any(axis=1)
    k = np.argmin(residual, axis=1)
    lo = logs[np.maximum(k - 1, 0)]
    hi = logs[np.minimum(k + 1, grid - 1)]
    # Golden section on [lo, hi] per source (the residual is unimodal near its grid minimum).
    c_pt = hi - _GOLDEN * (hi - lo)
    d_pt = lo + _GOLDEN * (hi - lo)
    fc, _ = sse(c_pt)
    fd, _ = sse(d_pt)
    for _ in range(refine):
        left = fc < fd  # the minimum lies in [lo, d]
        hi = np.where(left, d_pt, hi)
        lo = np.where(left, lo, c_pt)
        fresh = np.where(left, hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo))
        f_fresh, _ = sse(fresh)
        c_pt, d_pt = np.where(left, fresh, d_pt), np.where(left, c_pt, fresh)
        fc, fd = np.where(left, f_fresh, fd), np.where(left, fc, f_fresh)
    log_mu = 0.5 * (lo + hi)
    res, best = sse(log_mu)
    best = np.maximum(best, 0.0)
    best = np.where(identifiable, best, np.nan)
    profit = np.full(sources, np.nan)
    decay = np.full(sources, np.nan)
    residual = np.full(sources, np.nan)
    pages_behind = np.zeros(sources)
    profit[fitted] = best
    # No clicks at all: worthless as far as we know, and the decay is anybody's guess.
    decay[fitted] = np.where(best > 0, np.exp(log_mu), np.nan)
    residual[fitted] = np.where(identifiable, np.maximum(res, 0.0), np.nan)
    pages_behind[fitted] = np.where(identifiable, w.max(axis=1), 0.0)
    fitted[fitted] = identifiable
    return DecayFit(profit, decay, pages_behind, residual, fitted)


def _bin_shares(mu: FloatArray, starts: FloatArray, width: float) -> FloatArray:
    """Share of a page's clicks in each bin, ``e^{-μ s} (1 - e^{-μΔ})``, shape ``(*mu, bins)``."""
    mu = np.asarray(mu)[..., None]
    return np.exp(-mu * starts) * -np.expm1(-mu * width)
