"""A spider whose requests are its own, not ECHO's (``-a urls=a,b,...``): it yields each URL
twice, so the dupefilter drops the second; with ``JOBDIR``, a restart within
``ECHO_DUPEFILTER_TTL`` drops both."""

from __future__ import annotations

from typing import Any

import scrapy

from monitor.spiders.monitor import MonitorSpider


class PlainSpider(MonitorSpider):
    name = "plain"

    def __init__(self, urls: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = [url for url in urls.split(",") if url]

    async def start(self):  # type: ignore[override]
        for url in self.urls * 2:
            yield scrapy.Request(url, callback=self.parse_plain)

    def parse_plain(self, response: scrapy.http.Response) -> Any:
        self.crawler.stats.inc_value("monitor/plain_fetched")
        yield {"url": response.url}
