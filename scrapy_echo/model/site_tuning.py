"""Tuning Wang et al. (2008)'s thresholds and weights from labelled pages, as the paper does
(docs/how-it-works.rst, "Ranking sites by how temporal they are").

The paper tunes in two steps, each on its own measure:

1. ``(n, q)`` of the page test ``Φ(n) > q`` on hand-labelled pages (3,040 of focus.cn), to
   the most *hits* (right either way); its section 5 offers ``Performance = A·hit - B·miss
   - C·false alarm`` instead, which ``weights`` gives (hits alone: ``(1, 0, 0)``).
2. ``α:β`` of the site score to the best *page-level* F of the top ``k`` sites (its 100):
   precision the share of temporal pages among the chosen sites' pages, recall the chosen
   sites' temporal pages over all temporal pages, "temporal" being the pages the test of
   step 1 calls so (its 135,939), not hand labels.

Step 1 depends on the page fits only through ``v = µ + σ z_q`` (the test is ``v < ln n``), so
the fits are made once and the whole grid is one comparison per ``q``; a page alive at the
log's start gives the least and greatest ``v`` over its plausible births
(:mod:`scrapy_echo.model.birth_lag`). A labelled page the test cannot judge at a grid point
(too few views, seen less than ``n`` days, births undecided) is no hit there. Step 2 scores
every site once per ``α``: the shares do not depend on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike

from scrapy_echo.model.birth_lag import BirthLags, classify_with_birth_lags
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.temporal_sites import (
    ALPHA,
    MIN_SITE_PAGES,
    MIN_VIEWS,
    N_DAYS,
    QUANTILE,
    BoolArray,
    IntArray,
    InterestCurves,
    TemporalPages,
    classify_pages,
    prf,
    score_sites,
)

# The grids: n in days around the paper's 3, q in steps of 0.05, α in steps of 0.05 (3:2 on it).
N_GRID = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0, 10.0, 14.0)
Q_GRID = tuple(round(0.05 * i, 2) for i in range(2, 20))
ALPHA_GRID = tuple(round(0.05 * i, 2) for i in range(21))
TOP_SITES = 100  # the paper's seed list
HITS = (1.0, 0.0, 0.0)  # Performance weights A, B, C that count hits alone


@dataclass(frozen=True)
class ThresholdFit:
    """The best ``(n, q)`` on the labelled pages, its counts, and the whole grid's
    Performance (``performance[i, j]`` at ``q_grid[i], n_grid[j]``)."""

    n: float
    q: float
    hits: int
    misses: int
    false_alarms: int
    unjudged: int
    performance: FloatArray


@dataclass(frozen=True)
class Tuned:
    """The tuned triple and the paper's page-level measure of its top ``top`` sites."""

    n: float
    q: float
    alpha: float
    beta: float
    f: float
    precision: float
    recall: float
    thresholds: ThresholdFit
    f_by_alpha: FloatArray


