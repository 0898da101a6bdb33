"""A source response's links on their way through Scrapy's spider middlewares
(:mod:`scrapy_echo.crawler.link_collector`)."""

from __future__ import annotations

from dataclasses import dataclass

from scrapy_echo.core.events import SourceFetched


@dataclass
class LinkBatch:
    """A source response's links on their way through the spider middlewares."""

    url: str
    fetched: float
    links: list[tuple[str, float | None]]
    etag: str | None
    last_modified: str | None
    # Per link: what the middlewares added to its probe, None if dropped (so far); a link
    # seen before is never a page, and is sent no probe: "" from the start.
    treated: list[str | None]
    continued: bool = False  # a paginated hub's next page: more of the crawl at ``fetched``
    # Where this process cannot decide whether the crawl reads on (no crawl state): the
    # hub's next page and this one's number, for the planner (SourceFetched.next_page).
    next_page: str | None = None
    hub_page: int = 1

    def event(self) -> SourceFetched:
        return SourceFetched(
            self.url,
            self.fetched,
            tuple(self.links),
            self.etag,
            self.last_modified,
            tuple(self.treated),
            self.continued,
            self.next_page,
            self.hub_page,
        )


__all__ = ["LinkBatch"]
