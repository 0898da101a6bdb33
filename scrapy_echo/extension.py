"""Extension: every ``ECHO_RESOLVE_INTERVAL`` seconds, fold in the click feed and re-solve.

Each round reads what the click feed files gained since the last round (``ECHO_CLICK_FEED``,
tailed across rotations), hands the rows to the learner (which attributes each click to its
page's source and age, and refits ``P, μ`` at most every ``ECHO_CLICK_PUSH_PERIOD``), refreshes
``λ``, re-solves the intervals, logs one summary line and sets the ``echo/`` stats.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals
from twisted.internet.task import LoopingCall

from scrapy_echo.clickfeed import ClickFeedReader
from scrapy_echo.runtime import EchoComponent, EchoRuntime

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from typing_extensions import Self

logger = logging.getLogger(__name__)


class EchoExtension(EchoComponent):
    def __init__(self, crawler: Crawler, runtime: EchoRuntime) -> None:
        super().__init__(crawler, runtime)
        feed = runtime.config.click_feed
        # Created now, before the scheduler opens, so a JOBDIR resume can restore positions.
        runtime.feeds = [ClickFeedReader(feed)] if feed is not None else []
        self._invalid_seen: dict[tuple[int, str], int] = {}
        self._loop: LoopingCall | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        extension = super().from_crawler(crawler)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        self.read_click_feeds()
        self._loop = LoopingCall(self.resolve)
        # The scheduler made the first plan when it opened.
        self._loop.start(self.runtime.config.resolve_interval, now=False)

    def spider_closed(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def resolve(self) -> None:
        if not self.runtime.holds_state:
            return  # distributed mode: the planner re-solves, the others read its schedule
        try:
            self.read_click_feeds()
            self.runtime.replan()
        except Exception:
            # A failed round must not stop the loop: the old plan stays in force.
            logger.exception("ECHO re-solve failed; keeping the previous schedule")
            self._inc("echo/solver/errors")
            return
        self._set_stats()

    def read_click_feeds(self) -> int:
        """Fold in every complete row the feeds gained; returns how many were good."""
        taken = 0
        if not self.runtime.holds_state:
            return taken  # distributed mode: only the planner reads the feed files
        for number, reader in enumerate(self.runtime.feeds):
            taken += self.runtime.add_clicks(reader.read())
            for kind, count in reader.invalid.items():
                # The reader logs the first bad row of each kind; here only the stats.
                new = count - self._invalid_seen.get((number, kind), 0)
                if new > 0:
                    self._inc("echo/clickfeed/invalid", new)
                    self._inc(f"echo/clickfeed/invalid/{kind}", new)
                self._invalid_seen[number, kind] = count
        return taken

    def _set_stats(self) -> None:
        stats = self.crawler.stats
        if stats is None:
            return
        state = self.runtime.state
        stats.set_value("echo/sources/count", len(state.sources))
        stats.set_value("echo/pages/waiting", len(state.frontier))
        stats.set_value("echo/clickfeed/pending_rows", state.learner.pending_clicks)
        stats.set_value("echo/clickfeed/dropped_rows", state.learner.dropped_clicks)
