"""The settings path ``scrapy_echo.metrics.EchoMetrics``: the class lives in
:mod:`scrapy_echo.crawler.metrics`."""

from scrapy_echo.crawler.metrics import EchoMetrics

__all__ = ["EchoMetrics"]
