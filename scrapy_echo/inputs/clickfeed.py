"""Click feeds: files another program appends click rows to, read as they grow.

Two formats, with the same columns:

- JSON Lines (``.jsonl``, ``.ndjson``, ``.json``): ``{"url": ..., "ts": ..., "clicks": ...}``
  a line;
- CSV (``.csv``): a header naming ``url``, ``ts`` and ``clicks`` (any order, other columns
  ignored), then a row a line.

``ts`` is epoch seconds (1970 to 2286) or an ISO 8601 time (naive means UTC); a number that
looks like milliseconds, microseconds or nanoseconds since the epoch is refused with a message
naming the unit, not rescaled (:func:`check_timestamp`), and the crawl refuses a click stamped
more than a day after its own clock (:func:`check_not_ahead`). ``clicks`` is a finite number
``>= 0``; ``url`` an absolute http(s) URL, canonicalised so it matches the crawler's links.

:class:`ClickFeedReader` reads the rows added since its last read, a batch at a time, and
keeps its place across rotations, truncations and restarts as every feed does
(:mod:`scrapy_echo.inputs.feed_reader`): a bad row is skipped and counted by kind, the first
of each kind logged, and nothing is half-applied.

In JSON Lines ``ts`` and ``clicks`` may also be numeric strings, as in CSV.

>>> parse_click("https://Example.com/a?b=1&a=2", "1970-01-01T00:01:00Z", 3)
ClickRow(url='https://example.com/a?a=2&b=1', ts=60.0, clicks=3.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urlsplit

from scrapy_echo.inputs.feed_reader import FeedReader, InvalidClickRow
from scrapy_echo.sources.published import parse_time
from scrapy_echo.sources.urls import canonical_url

_COLUMNS = ("url", "ts", "clicks")

# Epoch seconds up to here (the year 2286: ten digits) are times; a larger number of 13, 16 or
# 19 digits is that span in a finer unit, and refused with a message naming it.
LATEST_SECONDS = 1e10
_FINER_UNITS = (("milliseconds", 1e3), ("microseconds", 1e6), ("nanoseconds", 1e9))
# How far past the crawl's clock a click may be stamped: another host's clock, a time zone
# slip; further is a broken export.
AHEAD_SLACK = 86_400.0


@dataclass(frozen=True)
class ClickRow:
    url: str  # canonical
    ts: float  # epoch seconds
    clicks: float


def parse_click(url: object, ts: object, clicks: object) -> ClickRow:
    """Check one row's values; raises :class:`InvalidClickRow`."""
    if url is None or ts is None or clicks is None:
        missing = [n for n, v in zip(_COLUMNS, (url, ts, clicks), strict=True) if v is None]
        raise InvalidClickRow("missing_field", f"missing {', '.join(missing)}")
    return ClickRow(check_url(url), check_timestamp(ts), _clicks(clicks))


def check_url(url: object) -> str:
    """``url`` canonicalised, if it is an absolute http(s) URL; else :class:`InvalidClickRow`."""
    if not isinstance(url, str):
        raise InvalidClickRow("bad_url", f"url {url!r} is not a string")
    url = url.strip()
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.scheme.lower() not in ("http", "https") or not host:
            raise ValueError("not an absolute http(s) URL")
        if any(c.isspace() or not c.isprintable() for c in host):
            raise ValueError("bad host name")
        canonical = canonical_url(url)
    # w3lib raises whatever the URL parsing underneath it raises; a feed row must not stop
    # the reader, so any failure here is just a bad URL.
    except Exception as exc:
        raise InvalidClickRow("bad_url", f"url {url!r}: {exc}") from None
    return canonical


