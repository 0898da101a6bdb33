"""The trace as the web a replay's crawler meets: URLs for its sources and pages, what a
source shows when crawled (a page at a time, on a trace whose hubs are paginated), a page's
content at a time, and the trace's signals and clicks handed out as their time comes."""

from __future__ import annotations

import math
from bisect import bisect_right
from itertools import pairwise
from urllib.parse import urlsplit

import numpy as np

from scrapy_echo.core.crawl import CrawlCore
from scrapy_echo.sim.links import LinkIndex
from scrapy_echo.sim.trace import Trace
from scrapy_echo.sim.web_hosts import first_sources

_PAGE_URL = "https://sim.invalid/p/"


class TraceWeb:
    """The trace as the web a crawler sees: URLs for its sources and pages, what a source
    shows when crawled, and a page's content digest at a time.

    Sources and pages get URLs (``https://h<host>.sim.invalid/s/<id>``, the host numbered
    after the trace's URL of the source, and ``https://sim.invalid/p/<id>``; on a trace with
    hosts, ``https://h<host>.sim.invalid/p/<id>``, on the host of the source that listed the
    page first, as a live hub's pages are on its host)."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.links = LinkIndex(trace)
        hosts: dict[str, int] = {}
        self.source_urls = [
            f"https://h{hosts.setdefault(urlsplit(url).hostname or '', len(hosts))}"
            f".sim.invalid/s/{i}"
            for i, url in enumerate(trace.source_urls)
        ]
        if trace.hosts:  # each page on the host of the source that listed it first
            own = first_sources(
                trace.link_page, trace.link_source, trace.link_appeared, trace.n_pages
            ).tolist()
            host = [urlsplit(url).hostname for url in self.source_urls]
            self.page_urls = [f"https://{host[own[p]]}/p/{p}" for p in range(trace.n_pages)]
        else:
            self.page_urls = [f"{_PAGE_URL}{page}" for page in range(trace.n_pages)]
        self.page_ids = {url: page for page, url in enumerate(self.page_urls)}
        self.created = trace.page_created.tolist()
        self._versions = _Versions(trace)

    def shown(
        self,
        source: int,
        previous: float,
        now: float,
        *,
        page: int = 1,
        size: int = 0,
        newest_first: bool = False,
    ) -> tuple[tuple[str, float | None], ...]:
        """What a crawl of ``source`` at ``now`` reports, its previous crawl at ``previous``
        (NaN: never): the links that appeared since, and the newest still shown from before
        (all it shows, at a first crawl), each with its stated time if the listing is
        dated. With ``size``, the hub shows ``size`` links a page, and this is its page
        ``page``: the new links on it, and the newest from before if it reaches that far.
        ``newest_first``: in a hub's order, newest first (a replay with hosts; the core
        fetches the first listed of a crawl's undated links first), else oldest first."""
        links = self.links
        if previous != previous:
            shown = links.visible(source, now)
            if size:
                shown = shown[max(0, len(shown) - page * size) : len(shown) - (page - 1) * size]
            if newest_first:
                shown.reverse()
        else:
            shown = links.appeared_between(source, previous, now)
            fills = size and len(shown) >= page * size  # the page shows new links only
            if size:
                shown = shown[
                    max(0, len(shown) - page * size) : max(0, len(shown) - (page - 1) * size)
                ]
            if newest_first:
                shown.reverse()
            survivor = None if fills else links.newest_before(source, previous, now)
            if survivor is not None:
                shown.append(survivor)
        if not shown:
            return ()
        page_urls = self.page_urls
        if self.trace.dated(source):
            created = self.created
            return tuple([(page_urls[p], created[p]) for p in shown])
        return tuple([(page_urls[p], None) for p in shown])

    def digest(self, page: int, now: float) -> str:
        """``page``'s content at ``now``: how many of its updates came by then."""
        return self._versions.digest(page, now)


class _Versions:
    """Each page's content version at a time: how many of its updates came by then."""

    def __init__(self, trace: Trace) -> None:
        pages, ts = trace.update_page, trace.update_ts
        bounds = np.searchsorted(pages, np.arange(trace.n_pages + 1)).tolist()
        times = ts.tolist()
        self._times = {
            page: times[lo:hi] for page, (lo, hi) in enumerate(pairwise(bounds)) if hi > lo
        }

    def digest(self, page: int, now: float) -> str:
        return str(bisect_right(self._times.get(page, ()), now))


class Signals:
    """The trace's change-indicating signals, handed to the core as their time comes."""

    def __init__(self, trace: Trace | None) -> None:
        self.source = [] if trace is None else trace.signal_source.tolist()
        self.ts = [] if trace is None else trace.signal_ts.tolist()
        self.position = 0
        self.next_at = self.ts[0] if self.ts else math.inf

    def deliver(self, core: CrawlCore, now: float, source_urls: list[str]) -> None:
        # As a live crawl takes them: one from before the source's last crawl is stale.
        ts, at = self.ts, self.position
        while at < len(ts) and ts[at] <= now:
            core.signal(source_urls[self.source[at]], ts[at])
            at += 1
        self.position = at
        self.next_at = ts[at] if at < len(ts) else math.inf


class ClickLog:
    """The trace's clicks, handed out in time order, one push at a time."""

    def __init__(self, trace: Trace) -> None:
        self.page = trace.click_page
        self.ts = trace.click_ts
        self.count = trace.click_count
        self.position = 0

    def until(self, time: float) -> tuple[list[int], list[float], list[float]]:
        end = int(np.searchsorted(self.ts, time, side="right"))
        start, self.position = self.position, end
        return (
            self.page[start:end].tolist(),
            self.ts[start:end].tolist(),
            self.count[start:end].tolist(),
        )


__all__ = ["ClickLog", "Signals", "TraceWeb"]
