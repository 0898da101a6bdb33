"""The Scrapy signals ECHO sends (``scrapy_echo.signals.page_found``, ``source_retired``);
they are defined in :mod:`scrapy_echo.crawler.signals`."""

from scrapy_echo.crawler.signals import page_found, source_retired

__all__ = ["page_found", "source_retired"]
