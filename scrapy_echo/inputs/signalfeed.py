"""Change-indicating signals from outside the crawl: files tailed as they grow, rows pushed by
Python code, and (in Redis mode) a stream; each matched to the source it names.

A row is ``{"url": ..., "ts": ...}`` (JSON Lines) or a CSV line under a header naming ``url``
and ``ts``: "something at ``url`` changed at ``ts``" (a ping, a partner's or a CDN's stream
of changed URLs). ``url`` names a source, or a page the crawl found on one (its source is
signalled); ``ts`` is epoch seconds or ISO 8601. Files are read as click feeds are
(:mod:`scrapy_echo.inputs.clickfeed`: rotation, truncation, a line still being written). Bad
rows are skipped, counted by kind (``echo/signalfeed/invalid/<kind>``) and the first of each kind
logged; what became of the good ones is counted too (``echo/signalfeed/<outcome>``: matched
to a ``source`` or a ``page``; ``stale``, from before the source's last crawl; ``inactive``;
``unmatched``). docs/how-it-works.rst, "Change-indicating signals", says what the model does
with them.

>>> parse_signal("https://Example.com/news/", 60)
SignalRow(url='https://example.com/news/', ts=60.0)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from scrapy_echo.core.events import Event, SignalsArrived
from scrapy_echo.inputs.clickfeed import check_timestamp, check_url
from scrapy_echo.inputs.feed_reader import FeedReader, InvalidClickRow

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_echo.core.crawl import CrawlCore

logger = logging.getLogger(__name__)

_COLUMNS = ("url", "ts")


@dataclass(frozen=True)
class SignalRow:
    url: str  # canonical
    ts: float  # epoch seconds


def parse_signal(url: object, ts: object) -> SignalRow:
    """Check one row's values; raises :class:`~scrapy_echo.inputs.feed_reader.InvalidClickRow`."""
    if url is None or ts is None:
        missing = [n for n, v in zip(_COLUMNS, (url, ts), strict=True) if v is None]
        raise InvalidClickRow("missing_field", f"missing {', '.join(missing)}")
    return SignalRow(check_url(url), check_timestamp(ts))


class SignalFeedReader(FeedReader[SignalRow]):
    """Reads the signal rows a signal feed file gained since the last :meth:`read`."""

    what = "signal"
    columns = _COLUMNS

    def parse(self, values: Mapping[str, object]) -> SignalRow:
        return parse_signal(values.get("url"), values.get("ts"))


class IntakeHost(Protocol):
    """What the intake needs of the crawler's runtime (:mod:`scrapy_echo.crawler.runtime`)."""

    crawler: Crawler
    core: CrawlCore
    holds_state: bool
    transport: Callable[[Event], None] | None

    def clock(self) -> float: ...

    def wake_engine(self) -> None: ...


class SignalIntake:
    """Where a crawler's signals go in: checked, sent on to the planner in Redis mode, else
    matched to sources by the core; everything counted."""

    def __init__(self, runtime: IntakeHost) -> None:
        self.runtime = runtime
        self.readers: list[SignalFeedReader] = []  # the extension's file readers
        self._kinds_logged: set[str] = set()

    def push(self, rows: Iterable[Any]) -> int:
        """Rows from other code: ``{"url", "ts"}`` mappings (or ``[url, ts]`` pairs, as they
        travel between workers). Each is checked as a feed row is; a bad one is skipped and
        counted, never half-applied. Returns the rows taken."""
        good = []
        for row in rows:
            if isinstance(row, list) and len(row) == 2:
                row = {"url": row[0], "ts": row[1]}
            if not isinstance(row, Mapping):
                self.count_invalid("not_object", f"pushed row {row!r:.80} is not a mapping")
                continue
            try:
                good.append(parse_signal(row.get("url"), row.get("ts")))
            except InvalidClickRow as exc:
                self.count_invalid(exc.kind, f"pushed row {row!r:.80}: {exc}")
        return self.add(good)

    def add(self, rows: Iterable[SignalRow]) -> int:
        """Checked rows: to the planner in Redis mode, else to the core. A signal stamped
        later than now (another machine's clock) counts as now. Returns how many."""
        rows = list(rows)
        runtime = self.runtime
        if not rows:
            return 0
        if not runtime.holds_state and runtime.transport is not None:
            runtime.transport(SignalsArrived(tuple([row.url, row.ts] for row in rows)))
            return len(rows)
        now = runtime.clock()
        stats = runtime.crawler.stats
        woken = False
        for row in rows:
            outcome = runtime.core.signal(row.url, min(row.ts, now))
            if stats is not None:
                stats.inc_value(f"echo/signalfeed/{outcome}")
            woken = woken or outcome in ("source", "page")
        if stats is not None:
            stats.inc_value("echo/signalfeed/rows", len(rows))
        if woken:
            # A signalled source may be due now, not at the engine's next heartbeat.
            runtime.wake_engine()
        return len(rows)

    def read_files(self) -> int:
        """The next batch of what each signal feed file gained since the last read (at most
        ``batch_lines``: :class:`~scrapy_echo.inputs.feed_reader.FeedReader`); returns the
        rows taken."""
        taken = 0
        stats = self.runtime.crawler.stats
        for reader in self.readers:
            taken += self.add(reader.read())
            if reader.missing and stats is not None:  # (logged by the reader when it went)
                stats.inc_value("echo/signalfeed/missing")
            if reader.behind and stats is not None:  # (logged by the reader when it fell behind)
                stats.inc_value("echo/signalfeed/behind")
            for kind, new in reader.new_invalid().items():
                if stats is not None:
                    stats.inc_value("echo/signalfeed/invalid", new)
                    stats.inc_value(f"echo/signalfeed/invalid/{kind}", new)
        return taken

    def count_invalid(self, kind: str, message: str) -> None:
        """Count a bad signal row; log the first of each kind."""
        if kind not in self._kinds_logged:
            self._kinds_logged.add(kind)
            logger.warning("ECHO skipped a bad signal row (%s); more are only counted", message)
        stats = self.runtime.crawler.stats
        if stats is not None:
            stats.inc_value("echo/signalfeed/invalid")
            stats.inc_value(f"echo/signalfeed/invalid/{kind}")


__all__ = ["SignalFeedReader", "SignalIntake", "SignalRow", "parse_signal"]
