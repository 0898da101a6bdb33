"""Which sites publish temporal pages: Wang et al. (2008) on page-view logs, vectorised
(docs/how-it-works.rst, "Ranking sites by how temporal they are").

1. Each page's *interest curve* is a shifted, scaled lognormal density: ``A`` views in all,
   born at ``b``, log-age mean ``µ`` and spread ``σ``. The paper fits the four by (presumably)
   least squares to 60 daily counts. Here the views are draws of the interest-time
   distribution: ``b`` is the page's first bin with a view (the paper's "activation day"),
   a view in bin ``k`` is ``k - k_b + 1/2`` bins old, ``A`` is the views in the log (not
   extrapolated), and ``µ, σ`` are the maximum-likelihood fit of a normal to the log ages,
   weighted by views and *right-truncated at the log's end*. That fit depends on
   the data only through three sums per page (``bincount``), then a one-dimensional solve per
   page by table lookup, so millions of pages cost a few passes over the rows. The
   truncation is what makes good the paper's claim that fitting fills in lifetimes cut off by
   the window: views piling up against the end pull the fitted interest past it.
2. A page is temporal when it gathers more than ``q`` of its interest within ``n`` days,
   ``Φ(n) > q``, which is ``µ + σ z_q < ln n`` (defaults: ``n = 3`` days, ``q = 0.7``).
   Pages are left out, and counted, when that cannot be told: fewer than ``min_views``
   views; born less than ``n`` days before the log ends (``too_young``: their first ``n``
   days were not seen); first seen in the log's first bin (``alive_at_start``: born before
   the log, so their age is unknown; :mod:`scrapy_echo.model.birth_lag` judges them at their
   possible births instead).
3. Site scores: ``Score1`` the share of temporal pages, ``Score2`` the share of views on
   temporal pages, ``Score = α Score1 + β Score2`` (``α:β = 3:2``). The paper's measures:
   site-level hits, misses, false alarms and ``Performance``, and page-level precision,
   recall and F of a chosen set of sites.

Times are in days; rows of one page need not be adjacent or sorted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from statistics import NormalDist

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scrapy_echo.model.intervals.curves import FloatArray

BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]

N_DAYS = 3.0  # the paper's integrating range n
QUANTILE = 0.7  # the paper's integral quantity q
ALPHA, BETA = 0.6, 0.4  # the paper's best α:β = 3:2
# Fewer views than this cannot place a 70% quantile: one view more or less moves it a bin.
MIN_VIEWS = 10
# A site's score from one or two pages is a coin toss; such sites are counted, not ranked.
MIN_SITE_PAGES = 3
LEFT_OUT = ("too_few_views", "too_young", "alive_at_start")

# Truncation parameter α = (L - µ)/σ: below the grid the fitted interest lies almost all past
# the log's end; above it the truncation changes µ and σ by less than 1e-20.
_ALPHA_LO, _ALPHA_HI, _ALPHA_STEP = -35.0, 10.0, 0.005
_Z_MAX, _Z_STEP = 9.0, 1.0 / 1024  # Φ_N by table: linear interpolation, error < 3e-8


@cache
def _normal_cdf_table() -> tuple[FloatArray, FloatArray]:
    # numpy has no erf; the standard library's, tabulated once, serves every page at once.
    z = np.arange(-_Z_MAX, _Z_MAX + _Z_STEP / 2, _Z_STEP)
    return z, np.array([0.5 * math.erfc(-v / math.sqrt(2.0)) for v in z])


@cache
def _truncation_table() -> tuple[FloatArray, FloatArray, FloatArray]:
    """``h(α) = (α + λ)/sqrt(v)`` (increasing, from 1 to ∞) and ``v(α)`` on the α grid, for
    a normal cut at ``α`` standard deviations: ``λ = φ(α)/Φ(α)``, ``v = 1 - αλ - λ²`` the
    variance kept."""
    alpha = np.arange(_ALPHA_LO, _ALPHA_HI + _ALPHA_STEP / 2, _ALPHA_STEP)
    below = np.array([0.5 * math.erfc(-a / math.sqrt(2.0)) for a in alpha])  # Φ_N(α) > 1e-268
    lam = np.exp(-alpha * alpha / 2) / math.sqrt(2 * math.pi) / below
    kept = 1.0 - alpha * lam - lam * lam
    return alpha, (alpha + lam) / np.sqrt(kept), kept


def accumulated_interest(mu: ArrayLike, sigma: ArrayLike, x: ArrayLike) -> FloatArray:
    """``Φ(x)``: the share of a page's interest within ``x`` days of its birth (the
    lognormal CDF; ``σ = 0`` is a step at ``e^µ``).

    >>> accumulated_interest(0.0, 1.0, [1.0, np.e]).round(4)
    array([0.5   , 0.8413])
    """
    mu, sigma, x = (np.asarray(a, dtype=np.float64) for a in (mu, sigma, x))
    with np.errstate(divide="ignore", invalid="ignore"):
        log_x = np.log(np.maximum(x, 0.0))  # -inf at and below 0: no interest yet
        z = (log_x - mu) / sigma
    # σ = 0 at x = e^µ gives 0/0: a step, all the interest there.
    step = np.isnan(z) & ~(np.isnan(mu) | np.isnan(sigma) | np.isnan(x))
    z = np.where(step, np.inf, z)
    grid, cdf = _normal_cdf_table()
    return np.asarray(np.interp(z, grid, cdf, left=0.0, right=1.0), dtype=np.float64)


@dataclass(frozen=True)
class InterestCurves:
    """Fitted interest curves, one entry per page; ``birth`` NaN for a page without views."""

    views: FloatArray  # A: the page's views in the log
    birth: FloatArray  # b: start of its first bin with a view, days from the log's start
    mu: FloatArray
    sigma: FloatArray
    observed: FloatArray  # days from its birth to the log's end
    alive_at_start: BoolArray  # first view in the log's first bin


def fit_interest_curves(
    page: ArrayLike,
    t: ArrayLike,
    views: ArrayLike,
    *,
    pages: int | None = None,
    bin_days: float = 1.0,
) -> InterestCurves:
    """Fit every page's interest curve from log rows ``(page, t, views)``.

    Parameters
    ----------
    page : array_like of int
        Page index of each row, ``0 <= page < pages``.
    t : array_like
        Time of each row in days (any origin); rows are counted in bins of ``bin_days``
        from the earliest row, and the log ends with the last row's bin.
    views : array_like
        Views in each row, finite and ``>= 0``.
    pages : int, optional
        Number of pages (default: the largest index plus one).
    bin_days : float
        The bin width: at least the log's time step (the paper's: one day).

    Examples
    --------
    Page 1's views had not fallen off by the log's end, so the cut moves its µ up from the
    plain weighted mean of its log ages, ``(ln 0.5 + ln 1.5)/2 = -0.144``:

    >>> c = fit_interest_curves([0, 0, 0, 1, 1], [0, 1, 2, 0, 1], [8, 2, 0, 5, 5])
    >>> c.birth, c.mu.round(3), c.observed
    (array([0., 0.]), array([-0.473, -0.118]), array([3., 3.]))
    """
    page = np.asarray(page)
    t, views = np.asarray(t, dtype=np.float64), np.asarray(views, dtype=np.float64)
    if page.shape != t.shape or t.shape != views.shape or page.ndim != 1:
        raise ValueError("page, t and views must be 1-d arrays of one length")
    if page.size and not np.issubdtype(page.dtype, np.integer):
        raise ValueError(f"page must hold integers, not {page.dtype}")
    if not (math.isfinite(bin_days) and bin_days > 0):
        raise ValueError(f"bin_days ({bin_days!r}) must be a finite number > 0")
    if not np.all(np.isfinite(t)):
        raise ValueError("t must be finite")
    if not np.all(np.isfinite(views) & (views >= 0)):
        raise ValueError("views must be finite and >= 0")
    top = int(page.max()) + 1 if page.size else 0
    pages = top if pages is None else pages
    if page.size and (int(page.min()) < 0 or top > pages):
        raise ValueError(f"page indices must lie in [0, pages) = [0, {pages})")
    # The tolerance keeps a row stamped at a bin's start in that bin despite rounding (epoch
    # seconds turned into days, then divided by a bin of 1/24 day).
    k = np.floor((t - t.min()) / bin_days + 1e-9) if t.size else t
    last = float(k.max()) + 1.0 if k.size else 0.0  # the log ends with its last row's bin
    seen = views > 0
    p, k, w = page[seen], k[seen], views[seen]
    first = np.full(pages, np.inf)
    np.minimum.at(first, p, k)
    born = np.isfinite(first)
    log_age = np.log((k - first[p] + 0.5) * bin_days)  # > 0: first[p] <= k
    total = np.asarray(np.bincount(p, weights=w, minlength=pages), dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        m = np.bincount(p, weights=w * log_age, minlength=pages) / total
        square = np.bincount(p, weights=w * log_age * log_age, minlength=pages) / total
        s = np.sqrt(np.maximum(square - m * m, 0.0))
        observed = np.where(born, (last - first) * bin_days, np.nan)
        # Moment matching of a normal cut at L = ln(observed): (L - m)/s = h(α) fixes α, then
        # σ = s/sqrt(v(α)) and µ = L - σα. A large ratio means the cut took nothing.
        cut = np.log(observed)
        ratio = (cut - m) / s
    alpha, h, kept = _truncation_table()
    truncated = born & (ratio < h[-1])
    a = np.interp(ratio[truncated], h, alpha)
    mu, sigma = m.copy(), s.copy()
    sigma[truncated] = s[truncated] / np.sqrt(np.interp(a, alpha, kept))
    mu[truncated] = cut[truncated] - sigma[truncated] * a
    birth = np.where(born, first * bin_days, np.nan)
    return InterestCurves(total, birth, mu, sigma, observed, born & (first == 0))


@dataclass(frozen=True)
class TemporalPages:
    """Which pages are temporal; ``classified`` False for those left out, counted by reason
    (:data:`LEFT_OUT`) in ``left_out``."""

    temporal: BoolArray
    classified: BoolArray
    left_out: dict[str, int]


def classify_pages(
    curves: InterestCurves,
    *,
    n: float = N_DAYS,
    q: float = QUANTILE,
    min_views: float = MIN_VIEWS,
    keep_alive_at_start: bool = False,
) -> TemporalPages:
    """The paper's rule ``Φ(n) > q``, as ``µ + σ z_q < ln n``, on the pages it can judge:
    at least ``min_views`` views, seen for at least ``n`` days, and (unless
    ``keep_alive_at_start``) born inside the log."""
    if not (math.isfinite(n) and n > 0):
        raise ValueError(f"n ({n!r}) must be a finite number of days > 0")
    if not 0 < q < 1:
        raise ValueError(f"q ({q!r}) must lie strictly between 0 and 1")
    if not min_views >= 0:
        raise ValueError(f"min_views ({min_views!r}) must be >= 0")
    few = ~(curves.views >= max(min_views, 1e-300))  # a page needs a view to have a birth
    young = ~few & ~(curves.observed >= n)
    old = ~few & ~young & curves.alive_at_start
    if keep_alive_at_start:
        old[:] = False
    classified = ~(few | young | old)
    z_q = NormalDist().inv_cdf(q)
    temporal = classified & (curves.mu + curves.sigma * z_q < math.log(n))
    counts = (int(few.sum()), int(young.sum()), int(old.sum()))
    return TemporalPages(temporal, classified, dict(zip(LEFT_OUT, counts, strict=True)))


@dataclass(frozen=True)
class SiteScores:
    """Per site, over its classified pages; ``score`` NaN for a site with fewer than
    ``min_pages`` of them. ``order``: the scored sites, best first."""

    pages: IntArray
    temporal_pages: IntArray
    views: FloatArray
    temporal_views: FloatArray
    score1: FloatArray
    score2: FloatArray
    score: FloatArray
    order: IntArray


def score_sites(
    site: ArrayLike,
    curves: InterestCurves,
    classes: TemporalPages,
    *,
    sites: int | None = None,
    alpha: float = ALPHA,
    beta: float = BETA,
    min_pages: int = MIN_SITE_PAGES,
) -> SiteScores:
    """``Score = α Score1 + β Score2`` per site (``site[p]``: page ``p``'s site index).
    ``α, β >= 0`` must sum to 1, so scores lie in [0, 1]. Ties rank more temporal pages
    first, then the lower index.

    >>> c = fit_interest_curves([0, 1, 2, 2], [0, 0, 0, 9], [50, 50, 20, 30])
    >>> s = score_sites([0, 0, 1], c, classify_pages(c, keep_alive_at_start=True), min_pages=1)
    >>> s.score.round(3), s.order
    (array([1., 0.]), array([0, 1]))
    """
    site = np.asarray(site)
    if site.shape != curves.views.shape:
        raise ValueError("site must give one site index per page")
    if not (alpha >= 0 and beta >= 0 and abs(alpha + beta - 1.0) < 1e-9):
        raise ValueError(f"alpha ({alpha!r}) and beta ({beta!r}) must be >= 0 and sum to 1")
    if min_pages < 1:
        raise ValueError(f"min_pages ({min_pages!r}) must be >= 1")
    top = int(site.max()) + 1 if site.size else 0
    sites = top if sites is None else sites
    if site.size and (int(site.min()) < 0 or top > sites):
        raise ValueError(f"site indices must lie in [0, sites) = [0, {sites})")
    on, hot = classes.classified, classes.temporal

    def count(mask: BoolArray, weights: FloatArray | None = None) -> FloatArray:
        w = mask.astype(np.float64) if weights is None else np.where(mask, weights, 0.0)
        return np.asarray(np.bincount(site, weights=w, minlength=sites), dtype=np.float64)

    pages, temporal = count(on), count(hot)
    views, temporal_views = count(on, curves.views), count(hot, curves.views)
    with np.errstate(invalid="ignore", divide="ignore"):
        score1, score2 = temporal / pages, temporal_views / views
    score = np.where(pages >= min_pages, alpha * score1 + beta * score2, np.nan)
    scored = np.flatnonzero(~np.isnan(score))
    order = scored[np.lexsort((scored, -temporal[scored], -score[scored]))].astype(np.intp)
    counts = pages.astype(np.intp), temporal.astype(np.intp)
    return SiteScores(*counts, views, temporal_views, score1, score2, score, order)


def prf(true_pos: float, predicted: float, actual: float) -> tuple[float, float, float]:
    """Precision, recall and F from counts; 0 where a denominator is 0.

    The paper's page-level measure of a set of sites ``S``: ``prf(temporal pages in S, pages
    in S, all temporal pages)``; its Table 1 (automatic list):

    >>> [round(v, 3) for v in prf(70_110, 70_110 + 21_886, 135_939)]
    [0.762, 0.516, 0.615]
    """
    if not 0 <= true_pos <= min(predicted, actual):
        raise ValueError("true_pos must lie in [0, min(predicted, actual)]")
    precision = true_pos / predicted if predicted else 0.0
    recall = true_pos / actual if actual else 0.0
    both = precision + recall
    return precision, recall, 2 * precision * recall / both if both else 0.0


@dataclass(frozen=True)
class Confusion:
    """The paper's site (or page) classification counts: hit = right either way, miss =
    temporal called untemporal, false alarm = untemporal called temporal."""

    true_pos: int
    true_neg: int
    misses: int
    false_alarms: int

    @property
    def hits(self) -> int:
        return self.true_pos + self.true_neg

    def performance(self, a: float = 1.0, b: float = 1.0, c: float = 1.0) -> float:
        """``A·hit - B·miss - C·false_alarm``, the paper's cost-weighted measure."""
        return float(a * self.hits - b * self.misses - c * self.false_alarms)

    def prf(self) -> tuple[float, float, float]:
        """Precision, recall and F of the temporal class."""
        tp = self.true_pos
        return prf(tp, tp + self.false_alarms, tp + self.misses)


def confusion(predicted: ArrayLike, actual: ArrayLike) -> Confusion:
    """Counts of predicted against actual temporal flags.

    >>> c = confusion([1, 1, 1, 0, 0], [1, 1, 0, 1, 0])
    >>> c.hits, c.misses, c.false_alarms, c.performance(), c.performance(1, 2, 0)
    (3, 1, 1, 1.0, 1.0)
    """
    p, a = np.asarray(predicted, dtype=bool), np.asarray(actual, dtype=bool)
    if p.shape != a.shape:
        raise ValueError("predicted and actual must have one shape")
    return Confusion(
        int((p & a).sum()), int((~p & ~a).sum()), int((~p & a).sum()), int((p & ~a).sum())
    )