def _check_grid(name: str, values: ArrayLike, low: float, high: float) -> FloatArray:
    grid = np.asarray(values, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all((grid > low) & (grid < high)):
        raise ValueError(f"{name} must be a non-empty 1-d grid of values in ({low}, {high})")
    return grid


def tune_thresholds(
    curves: InterestCurves,
    labelled: ArrayLike,
    temporal: ArrayLike,
    *,
    birth_lags: BirthLags | None = None,
    n_grid: ArrayLike = N_GRID,
    q_grid: ArrayLike = Q_GRID,
    min_views: float = MIN_VIEWS,
    weights: tuple[float, float, float] = HITS,
) -> ThresholdFit:
    """The ``(n, q)`` maximising ``A·hit - B·miss - C·false alarm`` over the labelled pages
    (``labelled`` page indices, ``temporal`` their labels); ties go to the point nearest the
    paper's ``(3, 0.7)`` (``|q - 0.7| + |ln(n/3)|``), then to the smallest ``q`` and ``n``.
    Pages alive at the log's start are judged through ``birth_lags`` (without them, never).

    Medians ``e^µ`` of a third of a day and of seven days; at ``n = 30`` both are temporal:

    >>> one, two = np.ones(2), np.zeros(2, bool)
    >>> c = InterestCurves(50 * one, one, np.array([-1.1, 2.0]), one, 30 * one, two)
    >>> fit = tune_thresholds(c, [0, 1], [True, False], n_grid=[0.25, 1, 30], q_grid=[0.5])
    >>> fit.n, fit.q, fit.hits, fit.false_alarms, fit.performance.tolist()
    (1.0, 0.5, 2, 0, [[1.0, 2.0, 1.0]])
    """
    n_values = _check_grid("n_grid", n_grid, 0.0, math.inf)
    q_values = _check_grid("q_grid", q_grid, 0.0, 1.0)
    pages = np.asarray(labelled, dtype=np.intp)
    truth = np.asarray(temporal, dtype=bool)
    if pages.ndim != 1 or pages.shape != truth.shape:
        raise ValueError("labelled and temporal must be 1-d arrays of one length")
    if pages.size and (pages.min() < 0 or pages.max() >= curves.views.size):
        raise ValueError(f"labelled pages must lie in [0, {curves.views.size})")
    if not min_views >= 0:
        raise ValueError(f"min_views ({min_views!r}) must be >= 0")
    a, b, c = weights
    z = np.array([NormalDist().inv_cdf(q) for q in q_values.tolist()])
    # v = µ + σ z per page and q; a page alive at the start has a range over its births.
    lo = curves.mu[pages, None] + curves.sigma[pages, None] * z[None, :]
    hi = lo.copy()
    judged = curves.views[pages] >= max(min_views, 1e-300)
    alive = curves.alive_at_start[pages]
    judged &= ~alive
    if birth_lags is not None and birth_lags.pages.size:
        row = np.full(curves.views.size, -1, np.intp)
        row[birth_lags.pages] = np.arange(birth_lags.pages.size)
        known = alive & (row[pages] >= 0) & (curves.views[pages] >= max(min_views, 1e-300))
        lo_b, hi_b = birth_lags.quantile_range(z)
        lo[known], hi[known] = lo_b[row[pages[known]]], hi_b[row[pages[known]]]
        judged |= known
    # (labelled pages, n): seen for n days after birth (a page alive at the start: always).
    seen = judged[:, None] & (alive[:, None] | (curves.observed[pages, None] >= n_values[None, :]))
    cut = np.log(n_values)
    performance = np.empty((q_values.size, n_values.size))
    counts = np.empty((q_values.size, n_values.size, 3), np.int64)
    for i in range(q_values.size):  # (pages, n) per q: memory stays linear in the pages
        yes = seen & (hi[:, i, None] < cut[None, :])
        no = seen & (lo[:, i, None] >= cut[None, :])
        hit = (yes & truth[:, None]).sum(axis=0) + (no & ~truth[:, None]).sum(axis=0)
        miss = (no & truth[:, None]).sum(axis=0)
        alarm = (yes & ~truth[:, None]).sum(axis=0)
        counts[i] = np.stack([hit, miss, alarm], axis=1)
        performance[i] = a * hit - b * miss - c * alarm
    # Ties (a plateau of equal Performance) go to the point nearest the paper's (3, 0.7).
    distance = np.abs(q_values[:, None] - QUANTILE) + np.abs(np.log(n_values[None, :] / N_DAYS))
    tied = performance == performance.max()
    qi, nj = np.unravel_index(int(np.argmin(np.where(tied, distance, np.inf))), tied.shape)
    hit, miss, alarm = (int(v) for v in counts[qi, nj])
    unjudged = int(pages.size - hit - miss - alarm)
    return ThresholdFit(
        float(n_values[nj]), float(q_values[qi]), hit, miss, alarm, unjudged, performance
    )


def _top_sites(score: FloatArray, temporal: FloatArray, k: int) -> IntArray:
    # score_sites' order: by score, then more temporal pages, then the lower index.
    scored = np.flatnonzero(~np.isnan(score))
    order = scored[np.lexsort((scored, -temporal[scored], -score[scored]))]
    return order[:k].astype(np.intp)


def tune_weights(
    site: ArrayLike,
    curves: InterestCurves,
    classes: TemporalPages,
    *,
    sites: int | None = None,
    alpha_grid: ArrayLike = ALPHA_GRID,
    top: int = TOP_SITES,
    min_pages: int = MIN_SITE_PAGES,
) -> tuple[float, FloatArray, FloatArray]:
    """The ``α`` (``β = 1 - α``) whose top ``top`` sites have the best page-level F, the F
    per ``α`` of ``alpha_grid``, and ``(precision, recall, F)`` at the best (ties: the ``α``
    nearest the paper's 0.6, then the smaller)."""
    grid = np.asarray(alpha_grid, dtype=np.float64)
    if grid.ndim != 1 or grid.size == 0 or not np.all((grid >= 0) & (grid <= 1)):
        raise ValueError("alpha_grid must be a non-empty 1-d grid of values in [0, 1]")
    if top < 1:
        raise ValueError(f"top ({top!r}) must be >= 1")
    base = score_sites(site, curves, classes, sites=sites, alpha=1.0, beta=0.0, min_pages=min_pages)
    temporal, pages = base.temporal_pages.astype(np.float64), base.pages.astype(np.float64)
    all_temporal = float(temporal.sum())
    measures = np.zeros((grid.size, 3))
    ranked = ~np.isnan(base.score)
    for i, alpha in enumerate(grid.tolist()):
        score = np.where(ranked, alpha * base.score1 + (1 - alpha) * base.score2, np.nan)
        chosen = _top_sites(score, temporal, top)
        measures[i] = prf(float(temporal[chosen].sum()), float(pages[chosen].sum()), all_temporal)
    # Ties go to the α nearest the paper's 3:2: the top sites often do not change over a
    # wide range of α, and the first grid point (α = 0) would be an arbitrary pick.
    tied = measures[:, 2] == measures[:, 2].max()
    best = int(np.argmin(np.where(tied, np.abs(grid - ALPHA), np.inf)))
    return float(grid[best]), measures[:, 2].copy(), measures[best].copy()


def tune(
    site: ArrayLike,
    curves: InterestCurves,
    labelled: ArrayLike,
    temporal: ArrayLike,
    *,
    sites: int | None = None,
    birth_lags: BirthLags | None = None,
    n_grid: ArrayLike = N_GRID,
    q_grid: ArrayLike = Q_GRID,
    alpha_grid: ArrayLike = ALPHA_GRID,
    top: int = TOP_SITES,
    min_views: float = MIN_VIEWS,
    min_pages: int = MIN_SITE_PAGES,
    weights: tuple[float, float, float] = HITS,
) -> Tuned:
    """Both steps: ``(n, q)`` from the labelled pages (:func:`tune_thresholds`), then
    ``α:β`` from the page-level F of the top sites with every page classified at that
    ``(n, q)`` (:func:`tune_weights`)."""
    fit = tune_thresholds(
        curves,
        labelled,
        temporal,
        birth_lags=birth_lags,
        n_grid=n_grid,
        q_grid=q_grid,
        min_views=min_views,
        weights=weights,
    )
    classes = classify(curves, birth_lags, n=fit.n, q=fit.q, min_views=min_views)
    alpha, f_by_alpha, (precision, recall, f) = tune_weights(
        site, curves, classes, sites=sites, alpha_grid=alpha_grid, top=top, min_pages=min_pages
    )
    return Tuned(fit.n, fit.q, alpha, 1.0 - alpha, f, precision, recall, fit, f_by_alpha)


def classify(
    curves: InterestCurves,
    birth_lags: BirthLags | None,
    *,
    n: float,
    q: float,
    min_views: float = MIN_VIEWS,
) -> TemporalPages:
    """The page test, with the pages alive at the start judged by ``birth_lags`` if given,
    left out otherwise."""
    if birth_lags is None:
        return classify_pages(curves, n=n, q=q, min_views=min_views)
    return classify_with_birth_lags(curves, birth_lags, n=n, q=q, min_views=min_views)


def labelled_prf(
    site: ArrayLike, chosen: ArrayLike, labelled: ArrayLike, temporal: ArrayLike
) -> tuple[float, float, float]:
    """The paper's page-level precision, recall and F of the ``chosen`` sites, with hand
    labels as the truth: over the labelled pages, the temporal ones in the chosen sites
    over all labelled pages there, and over all labelled temporal pages.

    >>> labelled_prf([0, 0, 1, 1], [0], [0, 1, 2, 3], [True, False, True, True])
    (0.5, 0.3333333333333333, 0.4)
    """
    site_of_page = np.asarray(site, dtype=np.intp)
    pages = np.asarray(labelled, dtype=np.intp)
    truth = np.asarray(temporal, dtype=bool)
    if pages.shape != truth.shape:
        raise ValueError("labelled and temporal must have one length")
    picked = np.zeros(int(site_of_page.max(initial=-1)) + 1, bool)
    picked[np.asarray(chosen, dtype=np.intp)] = True
    inside: BoolArray = picked[site_of_page[pages]]
    return prf(float((inside & truth).sum()), float(inside.sum()), float(truth.sum()))
