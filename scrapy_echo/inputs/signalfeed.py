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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scrapy_echo.core.events import SignalsArrived
from scrapy_echo.inputs.clickfeed import check_timestamp, check_url
from scrapy_echo.inputs.feed_reader import FeedReader, InvalidClickRow
from scrapy_echo.inputs.intake import Intake

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


class SignalIntake(Intake[SignalRow]):
    """Where a crawler's signals go in: checked, sent on to the planner in Redis mode, else
    matched to sources by the core; everything counted."""

    kind = "signal"
    columns = SignalFeedReader.columns  # (a pushed row has a feed row's fields)

    def parse(self, row: Mapping[str, Any]) -> SignalRow:
        return parse_signal(row.get("url"), row.get("ts"))

    def add(self, rows: Iterable[SignalRow], *, relay: bool = False) -> int:
        """Checked rows: to the planner in Redis mode, else to the core. A signal stamped
        later than now (another machine's clock) counts as now. Returns how many."""
        rows = list(rows)
        runtime = self.runtime
        if not rows:
            return 0
        if (relay or not runtime.holds_state) and runtime.transport is not None:
            runtime.transport(SignalsArrived(tuple([row.url, row.ts] for row in rows)))
            return len(rows)
        now = runtime.clock()
        woken = False
        for row in rows:
            outcome = runtime.core.signal(row.url, min(row.ts, now))
            self._count(outcome)
            woken = woken or outcome in ("source", "page")
        self._count("rows", len(rows))
        if woken:
            # A signalled source may be due now, not at the engine's next heartbeat.
            runtime.wake_engine()
        return len(rows)


__all__ = ["SignalFeedReader", "SignalIntake", "SignalRow", "parse_signal"]
