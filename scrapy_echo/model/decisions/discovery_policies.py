"""The baselines of Pham, Santos and Freire (WSDM 2018, section 5) that learn from
crawls alone, for the simulator's comparisons; its GREEDY oracle reads the trace and lives in
:mod:`scrapy_echo.sim.oracle`.

The paper picks ``k`` seed pages each hour and crawls them with all their new outlinks; here a
slot at a time, so every new page found is crawled first (newest first), and a source slot
goes to:

- ``rr`` (round robin): the source crawled longest ago, so each is recrawled every ``n/k``
  slots as in the paper.
- ``od-win``: the source with the most new pages per second over its last crawls (the
  estimator's window: the paper averages new pages per crawl over a week of hourly crawls,
  which is the same ranking when crawls are evenly spaced), among the sources not crawled in
  the last hour: the paper's top ``k`` are ``k`` different sources each hour. When every
  source was crawled within the hour, the one crawled longest ago.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision, Policy
from scrapy_echo.model.intervals.curves import FloatArray


class CrawlsEveryPage(Policy):
    """Pham et al.'s shape: every new page found first (newest first), a source never crawled
    next, then the source :meth:`source_slot` picks."""

    uses_solver = False

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        page = self._newest_discovered(frontier)
        if page is not None:
            return page
        first = self._first_crawl(last_crawl)
        if first is not None or not last_crawl.size:
            return first
        return self.source_slot(now, last_crawl)

    @abstractmethod
    def source_slot(self, now: float, last_crawl: FloatArray) -> Decision | None:
        """The source to recrawl (every source has been crawled), or ``None`` to idle."""


class RoundRobin(CrawlsEveryPage):
    """Pham et al.'s RR: new pages first, then the source crawled longest ago."""

    name = "rr"

    def source_slot(self, now: float, last_crawl: FloatArray) -> Decision:
        return Decision("source", int(np.argmin(last_crawl)))


class OdWin(CrawlsEveryPage):
    """Pham et al.'s OD-WIN: new pages first, then the source with the best recent yield that
    was not crawled within the cycle (it reads the estimates alone)."""

    name = "od-win"
    cycle: ClassVar[float] = 3600.0  # seconds: the paper's recrawl cycle

    def source_slot(self, now: float, last_crawl: FloatArray) -> Decision:
        rested = now - last_crawl >= self.cycle
        if not rested.any():
            return Decision("source", int(np.argmin(last_crawl)))
        yield_rate = np.where(rested, self._plan_for(last_crawl).estimates.link_rate, -np.inf)
        return Decision("source", int(np.argmax(yield_rate)))


__all__ = ["CrawlsEveryPage", "OdWin", "RoundRobin"]
