"""The settings path ``scrapy_echo.downloadermw.EchoDownloaderMiddleware``: the class lives in
:mod:`scrapy_echo.crawler.downloadermw`."""

from scrapy_echo.crawler.downloadermw import EchoDownloaderMiddleware

__all__ = ["EchoDownloaderMiddleware"]
