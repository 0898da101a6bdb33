"""Time zones of stated dates: numeric offsets, the zone names RFC 822 defines, and a note of
the names it does not.

RFC 822 (Crocker, "Standard for the format of ARPA Internet text messages", 1982, section 5)
defines ``UT``, ``GMT``, the four US zones with their daylight forms, and the one-letter
military zones. Those letters are read with RFC 822's own signs (``A`` = -1 hour ... ``M`` =
-12, ``N`` = +1 ... ``Y`` = +12, ``Z`` = UT), as feedparser reads them; RFC 1123 notes that
these signs are the reverse of military use, and RFC 5322 asks that they be read as
``-0000``, but a feed that writes one follows RFC 822's table. ``UTC`` and the Atlantic
``AST``/``ADT`` are read too, as ``email.utils`` and feedparser read them.

Any other name (``CEST``, ``IST``, ``Europe/Paris``) is ambiguous or needs a zone database,
and is read as UTC, which is at most 14 hours off: the date is kept, because a sitemap's
``lastmod`` that moves is a change signal whatever its zone, and a feed's dates still order
its items. Such a reading is noted: within :func:`unknown_zones`, each one is counted.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import timedelta, timezone

_HOUR = 3600
# RFC 822, section 5.1: the named zones, in hours from UT.
_NAMED = {
    "UT": 0, "GMT": 0, "UTC": 0, "Z": 0,
    "EST": -5, "EDT": -4, "CST": -6, "CDT": -5, "MST": -7, "MDT": -6, "PST": -8, "PDT": -7,
    "AST": -4, "ADT": -3,
}  # fmt: skip
# RFC 822's military zones: A-I are -1 to -9, K-M -10 to -12 (J is not used), N-Y +1 to +12.
_MILITARY = {
    **{letter: -(i + 1) for i, letter in enumerate("ABCDEFGHI")},
    **{letter: -(i + 10) for i, letter in enumerate("KLM")},
    **{letter: i + 1 for i, letter in enumerate("NOPQRSTUVWXY")},
}
_OFFSET = re.compile(r"(?:UTC|GMT|UT)?([+-])(\d\d?)(?::?(\d\d))?", re.IGNORECASE)
# The zone follows the time of day, spaced or not: "12:00:00 +0200", "12:00+02:00",
# "12:00:00 GMT", "12:00:00 CEST 2026" (date(1)); a number alone there is a year.
_AFTER_TIME = re.compile(r"\d:\d\d(?::\d\d(?:[.,]\d+)?)?\s*(?P<zone>[+-][\d:]+|[A-Za-z][\w/+:-]*)")
_COMMENT = re.compile(r"\([^()]*\)")


@dataclass
class UnknownZones:
    """The dates read with a zone name :mod:`~scrapy_echo.sources.zones` does not know."""

    count: int = 0
    first: str | None = None  # the first such name, for the log


_NOTES: ContextVar[UnknownZones | None] = ContextVar("unknown_zones", default=None)


@contextmanager
def unknown_zones() -> Iterator[UnknownZones]:
    """Count the unknown zone names of the dates read inside the block, whatever reads them
    (a feed's, a sitemap's or a page's parser): the crawl wraps its parsing in it and puts
    the count in its stats."""
    notes = UnknownZones()
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def split_zone(text: str) -> tuple[str, timezone | None, str | None]:
    """``text`` without its zone, the zone's offset, and the zone's name when it is one this
    module does not know (its offset then ``None``, as when there is no zone at all).

    >>> split_zone("Fri, 20 Nov 2026 14:00:00 +02:00")
    ('Fri, 20 Nov 2026 14:00:00 ', datetime.timezone(datetime.timedelta(seconds=7200)), None)
    >>> split_zone("Fri, 20 Nov 2026 12:00:00 CEST")[1:]
    (None, 'CEST')
    """
    text = _COMMENT.sub(" ", text)  # "+0200 (CEST)": the comment only repeats the offset
    found = _AFTER_TIME.search(text)
    if found is None:
        return text, None, None
    zone = found.group("zone")
    rest = text[: found.start("zone")] + text[found.end("zone") :]
    offset = zone_offset(zone)
    return rest, offset, None if offset is not None else zone


def zone_offset(zone: str) -> timezone | None:
    """The offset a zone names (``+0200``, ``+02:00``, ``-05``, ``GMT+2``, ``EST``, ``A``);
    ``None`` for a name RFC 822 does not define, or an offset of a day or more."""
    name = zone.upper()
    hours = _NAMED.get(name, _MILITARY.get(name))
    if hours is not None:
        return timezone(timedelta(seconds=hours * _HOUR))
    numeric = _OFFSET.fullmatch(zone)
    if numeric is None:
        return None
    sign, hour, minute = numeric.groups()
    seconds = int(hour) * _HOUR + int(minute or 0) * 60
    if int(minute or 0) >= 60 or seconds >= 24 * _HOUR:
        return None
    return timezone(timedelta(seconds=-seconds if sign == "-" else seconds))


def note_unknown(zone: str) -> None:
    """Count a date read as UTC for want of a known zone (where a block counts them)."""
    notes = _NOTES.get()
    if notes is not None:
        notes.count += 1
        if notes.first is None:
            notes.first = zone