def check_timestamp(value: object) -> float:
    """Epoch seconds from a number or an ISO 8601 time, from 1970 up to :data:`LATEST_SECONDS`;
    else :class:`InvalidClickRow`.

    A number of milliseconds, microseconds or nanoseconds since the epoch (as analytics exports
    often write times) is refused, with a message that names the unit it looks like, not
    rescaled: a guess would silently mis-date a feed whose numbers mean something else, and
    the export is fixed with one division. Every row of such a feed is refused alike, so its
    first is logged and the rest counted (``ts_milliseconds`` and so on).

    >>> check_timestamp(1764000000)
    1764000000.0
    >>> try:
    ...     check_timestamp(1764000000000)
    ... except InvalidClickRow as refused:
    ...     print(refused.kind, str(refused).split(" (")[0])
    ts_milliseconds ts 1764000000000 looks like milliseconds since the epoch
    """
    number = _number(value)
    numeric = number is not None
    if number is None and isinstance(value, str):
        # Every offset form (Z, +00:00, +0000) on every Python (scrapy_echo.sources.published).
        number = parse_time(value)
    if number is None or not math.isfinite(number):
        raise InvalidClickRow("bad_ts", f"ts {value!r} is not epoch seconds or ISO 8601")
    if 0 <= number < LATEST_SECONDS:
        return number
    if numeric and number > 0:  # (an ISO time names its date: no unit to mistake)
        for unit, per_second in _FINER_UNITS:
            seconds = number / per_second
            if seconds < LATEST_SECONDS:
                raise InvalidClickRow(
                    f"ts_{unit}",
                    f"ts {value!r} looks like {unit} since the epoch ({_utc(seconds)} if it "
                    f"is); ts must be epoch seconds: divide it by {per_second:.0f}",
                )
    raise InvalidClickRow(
        "ts_out_of_range", f"ts {value!r} is outside 1970 to 2286 in epoch seconds"
    )


def check_not_ahead(ts: float, now: float) -> None:
    """Refuse a click stamped more than :data:`AHEAD_SLACK` after ``now``, the crawl's clock
    (:class:`InvalidClickRow` ``ts_future``): no clock skew or time zone slip puts it there, and
    taken it would date every click still waiting for its page (they are given up by how old
    they are next to the latest)."""
    if ts > now + AHEAD_SLACK:
        raise InvalidClickRow(
            "ts_future",
            f"ts {ts:.0f} ({_utc(ts)}) is more than a day after the crawl's clock ({_utc(now)})",
        )


def check_not_past(ts: float, now: float, horizon: float) -> None:
    """Refuse a click stamped more than ``horizon`` (the click table's, ``ECHO_CLICK_BINS`` x
    ``ECHO_CLICK_BIN``) before ``now`` (:class:`InvalidClickRow` ``ts_past``): too old to be
    counted in any bin, and taken it would move its page's appearance back to it, decades
    for an exporter's empty date (``ts: 0``), and the page's clicks out of the table."""
    if ts < now - horizon:
        raise InvalidClickRow(
            "ts_past",
            f"ts {ts:.0f} ({_utc(ts)}) is older than the click horizon ({horizon:.0f} s) "
            f"before the crawl's clock ({_utc(now)})",
        )


def _utc(seconds: float) -> str:
    try:
        return f"{datetime.fromtimestamp(seconds, timezone.utc):%Y-%m-%dT%H:%M:%SZ}"
    except (OverflowError, ValueError, OSError):  # (a clock far off the calendar)
        return f"{seconds:g} s"


def _clicks(value: object) -> float:
    number = _number(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise InvalidClickRow("bad_clicks", f"clicks {value!r} is not a finite number >= 0")
    return number


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except (ValueError, OverflowError):  # OverflowError: a JSON integer beyond float range
        return None


class ClickFeedReader(FeedReader[ClickRow]):
    """Reads the click rows a click feed file gained since the last :meth:`read`."""

    what = "click"
    columns = _COLUMNS

    def parse(self, values: Mapping[str, object]) -> ClickRow:
        return parse_click(values.get("url"), values.get("ts"), values.get("clicks"))


__all__ = [
    "AHEAD_SLACK",
    "LATEST_SECONDS",
    "ClickFeedReader",
    "ClickRow",
    "InvalidClickRow",
    "check_not_ahead",
    "check_timestamp",
    "check_url",
    "parse_click",
]
