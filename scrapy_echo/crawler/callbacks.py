"""Where ECHO's own requests go: a source's response when the spider has no
``parse_source``, and new pages (checked when the crawl starts)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.http import Response

    from scrapy_echo.crawler.runtime import EchoRuntime

logger = logging.getLogger(__name__)


def source_seen(response: Response) -> list[Any]:
    """Callback of source requests when the spider has no ``parse_source``: the plugin's
    spider middleware has already taken the links; the spider has nothing to do."""
    return []


def check_page_callback(runtime: EchoRuntime) -> None:
    """Fail at start, not at the first new page, when new pages have nowhere to go; warn when
    they would go to a CrawlSpider's rule engine."""
    from scrapy.spiders import CrawlSpider

    callback = runtime.page_callback()  # ValueError names the setting
    spider = runtime.crawler.spider
    if isinstance(spider, CrawlSpider) and getattr(callback, "__name__", "") == "parse":
        logger.warning(
            "ECHO sends new pages to %s.parse, a CrawlSpider's rule engine: set "
            "ECHO_PAGE_CALLBACK to the method that parses an article",
            type(spider).__name__,
        )


__all__ = ["check_page_callback", "source_seen"]
