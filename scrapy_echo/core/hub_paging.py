"""When a hub crawl reads on past the first page: the rule the live spider middleware and the
replay both follow (docs/monitor.rst, "Paginated hubs").

A busy hub pushes what it published between two crawls past its first page. A crawl reads
the next page when the first shows that the hub overflowed since its last look: a new link,
and none of the content links the overflow watch kept from that look
(:mod:`scrapy_echo.model.estimation.overflow`); while the watch knows none yet (the first
crawl to find new links), the first page alone cannot tell, and the next is read. Not "every
link new": a real hub page lists its site's navigation too (home, the sections, itself),
seen since the first crawl, so that rule never read on. A next page continues while it shows
a new link and no link the hub showed before this crawl; links the crawl's earlier pages
showed are not such (their navigation, and what a hub still publishing pushed down between
two reads), nor links that name a source. A hub lists newest first, so what a next page
lists past a link shown before is older still (the backlog past what the first crawl saw):
not new. Never at a source's first crawl (its backlog is not new).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from scrapy_echo.core.identity import fold_scheme
from scrapy_echo.core.state import CrawlState, fingerprint


class HubPaging:
    """Per source whose crawl reads on past its hub's first page, the links the pages it read
    so far showed; forgotten when the crawl stops reading on."""

    def __init__(self) -> None:
        self._read: dict[int, set[int]] = {}

    def boundary(
        self, state: CrawlState, source: int, page: int, urls: Sequence[str], known: Sequence[bool]
    ) -> int | None:
        """On page ``page`` (> 1) of a crawl of ``source`` read on here, the position of the
        first link the hub showed before this crawl (``known``: per link, seen before); the
        page's links past it are not new. ``None`` if there is none, on a first page, or for
        a next page this process did not read on to (one restored from a JOBDIR)."""
        if page <= 1 or not known:
            return None
        read = self._read.get(source)
        if read is None:
            return None
        sources = state.source_ids
        for position, (url, seen) in enumerate(zip(urls, known, strict=True)):
            key = fold_scheme(url)
            if seen and fingerprint(key) not in read and key not in sources:
                return position
        return None

    def reads_on(
        self,
        state: CrawlState,
        source: int,
        page: int,
        urls: Sequence[str],
        known: Sequence[bool],
        boundary: int | None,
        *,
        most: int,
    ) -> Literal["next", "stop", "cut"]:
        """Whether the crawl of ``source`` that read page ``page`` (its links ``urls``, up
        to its :meth:`boundary`; ``known`` per link) reads the next: ``"next"``, ``"stop"``,
        or ``"cut"`` (it would, but ``most`` next pages were read). Asked before the page's
        links reach the state."""
        if page == 1:
            first = state.sources[source].crawls == 0
            overflowed = not first and self._first_page_overflowed(state, source, urls, known)
        else:
            overflowed = source in self._read and boundary is None and not all(known)
        if not overflowed or page > most:
            self._read.pop(source, None)
            return "cut" if overflowed else "stop"
        read = self._read.get(source, set()) if page > 1 else set()
        self._read[source] = read | {fingerprint(fold_scheme(url)) for url in urls}
        return "next"

    @staticmethod
    def _first_page_overflowed(
        state: CrawlState, source: int, urls: Sequence[str], known: Sequence[bool]
    ) -> bool:
        if all(known):
            return False
        watch = state.overflow
        content = set(watch.kept[source]) if source < len(watch.kept) else set()
        return not content.intersection(fingerprint(fold_scheme(url)) for url in urls)


__all__ = ["HubPaging"]
