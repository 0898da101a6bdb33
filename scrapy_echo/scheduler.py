"""The settings path ``scrapy_echo.scheduler.EchoScheduler``: the class lives in
:mod:`scrapy_echo.crawler.scheduler`."""

from scrapy_echo.crawler.scheduler import EchoScheduler

__all__ = ["EchoScheduler"]
