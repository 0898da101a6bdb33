"""The crawl's I/O-free core: typed events in, the one writer of the crawl state
(:class:`CrawlCore`), decisions and plans out. The Scrapy glue, the Redis planner and the
simulator all drive it (docs/architecture.rst)."""

from scrapy_echo.core.crawl import CrawlCore
from scrapy_echo.core.pages import Dispatch, NewPage

__all__ = ["CrawlCore", "Dispatch", "NewPage"]
