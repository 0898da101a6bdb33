"""Pham et al.'s GREEDY: the oracle that knows what each source would yield before crawling it.

The paper (Pham et al., WSDM 2018, section 5) uses it as an upper bound on coverage: each
hour it picks the ``k`` seeds whose crawl would find the most pages not found yet
(Dasgupta et al.'s greedy set cover, so that overlapping seeds are not both picked for the
same pages). Here it reads the trace: once per cycle it counts, per source, the pages shown on
it now that nobody has found, and then spends source slots on the largest counts, as the set
cover does: a source picked covers its pages, and every source listing one of them counts it
no more until the next count. It crawls every new page first, newest first, as the paper
crawls the new outlinks of every seed it picks.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from scrapy_echo.model.decisions.discovery_policies import CrawlsEveryPage
from scrapy_echo.model.decisions.policies import Decision
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.sim.trace import Trace


class GreedyOracle(CrawlsEveryPage):
    """Pham et al.'s GREEDY, counting from the trace; only the simulator can run it."""

    name = "greedy-oracle"
    cycle: ClassVar[float] = 3600.0  # seconds between counts: the paper's cycle

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self._trace: Trace | None = None
        self._discovered = np.zeros(0)
        self._counts = np.zeros(0)
        self._next_count = 0.0
        # This cycle's (source, page) pairs still to find, and the pages a pick covered.
        self._pair_source = np.zeros(0, dtype=np.intp)
        self._pair_page = np.zeros(0, dtype=np.intp)
        self._covered = np.zeros(0, dtype=bool)

    def attach(self, trace: Trace, discovered: FloatArray) -> None:
        """Read ``trace``, and the replay's ``discovered`` as it fills in (NaN: not found);
        :func:`~scrapy_echo.sim.engine.simulate` calls this before the first slot."""
        self._trace = trace
        self._discovered = discovered
        self._counts = np.zeros(trace.n_sources)
        self._next_count = 0.0

    def source_slot(self, now: float, last_crawl: FloatArray) -> Decision:
        if now >= self._next_count:
            self._count(now)
            self._next_count = now + self.cycle
        best = int(np.argmax(self._counts))
        if self._counts[best] <= 0:  # nothing left to find this cycle: keep rotating
            return Decision("source", int(np.argmin(last_crawl)))
        mine = self._pair_page[self._pair_source == best]
        fresh = mine[~self._covered[mine]]
        self._covered[fresh] = True
        # Every source listing a page just covered counts it no more (the picked one included).
        np.subtract.at(self._counts, self._pair_source[np.isin(self._pair_page, fresh)], 1.0)
        return Decision("source", best)

    def _count(self, now: float) -> None:
        trace = self._trace
        if trace is None:
            raise RuntimeError("greedy-oracle reads the trace: only simulate() can run it")
        shown = (trace.link_appeared <= now) & (trace.link_disappeared > now)
        keep = shown & np.isnan(self._discovered[trace.link_page])
        # (A page listed twice by one source counts once.)
        pairs = np.unique(np.stack([trace.link_source[keep], trace.link_page[keep]]), axis=1)
        self._pair_source, self._pair_page = pairs[0], pairs[1]
        self._covered = np.zeros(trace.n_pages, dtype=bool)
        self._counts = np.bincount(self._pair_source, minlength=trace.n_sources).astype(np.float64)


__all__ = ["GreedyOracle"]
