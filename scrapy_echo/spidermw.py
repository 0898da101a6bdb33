"""Spider middleware: new pages out of source responses, and the crawl of each new page.

On a source response it takes the source's outlinks (:mod:`scrapy_echo.outlinks`), keeps those
never seen before, records the crawl's yield for ``λ``, and sends a request for each new page,
tagged with its source and estimated appearance time: the midpoint of the source's last two
crawls, or the time the source itself states (a feed's ``pubDate``) when it falls in that
window. On a new page's response it tells the learner the page was crawled, with the page's own
published time when it states one that fits. The spider's callbacks still get every response.

New pages go to the spider's ``parse`` unless the spider names another callback in
``echo_page_callback``; a spider may also set ``echo_link_extractor`` (a ``LinkExtractor``).
It sits at 950, next to the spider, so the new page requests pass through Scrapy's own
middlewares (depth, referer, URL length) like the spider's requests do.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy_echo.core.events import PageFetched, SourceFetched
from scrapy_echo.outlinks import extract_outlinks, published_time
from scrapy_echo.runtime import EchoComponent

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class EchoSpiderMiddleware(EchoComponent):
    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterator[Any]:
        yield from self.handle_response(response)
        yield from result
        self.runtime.done(response.request)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        for request in self.handle_response(response):
            yield request
        async for item in result:
            yield item
        self.runtime.done(response.request)

    def process_spider_exception(self, response: Response, exception: Exception) -> None:
        # The response is handled (the spider failed on it, or Scrapy filtered it out).
        self.runtime.done(response.request)

    def handle_response(self, response: Response) -> list[Request]:
        """Record what ``response`` tells ECHO; the new page requests it yields."""
        echo = response.meta.get("echo")
        if not isinstance(echo, dict):
            return []
        if echo.get("kind") == "source":
            return self._source_response(response, echo)
        if echo.get("kind") == "page":
            self._page_response(response, echo)
        return []

    def _source_response(self, response: Response, echo: dict[str, Any]) -> list[Request]:
        config = self.runtime.config
        links = extract_outlinks(
            response,
            getattr(self.crawler.spider, "echo_link_extractor", None),
            same_site=config.same_site,
            limit=config.max_links_per_source,
        )
        event = SourceFetched(
            str(echo.get("url", response.url)),
            float(echo.get("fetched", self.runtime.clock())),
            tuple((link.url, link.published) for link in links),
            echo.get("etag"),
            echo.get("lm"),
        )
        requests = self.runtime.observe(event)
        self.inc_stat("echo/sources/crawled")
        if requests:
            self.inc_stat("echo/pages/new", len(requests))
            if config.debug:
                logger.debug("ECHO %d new pages on %s", len(requests), response.url)
        return requests

    def _page_response(self, response: Response, echo: dict[str, Any]) -> None:
        appeared = float(echo["appeared"])
        start, end = echo.get("window", (appeared, appeared))
        stated = published_time(response)
        if stated is not None and start <= stated <= end:
            appeared = stated
            self.inc_stat("echo/pages/published_time_used")
        source_url = echo.get("source_url")
        if source_url is None:  # a request queued by an earlier version (JOBDIR)
            source_url = self.state.sources[int(echo["source"])].url
        event = PageFetched(
            str(echo["page"]),
            str(source_url),
            appeared,
            float(echo.get("fetched", self.runtime.clock())),
        )
        self.runtime.observe(event)
        self.inc_stat("echo/pages/crawled")
