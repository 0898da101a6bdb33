"""What a source crawl or a change signal does to the crawl state: the parts of
:meth:`CrawlCore.apply <scrapy_echo.core.crawl.CrawlCore.apply>` and
:meth:`CrawlCore.signal <scrapy_echo.core.crawl.CrawlCore.signal>` that touch only the state
(the core adds the policy's bookkeeping)."""

from __future__ import annotations

import math

from scrapy_echo.core.events import SourceFetched
from scrapy_echo.core.identity import PageIdentity
from scrapy_echo.core.pages import NewPage, link_treatment, pages_found
from scrapy_echo.core.state import CrawlState


def source_fetched(
    state: CrawlState,
    source: int,
    event: SourceFetched,
    *,
    backlog: str,
    crawl_started: dict[int, float],
) -> list[NewPage]:
    """A source crawl's new pages, recorded in ``state``; ``crawl_started`` keeps, per
    source, the crawl before this one (the window of the pages its hub's next pages list)."""
    status = state.sources[source]
    status.etag, status.last_modified = event.etag, event.last_modified
    state.changed_sources.add(source)
    previous = status.last_fetched
    urls = [url for url, _ in event.links] if event.links else []
    if math.isnan(state.started):
        state.started = event.t
    # On a source's first crawl its links are only recorded (ECHO_BACKLOG = "skip", the
    # paper), except those it says were published since this crawl began (a sitemap found
    # mid-crawl lists them too); with "crawl" they are all pages to fetch.
    first = status.crawls == 0
    if not first or not event.links:
        fresh = None
    elif backlog == "crawl":  # what it lists already: pages to fetch too
        fresh = set(urls)
    else:
        started = state.started
        fresh = {url for url, stated in event.links if stated is not None and stated >= started}
    dates = {url: when for url, when in event.links if when is not None}
    extras, refused = link_treatment(event.links, event.treated)
    found = state.source_crawled(source, event.t, urls, fresh, dates, refused)
    crawl_started[source] = previous
    if not found:
        return []
    fetched = status.last_fetched  # the fetch time, never before the previous one
    return pages_found(
        event.links, found, source, status.url, previous, fetched, first=first, extras=extras
    )


def source_continued(
    state: CrawlState, source: int, event: SourceFetched, *, crawl_started: dict[int, float]
) -> list[NewPage]:
    """A further page of the source's last crawl: its new links are pages of that crawl,
    its window the crawl's (the pages a hub pushed down appeared before its last look)."""
    status = state.sources[source]
    if status.crawls == 0 or not event.links:  # (a first crawl's pages are its backlog)
        return []
    extras, refused = link_treatment(event.links, event.treated)
    urls = [url for url, _ in event.links]
    found = state.source_continued(source, event.t, urls, refused)
    if not found:
        return []
    fetched = status.last_fetched
    previous = crawl_started.get(source, fetched)
    return pages_found(
        event.links, found, source, status.url, previous, fetched, first=False, extras=extras
    )


def route_signal(state: CrawlState, identity: PageIdentity, url: str, t: float) -> str:
    """A change-indicating signal naming ``url`` at ``t``, recorded against its source (see
    :meth:`CrawlCore.signal <scrapy_echo.core.crawl.CrawlCore.signal>`); what became of it."""
    try:
        key = identity.key(url)
    except ValueError:
        return "unmatched"
    source = state.source_ids.get(key)
    how = "source"
    if source is None:
        source = state.learner.source_of_page(state.aliases.get(key, key))
        how = "page"
        if source is None:
            return "unmatched"
    status = state.sources[source]
    if status.retired or status.removed:
        return "inactive"
    last = status.last_fetched
    if not math.isnan(last) and t <= last:
        return "stale"
    state.signals.add(source, t)
    return how


__all__ = ["route_signal", "source_continued", "source_fetched"]
