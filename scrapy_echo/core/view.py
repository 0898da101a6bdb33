"""What the drivers read of the crawl state: a read-only view.

The core (:class:`~scrapy_echo.core.crawl.CrawlCore`) is the state's one writer; the Scrapy
glue, the Redis planner, the reports and the simulator read it through this view, typed so
that none of them reaches for a writing method (``tests/test_layout.py`` checks that nothing
outside ``core/`` imports the state class). The parts it hands out (the frontier, the
learner, ...) are the model's own objects: read their figures, change them through the core.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scrapy_echo.core.seen import FingerprintSet
    from scrapy_echo.core.source_status import SourceStatus
    from scrapy_echo.model.decisions.frontier import Frontier
    from scrapy_echo.model.estimation.change_signals import SignalBook
    from scrapy_echo.model.estimation.cycles import WeekProfile
    from scrapy_echo.model.estimation.learning import SourceLearner
    from scrapy_echo.model.estimation.overflow import OverflowWatch
    from scrapy_echo.model.estimation.overlap import OverlapBook
    from scrapy_echo.model.intervals.curves import FloatArray
    from scrapy_echo.model.refetch.refresh_lane import RefreshLane


class CrawlView(Protocol):
    """The crawl state, read-only (:class:`scrapy_echo.core.state.CrawlState` fits it)."""

    @property
    def sources(self) -> Sequence[SourceStatus]: ...
    @property
    def source_ids(self) -> Mapping[str, int]: ...
    @property
    def last_crawl(self) -> FloatArray: ...
    @property
    def frontier(self) -> Frontier: ...
    @property
    def learner(self) -> SourceLearner: ...
    @property
    def refresh(self) -> RefreshLane: ...
    @property
    def signals(self) -> SignalBook: ...
    @property
    def profile(self) -> WeekProfile: ...
    @property
    def overlap(self) -> OverlapBook: ...
    @property
    def overflow(self) -> OverflowWatch: ...
    @property
    def seen(self) -> FingerprintSet: ...
    @property
    def fetched(self) -> FingerprintSet: ...
    @property
    def aliases(self) -> Mapping[str, str]: ...
    @property
    def history(self) -> Sequence[dict[str, Any]]: ...
    @property
    def crawled_pages(self) -> int: ...
    @property
    def source_crawls(self) -> int: ...
    @property
    def started(self) -> float: ...
    @property
    def retired_sources(self) -> int: ...

    def links_seen(self, links: Sequence[str]) -> list[bool]: ...
    def already_fetched(self, url: str) -> bool: ...

    def page_key(self, clean_url: str) -> str: ...


__all__ = ["CrawlView"]
