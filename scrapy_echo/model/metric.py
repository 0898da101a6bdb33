"""The quality metric of the ECHO paper: clicks caught by crawling new pages early.

A page ``j`` that appeared at ``t_j`` and was crawled at ``t_j + Δt_j`` earns ``p_j(Δt_j)``, the
clicks it received at or after its crawl time (ground truth, not a fitted curve). The dynamic
quality over a window ``T`` ending at ``t`` is ``Q_T(t) = (1/T) Σ p_j(Δt_j)`` over the pages
crawled in ``[t - T, t]``; the overall quality is the average profit per second. The upper
bound crawls every page the moment it appears: ``page_profit(appearance_time, ...)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from scrapy_echo.model.intervals.curves import FloatArray


def page_profit(
    crawl_time: ArrayLike, click_page: ArrayLike, click_ts: ArrayLike, click_count: ArrayLike
) -> FloatArray:
    """Clicks each page got at or after its crawl time (NaN crawl time: never crawled, 0).

    >>> page_profit([10.0, np.nan], [0, 0, 1], [5.0, 10.0, 3.0], [1, 2, 4]).tolist()
    [2.0, 0.0]
    """
    crawled = np.asarray(crawl_time, dtype=np.float64)
    page = np.asarray(click_page, dtype=np.intp)
    ts = np.asarray(click_ts, dtype=np.float64)
    count = np.asarray(click_count, dtype=np.float64)
    if not (page.shape == ts.shape == count.shape):
        raise ValueError("click_page, click_ts and click_count must have one shape")
    with np.errstate(invalid="ignore"):
        caught = ts >= crawled[page]  # False where never crawled (NaN)
    return np.bincount(page[caught], weights=count[caught], minlength=crawled.size).astype(
        np.float64
    )


def freshness_profit(crawl_time: ArrayLike, created: ArrayLike, *, half_life: float) -> FloatArray:
    """Without a click feed, what each page is worth: 1 if crawled the moment it appeared,
    halving every ``half_life`` seconds of delay, 0 if never crawled (docs/how-it-works.rst,
    "Without a click feed"). The upper bound is 1 a page.

    >>> freshness_profit([0.0, 10.0, np.nan], [0.0, 0.0, 0.0], half_life=10.0).tolist()
    [1.0, 0.5, 0.0]
    """
    if not half_life > 0:
        raise ValueError(f"half_life must be > 0, got {half_life!r}")
    crawled = np.asarray(crawl_time, dtype=np.float64)
    delay = np.maximum(crawled - np.asarray(created, dtype=np.float64), 0.0)
    with np.errstate(invalid="ignore"):
        return np.where(np.isnan(crawled), 0.0, np.exp2(-delay / half_life))


def overall_profit_rate(
    crawl_time: ArrayLike, profit: ArrayLike, *, start: float, end: float
) -> float:
    """Profit per second of the pages crawled in ``[start, end)``."""
    if not end > start:
        raise ValueError(f"end must be after start, got start={start!r}, end={end!r}")
    crawled = np.asarray(crawl_time, dtype=np.float64)
    inside = (crawled >= start) & (crawled < end)
    return float(np.asarray(profit, dtype=np.float64)[inside].sum()) / (end - start)


def dynamic_profit(
    crawl_time: ArrayLike, profit: ArrayLike, *, window: float, times: ArrayLike
) -> FloatArray:
    """``Q_T(t)`` for each ``t`` in ``times``: profit of the pages crawled in ``[t - T, t]``
    (both ends included), per second of the window.

    >>> dynamic_profit([1.0, 2.0, 5.0], [3.0, 1.0, 2.0], window=2.0, times=[2.0, 5.0]).tolist()
    [2.0, 1.0]
    """
    if not window > 0:
        raise ValueError(f"window must be > 0, got {window!r}")
    crawled = np.asarray(crawl_time, dtype=np.float64)
    values = np.asarray(profit, dtype=np.float64)
    done = ~np.isnan(crawled)
    order = np.argsort(crawled[done], kind="stable")
    when = crawled[done][order]
    total = np.concatenate([[0.0], np.cumsum(values[done][order])])
    t = np.asarray(times, dtype=np.float64)
    upto = np.searchsorted(when, t, side="right")
    since = np.searchsorted(when, t - window, side="left")
    out: FloatArray = (total[upto] - total[since]) / window
    return out


def fraction_of_bound(value: float, bound: float) -> float:
    """``value / bound``, 0 when the bound is 0 (nothing to catch)."""
    return float(value) / float(bound) if bound > 0 else 0.0
