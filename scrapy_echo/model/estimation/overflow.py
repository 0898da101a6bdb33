"""Which source crawls overflowed: the hub showed only its latest links, and every link it had
listed before as new was gone, so the new links counted are only a floor ("at least ``n``").

A hub shows its latest ``K`` links. If any link that was new at an earlier crawl is still
listed, the links that came since were all seen: the count is complete. If none is, ``K`` or
more links came since, and some may have left before the crawl (docs/how-it-works.rst,
"Hubs that show only their latest links"). Per source, :class:`OverflowWatch` keeps the
fingerprints of the content links it listed last (new at some crawl, still listed), at most
:data:`KEPT` of them, and tells each crawl whether any survived.
"""

from __future__ import annotations

from typing import Any

KEPT = 16  # content links remembered per source: both ends of a listing, whatever its order
# New links whose dates all fall within this share of the interval are stamped, not dated.
_BUNCHED = 1e-3


class OverflowWatch:
    """Per source, the content links its last crawl listed; :meth:`crawled` tells whether a
    crawl overflowed.

    >>> watch = OverflowWatch()
    >>> watch.crawled(0, listed=[1, 2, 3], new=[])  # first crawl: nothing known yet
    False
    >>> watch.crawled(0, listed=[1, 2, 3, 4], new=[4])  # 4 is content now
    False
    >>> watch.crawled(0, listed=[1, 2, 5, 6], new=[5, 6])  # 4 is gone: overflow
    True
    >>> watch.crawled(0, listed=[1, 2, 6, 7], new=[7])  # 6 survived: complete
    False
    """

    def __init__(self) -> None:
        self.kept: list[tuple[int, ...]] = []
        self.overflows: list[int] = []  # crawls that overflowed, per source
        self.knew = False  # whether the last crawled() knew content links to look for

    def grow(self, sources: int) -> None:
        extra = sources - len(self.kept)
        if extra > 0:
            self.kept += [()] * extra
            self.overflows += [0] * extra

    def crawled(self, source: int, *, listed: list[int], new: list[int]) -> bool:
        """A crawl of ``source`` listed ``listed`` (fingerprints), of which ``new`` are new;
        returns whether it overflowed. A crawl that shows no link at all (an empty or broken
        page) leaves what is kept as it was."""
        if source >= len(self.kept):
            self.grow(source + 1)
        if not listed:
            return False
        kept = self.kept[source]
        self.knew = bool(kept)
        shown = set(listed)
        survivors = tuple(mark for mark in kept if mark in shown)
        overflowed = bool(kept) and not survivors and bool(new)
        if new:
            # Listings run newest first or oldest first: keep both ends of the new links.
            half = KEPT // 2
            latest = tuple(new) if len(new) <= KEPT else (*new[:half], *new[-half:])
            self.kept[source] = (latest + survivors)[:KEPT]
        else:
            self.kept[source] = survivors
        if overflowed:
            self.overflows[source] += 1
        return overflowed

    def censoring(
        self,
        source: int,
        overflowed: bool,
        new: list[str],
        stated: dict[str, float],
        previous: float,
        fetched: float,
    ) -> tuple[float, bool]:
        """For a crawl of ``source`` over ``(previous, fetched]`` that found the ``new`` links
        (the watch said whether it ``overflowed``; ``stated``: the listing's publication times
        by link): the seconds at the start of the interval its count does not cover, and
        whether the count is only a floor."""
        dated = [stated[link] for link in new if link in stated]
        # Dates stamped at the fetch (a sitemap's generation time as every lastmod) say
        # nothing of when the links came.
        informative = len(dated) == len(new) and max(dated) - min(dated) > _BUNCHED * (
            fetched - previous
        )
        # Without content links to look for (the second crawl), a dated listing that shows
        # nothing from before the last crawl overflowed; the watch's survivors overrule dates.
        if not overflowed and not self.knew and informative and min(stated.values()) > previous:
            overflowed = True
            self.overflows[source] += 1
        if not overflowed:
            return 0.0, False
        if not informative:
            return 0.0, True
        # A dated overflow: the count covers the time since the oldest new link still shown.
        cut = min(dated) - previous
        return (cut, False) if 0 < cut < fetched - previous else (0.0, True)

    def to_data(self) -> dict[str, Any]:
        return {"kept": [list(k) for k in self.kept], "overflows": list(self.overflows)}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> OverflowWatch:
        """From :meth:`to_data`; ``ValueError`` or ``TypeError`` if the data is not one."""
        out = cls()
        out.kept = [tuple(int(m) for m in marks) for marks in data["kept"]]
        out.overflows = [int(n) for n in data["overflows"]]
        if len(out.kept) != len(out.overflows):
            raise ValueError("overflow watch lists of different lengths")
        return out


__all__ = ["KEPT", "OverflowWatch"]
