"""Publication times: parsing the date forms feeds, sitemaps and pages use, and reading a page's
own publication time from its metadata.

Dates go through well-kept parsers, not hand-written ones: ISO 8601 (sitemaps' W3C datetimes,
Atom, JSON Feed, JSON-LD) through ``dateutil.parser.isoparse``, which takes every offset form
(``Z``, ``+00:00``, ``+0000``, ``+00``) on every Python version (``datetime.fromisoformat``
rejects ``+0000`` before 3.11); RFC 822 (RSS ``pubDate``) through ``email.utils``. The zone is
read by :mod:`scrapy_echo.sources.zones` wherever it stands after the time of day: every
numeric offset (``+0200``, ``+02:00``, ``-0530``, ``GMT+02:00``), in either form, and every
zone name RFC 822 defines, its military letters included. A time without a zone is taken as
UTC. A zone name RFC 822 does not define (``CEST``) is read as UTC too, and noted
(:func:`~scrapy_echo.sources.zones.unknown_zones`; the crawl counts them in
``echo/dates/unknown_zone`` and logs the first): a date at most 14 hours off loses less than
no date.
"""

from __future__ import annotations

import email.utils
import json
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from dateutil.parser import isoparse

from scrapy_echo.sources.zones import note_unknown, split_zone

if TYPE_CHECKING:
    from scrapy.http import TextResponse

# In the order they are trusted: structured data first, then Open Graph and friends.
_META_XPATHS = (
    "//meta[@property='article:published_time']/@content",
    "//meta[@itemprop='datePublished']/@content",
    "//*[@itemprop='datePublished']/@datetime",
    "//meta[@name='date']/@content",
    "//meta[@name='pubdate']/@content",
    "//meta[@name='dc.date.issued' or @name='DC.date.issued']/@content",
    "//time[@datetime][1]/@datetime",
)
_MAX_JSON_LD = 1 << 20  # bytes of one JSON-LD block worth reading


def parse_time(text: str) -> float | None:
    """ISO 8601 or RFC 822 to epoch seconds; ``None`` if the text is neither.

    >>> parse_time("2026-11-20T10:00:00+0000") == parse_time("Fri, 20 Nov 2026 10:00:00 GMT")
    True
    >>> parse_time("2026-11-20T05:00:00-05:00") == parse_time("Fri, 20 Nov 2026 05:00:00 EST")
    True
    >>> parse_time("2026-11-20 12:00:00 +0200") == parse_time("Fri, 20 Nov 2026 12:00 +02:00")
    True
    >>> parse_time("yesterday") is None
    True
    """
    text = text.strip()
    if not text or len(text) > 64:
        return None
    moment = _iso8601(text)
    if moment is None:  # RFC 822, or ISO 8601 with its zone after a space ("... +0200", "UTC")
        rest, offset, unknown = split_zone(text)
        moment = _iso8601(rest.strip()) or _rfc822(rest)
        if moment is None:
            return None
        if moment.tzinfo is None and offset is not None:
            moment = moment.replace(tzinfo=offset)
        if unknown is not None:
            note_unknown(unknown)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        return moment.timestamp()
    except (OverflowError, ValueError):
        return None


def _iso8601(text: str) -> datetime | None:
    try:
        return isoparse(text)
    except (ValueError, OverflowError):
        return None


def _rfc822(text: str) -> datetime | None:
    try:
        return email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def page_published(response: TextResponse) -> float | None:
    """The time an article page says it was published (JSON-LD ``datePublished``, then
    ``article:published_time`` and similar meta tags, then the first ``<time datetime>``)."""
    for value in _json_ld_dates(response):
        parsed = parse_time(value)
        if parsed is not None:
            return parsed
    for xpath in _META_XPATHS:
        stated = response.xpath(xpath).get()
        if stated:
            parsed = parse_time(stated)
            if parsed is not None:
                return parsed
    return None


def _json_ld_dates(response: TextResponse) -> Iterator[str]:
    for block in response.xpath("//script[@type='application/ld+json']/text()").getall():
        if len(block) > _MAX_JSON_LD:
            continue
        try:
            data = json.loads(block)
        except (ValueError, RecursionError):
            continue
        yield from _date_published(data, depth=0)


def _date_published(data: Any, *, depth: int) -> Iterator[str]:
    """``datePublished`` values anywhere in a JSON-LD document (an ``@graph``, a list, a
    ``mainEntity``), shallow first."""
    if depth > 6:
        return
    if isinstance(data, list):
        for item in data:
            yield from _date_published(item, depth=depth + 1)
    elif isinstance(data, dict):
        value = data.get("datePublished")
        if isinstance(value, str):
            yield value
        for key in ("@graph", "mainEntity", "mainEntityOfPage"):
            if key in data:
                yield from _date_published(data[key], depth=depth + 1)
