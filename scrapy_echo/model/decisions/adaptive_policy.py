"""The production anchor: an adaptive recrawl interval per source, as StormCrawler's
``AdaptiveScheduler`` keeps it, with the settings commoncrawl/news-crawl runs it with; for the
simulator's comparisons (``adaptive``).

Each source has an interval. A crawl that found something new shrinks it toward the minimum,
``I ← (1 - d) I + d I_min``; a crawl that found nothing (or a 304) grows it,
``I ← min((1 + g) I, I_max)``. News-crawl's values: ``I_min`` 90 minutes, ``I_max`` 90 days,
``g`` 0.5, ``d`` 0.2, and 12 hours for a feed not crawled before. It fetches every new article
it finds; here that is every new page first (newest first), then a source never crawled, then
the due source most overdue. It asks for no more than its intervals do: a budget above that
leaves slots idle, and below it the most overdue sources wait.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from scrapy_echo.model.decisions.discovery_policies import CrawlsEveryPage
from scrapy_echo.model.decisions.policies import Decision
from scrapy_echo.model.intervals.curves import FloatArray

_MINUTE = 60.0


class AdaptiveInterval(CrawlsEveryPage):
    """StormCrawler's adaptive fetch interval, one per source (news-crawl's settings)."""

    name = "adaptive"
    shortest: ClassVar[float] = 90 * _MINUTE
    longest: ClassVar[float] = 129_600 * _MINUTE
    grow: ClassVar[float] = 0.5
    shrink: ClassVar[float] = 0.2
    first: ClassVar[float] = 720 * _MINUTE

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self.intervals = np.zeros(0)

    def _sized(self, n: int) -> FloatArray:
        if self.intervals.size < n:
            grown = np.full(n - self.intervals.size, self.first)
            self.intervals = np.concatenate([self.intervals, grown])
        return self.intervals

    def source_crawled(self, source: int, found: int, first: bool) -> None:
        intervals = self._sized(source + 1)
        if first:  # nothing to compare with: the starting interval stands
            return
        if found:
            intervals[source] = (1 - self.shrink) * intervals[source] + self.shrink * self.shortest
        else:
            intervals[source] = min((1 + self.grow) * intervals[source], self.longest)

    def source_slot(self, now: float, last_crawl: FloatArray) -> Decision | None:
        due = last_crawl + self._sized(last_crawl.size)[: last_crawl.size]
        most = int(np.argmin(due))
        return Decision("source", most) if due[most] <= now else None

    def to_data(self) -> dict[str, Any]:
        return {"intervals": self.intervals.tolist()}

    def load_data(self, data: dict[str, Any]) -> None:
        intervals = np.asarray(data["intervals"], dtype=np.float64)
        if intervals.ndim != 1 or not np.isfinite(intervals).all() or (intervals <= 0).any():
            raise ValueError("adaptive intervals must be positive seconds")
        self.intervals = intervals


__all__ = ["AdaptiveInterval"]
