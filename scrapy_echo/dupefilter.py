"""The settings path ``scrapy_echo.dupefilter.EchoDupeFilter``: the class lives in
:mod:`scrapy_echo.crawler.dupefilter`."""

from scrapy_echo.crawler.dupefilter import EchoDupeFilter

__all__ = ["EchoDupeFilter"]
