"""What a source shows at a given moment: the trace's links, sorted for fast look-ups."""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise

import numpy as np

from scrapy_echo.sim.trace import Trace

SURVIVOR_SCAN = 400  # links looked back at for a survivor: more than any hub shows


class LinkIndex:
    """The trace's links grouped by source and sorted by appearance time.

    A crawl of source ``s`` at ``t`` shows the links with ``appeared <= t < disappeared``;
    the ones it did not show at its previous crawl at ``p`` are exactly those that appeared
    in ``(p, t]`` and are still there. Per-source Python lists and ``bisect``: a crawl touches
    a handful of links, where numpy's per-call overhead would dominate.
    """

    def __init__(self, trace: Trace) -> None:
        order = np.lexsort((trace.link_appeared, trace.link_source))
        source = trace.link_source[order]
        appeared = trace.link_appeared[order].tolist()
        disappeared = trace.link_disappeared[order].tolist()
        page = trace.link_page[order].tolist()
        bounds = np.searchsorted(source, np.arange(trace.n_sources + 1)).tolist()
        self._appeared = [appeared[a:b] for a, b in pairwise(bounds)]
        self._disappeared = [disappeared[a:b] for a, b in pairwise(bounds)]
        self._page = [page[a:b] for a, b in pairwise(bounds)]
        # Whether each link is its page's first anywhere: a survivor the crawler may have
        # found on this source (a cross link was found on another first).
        first = np.full(trace.n_pages, np.inf)
        np.minimum.at(first, trace.link_page, trace.link_appeared)
        own = (trace.link_appeared[order] <= first[trace.link_page[order]]).tolist()
        self._own = [own[a:b] for a, b in pairwise(bounds)]

    def visible(self, source: int, now: float) -> list[int]:
        """Pages linked from ``source`` at ``now``."""
        return self.appeared_between(source, -np.inf, now)

    def appeared_between(self, source: int, after: float, now: float) -> list[int]:
        """Pages whose link appeared on ``source`` in ``(after, now]`` and is still there."""
        times = self._appeared[source]
        lo = bisect_right(times, after)
        hi = bisect_right(times, now)
        gone = self._disappeared[source]
        pages = self._page[source]
        return [pages[i] for i in range(lo, hi) if gone[i] > now]

    def newest_before(self, source: int, after: float, now: float) -> int | None:
        """The newest page first linked from ``source`` by ``after`` that is still there at
        ``now``: on a hub that shows its latest links, whether any link from before survived
        (None: none did, among the last :data:`SURVIVOR_SCAN` before ``after``)."""
        times, gone, own = self._appeared[source], self._disappeared[source], self._own[source]
        last = bisect_right(times, after) - 1
        for i in range(last, max(last - SURVIVOR_SCAN, -1), -1):
            if gone[i] > now and own[i]:
                page: int = self._page[source][i]
                return page
        return None
