"""Spider middleware at the far end of the chain: what Scrapy's spider middlewares made of a
source's links, gathered into the source crawl's event.

:class:`~scrapy_echo.crawler.spidermw.EchoSpiderMiddleware` (950, next to the spider) turns
each link of a source's response into a probe request
(:func:`~scrapy_echo.crawler.echo_requests.link_request`) and yields it; the probes pass every
spider middleware in between (depth, URL length, referer, the project's own), as a page
request would. This middleware (10, next to the engine) takes the probes that come out, never
lets them reach the scheduler, and when the response's output is over sends one
:class:`~scrapy_echo.core.events.SourceFetched` with, per link, what the middlewares added to
it or that one dropped it. In one process the core applies it and queues the new pages; in
distributed mode it goes to the planner, which does the same. So a new page is treated alike
in both modes, and the frontier holds pages, not requests.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy import Request

from scrapy_echo.crawler.echo_requests import LINK, extras_of
from scrapy_echo.crawler.runtime import EchoComponent

if TYPE_CHECKING:
    from scrapy.http import Response

logger = logging.getLogger(__name__)

ORDER = 10  # in SPIDER_MIDDLEWARES: after (outside) every middleware a page request passes


class EchoLinkCollector(EchoComponent):
    """``SPIDER_MIDDLEWARES = {"scrapy_echo.spidermw.EchoLinkCollector": 10}`` (the add-on
    adds it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unstorable_logged: set[str] = set()

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterator[Any]:
        try:
            for item in result:
                if not self._took(response, item):
                    yield item
        finally:
            self._finish(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        try:
            async for item in result:
                if not self._took(response, item):
                    yield item
        finally:
            self._finish(response)

    def process_spider_exception(self, response: Response, exception: Exception) -> None:
        self._finish(response)

    def _took(self, response: Response, item: Any) -> bool:
        """Whether ``item`` is a link's probe (taken, never yielded on)."""
        if not isinstance(item, Request):
            return False
        echo = item.meta.get("echo")
        if not isinstance(echo, dict) or echo.get("kind") != LINK:
            return False
        batch = self.runtime.link_batches.get(id(response))
        index = echo.get("index")
        if batch is None or not isinstance(index, int) or not 0 <= index < len(batch.links):
            self.inc_stat("echo/links/stray_probe")  # another response's, copied by a middleware
            return True
        if batch.treated[index] is None:
            extras, unstorable = extras_of(item)
            batch.treated[index] = extras
            if item.url != batch.links[index][0]:  # a middleware rewrote the URL: that page
                batch.links[index] = (item.url, batch.links[index][1])
            if unstorable:
                self._unstorable(unstorable)
        return True

    def _unstorable(self, keys: list[str]) -> None:
        self.inc_stat("echo/links/meta_not_stored", len(keys))
        for key in keys:
            if key not in self._unstorable_logged:  # once per key, then counted
                self._unstorable_logged.add(key)
                logger.warning(
                    "ECHO: a spider middleware put meta[%r] on a new page's request, and its "
                    "value is not JSON data: the page is kept without it (a waiting page is "
                    "stored as data)",
                    key,
                )

    def _finish(self, response: Response) -> None:
        """The response's output is over: its source crawl's event, and the request done."""
        batch = self.runtime.link_batches.pop(id(response), None)
        if batch is not None:
            dropped = batch.treated.count(None)
            if dropped:
                self.inc_stat("echo/links/dropped_by_middlewares", dropped)
            self.runtime.observe(batch.event())
            if not batch.continued:  # (a hub's next page is more of a crawl counted already)
                self.inc_stat("echo/sources/crawled")
        self.runtime.done(response.request)


__all__ = ["ORDER", "EchoLinkCollector"]
