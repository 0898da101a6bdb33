"""How long new pages waited: from when each appeared (as the crawl estimates it) to its fetch.

The figure a monitor's operator watches most: ECHO exists to make it short for the pages that
matter. Kept per source (sum and count, for a mean) and over the whole crawl in buckets (a
histogram), for the metrics endpoint (:mod:`.metrics`). A refetch of a page is not a new page,
and a page whose appearance time is unknown is not counted.
"""

from __future__ import annotations

import bisect
import math

# Bucket bounds (s) of the whole crawl's histogram: ten seconds to a day.
BOUNDS = (10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 3 * 3600.0, 6 * 3600.0,
          24 * 3600.0)  # fmt: skip


class PageDelays:
    """Delays from appearance to fetch: per source, and in :data:`BOUNDS` over all.

    >>> delays = PageDelays()
    >>> delays.fetched("http://a/", appeared=1000.0, t=1090.0)
    >>> delays.fetched("http://a/", appeared=1000.0, t=1030.0)
    >>> delays.by_source["http://a/"], delays.count, delays.buckets[:4]
    ([120.0, 2], 2, [0, 1, 0, 1])
    """

    def __init__(self) -> None:
        self.by_source: dict[str, list[float]] = {}  # source URL -> [sum of delays, pages]
        self.buckets = [0] * (len(BOUNDS) + 1)  # pages per bucket; the last: over a day
        self.total = 0.0
        self.count = 0

    def fetched(self, source: str, *, appeared: float, t: float) -> None:
        """A new page of ``source`` that appeared at about ``appeared`` was fetched at ``t``."""
        if not (math.isfinite(appeared) and math.isfinite(t)):
            return
        delay = max(0.0, t - appeared)  # (an estimate past the fetch: fetched at once)
        kept = self.by_source.setdefault(source, [0.0, 0])
        kept[0] += delay
        kept[1] += 1
        self.buckets[bisect.bisect_left(BOUNDS, delay)] += 1
        self.total += delay
        self.count += 1


__all__ = ["BOUNDS", "PageDelays"]
