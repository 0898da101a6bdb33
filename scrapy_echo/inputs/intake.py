"""What the click and signal intakes share: the runtime they serve, their file readers, and
how a bad row and a reader's troubles are counted (``echo/<kind>feed/...``) and logged."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from scrapy_echo.core.events import Event
from scrapy_echo.inputs.feed_reader import FeedReader, InvalidClickRow

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_echo.core.crawl import CrawlCore

logger = logging.getLogger(__name__)

Row = TypeVar("Row")


class IntakeHost(Protocol):
    """What an intake needs of the crawler's runtime (:mod:`scrapy_echo.crawler.runtime`)."""

    crawler: Crawler
    core: CrawlCore
    holds_state: bool
    transport: Callable[[Event], None] | None

    def clock(self) -> float: ...

    def wake_engine(self) -> None: ...


class Intake(Generic[Row]):
    """Rows of one kind (``"click"`` or ``"signal"``): read from files by :attr:`readers`,
    handed to :meth:`add`, which subclasses define."""

    kind = ""
    columns: tuple[str, ...] = ()  # a row's fields, in the order a list row gives them

    def __init__(self, runtime: IntakeHost) -> None:
        self.runtime = runtime
        self.readers: list[FeedReader[Row]] = []  # the extension's file readers
        self._kinds_logged: set[str] = set()

    def parse(self, row: Mapping[str, Any]) -> Row:
        """One row's values checked; :class:`~scrapy_echo.inputs.feed_reader.InvalidClickRow`
        if they are not a row."""
        raise NotImplementedError

    def add(self, rows: Iterable[Row], *, relay: bool = False) -> int:
        """Take checked ``rows``: where the state is, into it; else (or, with ``relay``,
        whenever there is a transport) as an event to the planner."""
        raise NotImplementedError

    def push(self, rows: Iterable[Any], *, relay: bool = False) -> int:
        """Rows from other code: mappings of :attr:`columns` (or lists of their values in
        that order, as they travel between workers). Each is checked as a feed row is; a bad
        one is skipped and counted, never half-applied. Returns the rows taken. ``relay``:
        rows a user pushed, which in a fleet travel as events even from the planner's own
        worker (the events stream keeps them until a saved state has them: applied at once,
        a planner dying before its next save would lose them)."""
        good = []
        for row in rows:
            if isinstance(row, list) and len(row) == len(self.columns):
                row = dict(zip(self.columns, row, strict=True))
            if not isinstance(row, Mapping):
                self.count_invalid("not_object", f"pushed row {row!r:.80} is not a mapping")
                continue
            try:
                good.append(self.parse(row))
            except InvalidClickRow as exc:
                self.count_invalid(exc.kind, f"pushed row {row!r:.80}: {exc}")
        return self.add(good, relay=relay)

    def read_files(self) -> int:
        """The next batch of what each feed file gained since the last read (at most
        ``batch_lines``: :class:`~scrapy_echo.inputs.feed_reader.FeedReader`), each row
        handed to :meth:`add`; returns the rows taken."""
        taken = 0
        for reader in self.readers:
            taken += self.add(reader.read())
            if reader.missing:  # (logged by the reader when it went)
                self._count("missing")
            if reader.behind:  # (logged by the reader when it fell behind)
                self._count("behind")
            for kind, new in reader.new_invalid().items():
                self._count("invalid", new)
                self._count(f"invalid/{kind}", new)
        return taken

    def count_invalid(self, kind: str, message: str) -> None:
        """Count a bad row; log the first of each kind."""
        if kind not in self._kinds_logged:
            self._kinds_logged.add(kind)
            logger.warning(
                "ECHO skipped a bad %s row (%s); more are only counted", self.kind, message
            )
        self._count("invalid")
        self._count(f"invalid/{kind}")

    def _count(self, key: str, count: int = 1) -> None:
        stats = self.runtime.crawler.stats
        if stats is not None:
            stats.inc_value(f"echo/{self.kind}feed/{key}", count)


__all__ = ["Intake", "IntakeHost"]
