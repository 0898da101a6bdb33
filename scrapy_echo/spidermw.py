"""The settings paths ``scrapy_echo.spidermw.EchoSpiderMiddleware`` and
``scrapy_echo.spidermw.EchoLinkCollector``: the classes live in
:mod:`scrapy_echo.crawler.spidermw` and :mod:`scrapy_echo.crawler.link_collector`."""

from scrapy_echo.crawler.link_collector import EchoLinkCollector
from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware

__all__ = ["EchoLinkCollector", "EchoSpiderMiddleware"]
