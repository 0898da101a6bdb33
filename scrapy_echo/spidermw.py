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
import math
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from scrapy_echo.outlinks import extract_outlinks, published_time
from scrapy_echo.runtime import EchoComponent

if TYPE_CHECKING:
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class EchoSpiderMiddleware(EchoComponent):
    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterator[Any]:
        yield from self.handle_response(response)
        yield from result

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        for request in self.handle_response(response):
            yield request
        async for item in result:
            yield item

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
        source = int(echo["source"])
        fetched = float(echo.get("fetched", self.runtime.clock()))
        spider = self.crawler.spider
        config = self.runtime.config
        links = extract_outlinks(
            response,
            getattr(spider, "echo_link_extractor", None),
            same_site=config.same_site,
            limit=config.max_links_per_source,
        )
        previous = self.state.sources[source].last_fetched
        new = set(self.state.source_crawled(source, fetched, [link.url for link in links]))
        self._inc("echo/sources/crawled")
        if not new:
            return []
        self._inc("echo/pages/new", len(new))
        window_start = previous if math.isfinite(previous) else fetched
        midpoint = 0.5 * (window_start + fetched)
        callback = self._page_callback()
        requests = []
        for link in links:
            if link.url not in new:
                continue
            stated = link.published
            fits = stated is not None and window_start <= stated <= fetched
            meta = {
                "kind": "page",
                "source": source,
                "page": link.url,
                "appeared": stated if fits else midpoint,
                "window": (window_start, fetched),
                "discovered": fetched,
            }
            requests.append(Request(link.url, callback=callback, meta={"echo": meta}))
        if config.debug:
            logger.debug("ECHO %d new pages on %s", len(requests), response.url)
        return requests

    def _page_response(self, response: Response, echo: dict[str, Any]) -> None:
        appeared = float(echo["appeared"])
        start, end = echo.get("window", (appeared, appeared))
        stated = published_time(response)
        if stated is not None and start <= stated <= end:
            appeared = stated
            self._inc("echo/pages/published_time_used")
        fetched = float(echo.get("fetched", self.runtime.clock()))
        self.state.page_crawled(str(echo["page"]), int(echo["source"]), appeared, fetched)
        self._inc("echo/pages/crawled")

    def _page_callback(self) -> Any:
        spider = self.crawler.spider
        name = getattr(spider, "echo_page_callback", None)
        if callable(name):
            return name
        return getattr(spider, name or "parse")
