"""How much more a source's pages differ in clicks than Poisson counts would: the dispersion
``φ`` the learned prior of ``P`` divides each source's pages by (docs/how-it-works.rst,
"Estimating the parameters").

The learned prior (:mod:`~scrapy_echo.model.estimation.learned_prior`) takes a source's clicks
as Poisson with mean ``n P`` for ``n`` pages, so ``n`` pages pin ``P`` down to
``sqrt(P / n)``. Pages differ: one post of a subreddit is voted up thousands of times, the next
a handful. Then the clicks of ``n`` pages vary ``φ`` times as much as Poisson counts, and they
say about ``P`` what ``n / φ`` Poisson pages would (the quasi-Poisson likelihood,
McCullagh and Nelder 1989, ch. 9). Taken as Poisson, a source whose first pages drew a lot by
chance is valued as if it drew that by nature.

``φ`` is measured on the pages themselves: per source, the variance of its pages' clicks over
their mean, over the pages the click fit has folded (their whole horizon seen); the median
over the sources with :data:`MIN_PAGES` such pages or more. The median, not a pooled ratio:
the few sources with the most clicks have the most varied pages too, and a pooled ratio is
theirs alone (on the Reddit trace the median is 23, the pooled ratio 132; on the synthetic
traces, whose pages are near Poisson, 1.2 against 24 to 52).
"""

from __future__ import annotations

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray

MIN_PAGES = 5  # a source's pages before its variance counts
MIN_SOURCES = 20  # sources with MIN_PAGES pages before any φ other than 1 is measured


def page_dispersion(pages: FloatArray, total: FloatArray, squares: FloatArray) -> float:
    """``φ`` from each source's folded ``pages``, the sum of their clicks and the sum of
    their squares: the median over sources with :data:`MIN_PAGES` pages or more and some
    clicks of the sample variance over the mean, at least 1 (a source's pages are never taken
    as more alike than Poisson counts); 1 with fewer than :data:`MIN_SOURCES` such sources
    (a source whose clicks overflow the sums is not one).

    >>> pages = np.full(30, 10.0)
    >>> # every source's pages: half with 1 click, half with 9 (mean 5, variance 17.8)
    >>> round(page_dispersion(pages, np.full(30, 50.0), np.full(30, 5 * 1 + 5 * 81.0)), 2)
    3.56
    >>> page_dispersion(pages[:10], np.full(10, 50.0), np.full(10, 410.0))
    1.0
    """
    pages = np.asarray(pages, dtype=np.float64)
    total = np.asarray(total, dtype=np.float64)
    squares = np.asarray(squares, dtype=np.float64)
    counted = (pages >= MIN_PAGES) & (total > 0)
    n, s, q = pages[counted], total[counted], squares[counted]
    with np.errstate(over="ignore", invalid="ignore"):
        mean = s / n
        ratio = np.maximum(q - s * mean, 0.0) / (n - 1.0) / mean
    ratio = ratio[np.isfinite(ratio)]  # (absurd counts overflow: those sources go unmeasured)
    if ratio.size < MIN_SOURCES:
        return 1.0
    return max(float(np.median(ratio)), 1.0)


__all__ = ["MIN_PAGES", "MIN_SOURCES", "page_dispersion"]
