"""The settings path ``scrapy_echo.spidermw.EchoSpiderMiddleware``: the class lives in
:mod:`scrapy_echo.crawler.spidermw`."""

from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware

__all__ = ["EchoSpiderMiddleware"]
