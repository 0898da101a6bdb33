"""The paper's BFS as a user would hand-roll it in stock Scrapy, the baseline of the politeness
test: new pages first (a higher priority), then each source again as soon as it was read (a
fixed cycle); Scrapy's own scheduler and dupefilter, no ECHO (run with ``ECHO_ENABLED=False``).
"""

from __future__ import annotations

from typing import Any

import scrapy

from monitor.spiders.monitor import MonitorSpider


class BfsSpider(MonitorSpider):
    name = "bfs"

    def __init__(self, sources: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sources = [url for url in sources.split(",") if url]

    async def start(self):  # type: ignore[override]
        for url in self.sources:
            yield self._source(url)

    def _source(self, url: str) -> scrapy.Request:
        return scrapy.Request(
            url, callback=self.parse_source, errback=self.source_failed, dont_filter=True
        )

    def parse_source(self, response: scrapy.http.Response) -> Any:
        for href in response.css("a::attr(href)").getall():
            if "/a/" in href:  # an article; Scrapy's dupefilter drops those seen before
                yield response.follow(href, callback=self.parse, priority=1)
        yield self._source(response.url)

    def source_failed(self, failure: Any) -> Any:
        # A hand-rolled loop keeps trying a source that fails.
        yield self._source(failure.request.url)
