"""Where ECHO's own requests go: a source's response when the spider has no
``parse_source``, and new pages, through the pair of spider middlewares that finds them
(both checked when the crawl starts)."""

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


def check_link_middlewares(runtime: EchoRuntime) -> None:
    """``ValueError`` unless ECHO's spider middleware has its link collector outside it in
    ``SPIDER_MIDDLEWARES``: without it no source's links become pages, and no request is
    ever marked done."""
    from scrapy.utils.misc import load_object

    from scrapy_echo.crawler.link_collector import EchoLinkCollector
    from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware

    orders: dict[type, float] = {}
    for path, order in runtime.crawler.settings.getwithbase("SPIDER_MIDDLEWARES").items():
        if order is None:
            continue
        try:
            cls = load_object(path) if isinstance(path, str) else path
        except (ImportError, NameError, ValueError, AttributeError):
            continue  # (Scrapy names a broken path itself)
        for ours in (EchoSpiderMiddleware, EchoLinkCollector):
            if isinstance(cls, type) and issubclass(cls, ours):
                orders[ours] = float(order)
    inner, outer = orders.get(EchoSpiderMiddleware), orders.get(EchoLinkCollector)
    if inner is None or outer is None or outer >= inner:
        raise ValueError(
            "ECHO needs both its spider middlewares, the link collector outside the other: "
            'SPIDER_MIDDLEWARES = {"scrapy_echo.spidermw.EchoSpiderMiddleware": 950, '
            '"scrapy_echo.spidermw.EchoLinkCollector": 10} (the add-on sets both); found '
            f"EchoSpiderMiddleware at {inner}, EchoLinkCollector at {outer}"
        )


__all__ = ["check_link_middlewares", "check_page_callback", "source_seen"]
