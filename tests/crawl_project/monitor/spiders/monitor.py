"""A spider as a user writes one: sources from ECHO_SOURCES, articles to ``parse``.

At close it writes the crawl's stats to the JSON file named by ``-a stats_out=...``, so tests
can read what happened without parsing logs.
"""

from __future__ import annotations

import json
from typing import Any

import scrapy

from monitor.middlewares import refused


class MonitorSpider(scrapy.Spider):
    name = "monitor"

    def __init__(self, stats_out: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stats_out = stats_out

    async def start(self):  # type: ignore[override]
        # No start requests: ECHO crawls the sources itself.
        return
        yield

    def parse(self, response: scrapy.http.Response) -> Any:
        if response.meta.get("echo_refresh"):  # the refresh lane's refetch of a page
            self.crawler.stats.inc_value("monitor/refreshed")
        else:
            self._count_treatment(response)
        yield {"url": response.url, "title": response.css("h1::text").get()}

    def _count_treatment(self, response: scrapy.http.Response) -> None:
        """What the spider middlewares did to this new page's request (DropSomeLinks, the
        project's own, when enabled; Scrapy's depth and referer ones)."""
        stats = self.crawler.stats
        if refused(response.url):
            stats.inc_value("monitor/refused_fetched")
        if response.meta.get("tag") == "kept":
            stats.inc_value("monitor/tagged")
        stats.inc_value(f"monitor/depth/{response.meta.get('depth')}")
        referer = response.request.headers.get("Referer", b"").decode()
        if referer and referer == response.meta["echo"]["source_url"]:
            stats.inc_value("monitor/referer_is_source")

    def closed(self, reason: str) -> None:
        if self.stats_out:
            stats = {
                k: v
                for k, v in self.crawler.stats.get_stats().items()
                if k.startswith(
                    (
                        *("echo/", "item_", "finish_reason", "downloader/response_status"),
                        *("scheduler/", "monitor/", "dupefilter/"),
                    )
                )
            }
            stats["finish_reason"] = reason
            with open(self.stats_out, "w", encoding="utf-8") as handle:
                json.dump(stats, handle, default=str)
