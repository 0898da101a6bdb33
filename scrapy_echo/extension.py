"""The settings path ``scrapy_echo.extension.EchoExtension``: the class lives in
:mod:`scrapy_echo.crawler.extension`."""

from scrapy_echo.crawler.extension import EchoExtension

__all__ = ["EchoExtension"]
