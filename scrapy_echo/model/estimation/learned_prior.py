"""Priors for ``P`` and ``λ`` learned from all the sources (nonparametric empirical Bayes;
docs/how-it-works.rst, "Estimating the parameters").

Shrinking each source's ``P`` toward one pooled value by a fixed weight suits sources that
differ little. They differ a lot: on the default synthetic trace, half are low-quality (a
twentieth of the clicks) and ``P`` spreads over three orders of magnitude, so a low-quality
source with 20 pages and three clicks was pulled to four times its ``P``, and recrawled three
times as often as with its true value (docs/benchmarks.rst). Here the distribution of ``P``
across sources is itself estimated: a weight on each of :data:`GRID_POINTS` values of ``P``
(log-spaced), fitted by EM to every source's clicks (Poisson with mean ``n P`` for ``n``
pages: the nonparametric maximum-likelihood prior, Laird 1978), and each source's ``P`` is its
posterior mean under it. A source with few pages lands in the cluster its clicks point to; one
with many keeps its own ``P``. The plan takes an upper confidence value, the posterior mean
plus :data:`OPTIMISM` standard deviations: the mean alone writes off a source whose first few
pages drew no clicks, and it is never crawled enough to be learned again.

A source's long-run ``λ`` is learned the same way (links Poisson over the seconds crawled,
posterior mean), and its window of recent crawls is shrunk toward that.
"""

from __future__ import annotations

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray

GRID_POINTS = 48
EM_STEPS = 60
MIN_SOURCES = 20  # with fewer sources with pages, no distribution is learned (returns None)
# Most sources the grid's weights are fitted to: beyond, every k-th (by index, so every age
# of source is in), then every source's posterior under those weights. Enough for 48
# weights, and the fit of a 100 k-source crawl's prior takes a sixth of the time.
FIT_SOURCES = 16_384
_WEIGHT_FLOOR = 1e-12
# Standard deviations of the posterior added to its mean in the plan: a source whose ``P``
# rests on a few pages is valued as it may well be, so it is crawled enough to learn it
# (docs/how-it-works.rst, "Exploration"). On the default synthetic trace 2 beat 0 and 1 at
# 0.1 and 0.2 crawls/s and tied at 0.648 (docs/benchmarks.rst).
OPTIMISM = 2.0


def posterior_rates(
    pages: FloatArray, profit: FloatArray, *, optimism: float = 0.0
) -> FloatArray | None:
    """Each source's posterior mean rate given its exposure ``pages`` and observed rate
    ``profit`` (for ``P``: pages and clicks per page; for ``λ``: seconds and links per
    second), under the prior fitted to all of them, plus ``optimism`` posterior standard
    deviations (an upper confidence value: :data:`OPTIMISM`); sources without exposure get
    the prior's mean. ``None`` when fewer than :data:`MIN_SOURCES` sources have exposure, or
    none a count.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> true = np.where(np.arange(400) % 2 == 0, 0.1, 10.0)  # two kinds of source
    >>> pages = np.full(400, 8.0)
    >>> profit = rng.poisson(true * pages) / pages
    >>> post = posterior_rates(pages, profit)
    >>> bool(abs(np.median(post[::2]) - 0.1) < 0.05), bool(abs(np.median(post[1::2]) - 10) < 1)
    (True, True)
    """
    moments = posterior_moments(pages, profit)
    if moments is None:
        return None
    mean, spread = moments
    return mean + optimism * spread if optimism else mean


def posterior_moments(
    pages: FloatArray, profit: FloatArray
) -> tuple[FloatArray, FloatArray] | None:
    """Each source's posterior mean and standard deviation, as :func:`posterior_rates` takes
    them (sources without exposure: the prior's mean, and a spread of 0); ``None`` as there."""
    pages = np.asarray(pages, dtype=np.float64)
    profit = np.asarray(profit, dtype=np.float64)
    has = (pages > 0) & np.isfinite(profit) & (profit >= 0)
    if int(has.sum()) < MIN_SOURCES:
        return None
    n, clicks = pages[has], pages[has] * profit[has]
    pooled = float(clicks.sum() / n.sum())
    if not pooled > 0:
        return None
    top = float(profit[has].max())
    grid = np.geomspace(pooled * 1e-4, max(top, pooled) * 2.0, GRID_POINTS)
    # Poisson log-likelihood of each source's clicks at each grid value (constants dropped).
    loglik = clicks[:, None] * np.log(grid)[None, :] - n[:, None] * grid[None, :]
    loglik -= loglik.max(axis=1, keepdims=True)
    likelihood = np.exp(loglik)
    # EM for the grid's weights, in matrix-vector products: a source's posterior over the
    # grid is its likelihood row times the weights over their dot product, so the mean of
    # the posteriors is the weights times ``likelihood.T @ (1 / dot)`` over the sources (no
    # sources x grid temporary per step: 6x faster at 100 k sources).
    weights = np.full(GRID_POINTS, 1.0 / GRID_POINTS)
    fitted = likelihood
    if fitted.shape[0] > FIT_SOURCES:
        fitted = np.ascontiguousarray(fitted[:: -(-fitted.shape[0] // FIT_SOURCES)])
    sources = fitted.shape[0]
    for _ in range(EM_STEPS):
        weights = weights * (fitted.T @ (1.0 / (fitted @ weights))) / sources
    if fitted is not likelihood:
        # A source left out of the fit may be unlike every source in it, where the weights
        # fell to nothing: a floor keeps its posterior defined (near its own rate).
        weights = np.maximum(weights, _WEIGHT_FLOOR)
        weights /= weights.sum()
    dot = likelihood @ weights
    posterior = (likelihood @ (weights * grid)) / dot
    second = (likelihood @ (weights * grid**2)) / dot
    mean = np.full(pages.size, float(weights @ grid))
    mean[has] = posterior
    spread = np.zeros(pages.size)
    spread[has] = np.sqrt(np.maximum(second - posterior**2, 0.0))
    return mean, spread


__all__ = ["FIT_SOURCES", "GRID_POINTS", "OPTIMISM", "posterior_moments", "posterior_rates"]
