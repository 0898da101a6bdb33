"""The demo's spiders: ECHO monitoring the embedded news site, and the stock-Scrapy baseline.

Each starts its own copy of the site (same seed, so the same articles at the same times) on a
free port when the crawl opens, and at close writes the site's own count of what was caught
(:func:`echo_demo.site.score`) to the file named by ``-a score_out=...``.
"""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any, ClassVar

import scrapy
from scrapy import signals
from scrapy.linkextractors import LinkExtractor

from echo_demo.clicks import ClickSimulator
from echo_demo.site import NewsSite, SiteModel, SiteParams, score, start_site

logger = logging.getLogger(__name__)


class _DemoSite(scrapy.Spider):
    """What both spiders share: the embedded site, its hubs as sources, the score at close."""

    def __init__(
        self,
        seed: str = "0",
        score_out: str = "",
        warmup: str = "20",
        until: str = "inf",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.model = SiteModel(SiteParams(seed=int(seed)))
        self.site = NewsSite(self.model)
        self.port, self._stop_site = start_site(self.site)
        self.base = f"http://127.0.0.1:{self.port}"
        self.hubs = [f"{self.base}/section/{section.name}/" for section in self.model.sections]
        self.score_out = score_out
        self.warmup = float(warmup)
        self.until = float(until)  # end of the scored window (site seconds; inf: the close)

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Any:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.spider_closed, signal=signals.spider_closed)
        return spider

    def parse(self, response: scrapy.http.Response) -> Any:
        yield {"url": response.url, "title": response.css("h1::text").get()}

    def spider_closed(self, reason: str) -> None:
        now = self.site.clock()
        result = score(self.site, start=self.warmup, end=min(now, self.until))
        result["finish_reason"] = reason
        if self.score_out:
            Path(self.score_out).write_text(json.dumps(result, default=float))
        self._stop_site()


class NewsSpider(_DemoSite):
    """ECHO: the hubs are sources; each new article found on them goes to ``parse``."""

    name = "news"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.echo_sources = self.hubs
        self.echo_link_extractor = LinkExtractor(allow=r"/article/")

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> Any:
        spider = super().from_crawler(crawler, *args, **kwargs)
        feed = crawler.settings.get("ECHO_CLICK_FEED")
        if feed:
            # The site's visitors: clicks on the articles this crawler fetched, as a search
            # engine would log them, appended to the feed ECHO reads.
            spider.clicks = ClickSimulator(spider.site, Path(feed), port=spider.port)
            spider.clicks.start()
        return spider

    async def start(self) -> Any:
        return
        yield


class BaselineSpider(_DemoSite):
    """Stock Scrapy, written the way a careful user would: new articles first, then the next
    hub in a fixed round-robin; one hub in flight at a time. ECHO is off for it."""

    name = "baseline"
    custom_settings: ClassVar[dict[str, Any]] = {
        "ADDONS": {},
        "SCHEDULER": "scrapy.core.scheduler.Scheduler",
    }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._cycle = itertools.cycle(self.hubs)
        self._articles = LinkExtractor(allow=r"/article/")

    async def start(self) -> Any:
        yield self._next_hub()

    def _next_hub(self) -> scrapy.Request:
        return scrapy.Request(next(self._cycle), callback=self.parse_hub, dont_filter=True)

    def parse_hub(self, response: scrapy.http.Response) -> Any:
        for link in self._articles.extract_links(response):
            yield scrapy.Request(link.url, callback=self.parse, priority=1)
        yield self._next_hub()
