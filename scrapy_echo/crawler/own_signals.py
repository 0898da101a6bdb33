"""The change signals a crawl's own source responses carry: a date stated for a source (a
sitemap index's ``lastmod`` for a sitemap it lists, a dated link to a known source) that
moved since it was last seen.

Each source URL keeps the latest date seen for it, and a date counts only when it moves past
that mark. A date ahead of the crawl's clock at the fetch (beyond :data:`CLOCK_SKEW`) is no
time yet: a generator's clock or zone is wrong, or it stamps a planned date. It does not raise
the mark, or one ``lastmod`` a day ahead would make every later, real one look old for a day.
It is still a change when it differs from the last such date (it moved, whatever its clock
says), signalled at the fetch time; when the clock later catches up with it, it is not
signalled a second time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, NamedTuple

from scrapy_echo.inputs.signalfeed import SignalRow

if TYPE_CHECKING:
    from collections.abc import Mapping

# Seconds a stated date may lie ahead of the clock and still be taken as a time: clocks of
# servers that keep time differ by less; a date further ahead is not a clock's drift.
CLOCK_SKEW = 600.0


class DatesMoved(NamedTuple):
    signals: list[SignalRow]
    ahead: dict[str, float]  # the dates that lay ahead of the clock, by URL


class OwnSignals:
    """Per source URL, the latest date seen, and the last one that came ahead of the clock."""

    def __init__(self) -> None:
        self._marks: dict[str, float] = {}
        self._early: dict[str, float] = {}

    def moved(self, dated: Mapping[str, float], fetched: float) -> DatesMoved:
        """The signals the dates of a response fetched at ``fetched`` give.

        >>> own = OwnSignals()
        >>> own.moved({"http://a/s.xml": 1000.0}, fetched=2000.0).signals
        [SignalRow(url='http://a/s.xml', ts=1000.0)]
        >>> early = own.moved({"http://a/s.xml": 90000.0}, fetched=2000.0)  # a day ahead
        >>> early.signals, early.ahead
        ([SignalRow(url='http://a/s.xml', ts=2000.0)], {'http://a/s.xml': 90000.0})
        >>> own.moved({"http://a/s.xml": 1500.0}, fetched=2100.0).signals
        [SignalRow(url='http://a/s.xml', ts=1500.0)]
        """
        moved = DatesMoved([], {})
        for url, changed in dated.items():
            if changed > fetched + CLOCK_SKEW:
                moved.ahead[url] = changed
                if self._early.get(url) != changed:
                    self._early[url] = changed
                    moved.signals.append(SignalRow(url, fetched))
            elif changed > self._marks.get(url, -math.inf):
                self._marks[url] = changed
                if self._early.get(url) == changed:
                    del self._early[url]  # signalled when it came early
                else:
                    moved.signals.append(SignalRow(url, changed))
        return moved
