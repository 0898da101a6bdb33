"""A source response's links on their way through Scrapy's spider middlewares
(:mod:`scrapy_echo.crawler.link_collector`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scrapy_echo.core.events import SourceFetched


@dataclass
class LinkBatch:
    """A source response's links on their way through the spider middlewares."""

    url: str
    fetched: float
    links: list[tuple[str, float | None]]
    etag: str | None
    last_modified: str | None
    treated: list[str | None] = field(default_factory=list)  # None: dropped (so far)

    def __post_init__(self) -> None:
        self.treated = [None] * len(self.links)

    def event(self) -> SourceFetched:
        return SourceFetched(
            self.url,
            self.fetched,
            tuple(self.links),
            self.etag,
            self.last_modified,
            tuple(self.treated),
        )


__all__ = ["LinkBatch"]
