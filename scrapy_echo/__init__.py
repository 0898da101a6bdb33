"""scrapy_echo: find new pages as soon as they appear and crawl the valuable ones first.

The ECHO model (Lefortier et al., CIKM 2013) as a Scrapy plugin. What a project uses is named
here (:data:`__all__`): the add-on, the Scrapy components by the paths settings give them
(``scrapy_echo.scheduler.EchoScheduler``, ...), the click and signal calls, the signals, and
the core for those who drive it themselves. The packages below are the implementation
(docs/architecture.rst): ``core`` (the state and its one writer), ``model`` (the math, numpy
only), ``sources`` (source parsing), ``inputs`` (click, signal and source feeds), ``crawler``
(the Scrapy glue), ``distributed`` (Redis), ``sim`` (the simulator) and ``commands``; they
may change between releases.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from scrapy_echo.core.crawl import CrawlCore
    from scrapy_echo.crawler.downloadermw import EchoDownloaderMiddleware
    from scrapy_echo.crawler.dupefilter import EchoDupeFilter
    from scrapy_echo.crawler.extension import EchoExtension
    from scrapy_echo.crawler.link_collector import EchoLinkCollector
    from scrapy_echo.crawler.scheduler import EchoScheduler
    from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware
    from scrapy_echo.distributed.scheduler import DistributedScheduler

from scrapy_echo.crawler.addon import Addon
from scrapy_echo.crawler.signals import page_found, source_retired

__version__ = "0.1.0"

# Imported when first asked for: ``import scrapy_echo`` (which ``python -m scrapy_echo.sim``
# and the model run too) must not load Scrapy's engine, Twisted's reactor or redis-py.
_LAZY = {
    "CrawlCore": "scrapy_echo.core.crawl",
    "DistributedScheduler": "scrapy_echo.distributed.scheduler",
    "EchoDownloaderMiddleware": "scrapy_echo.crawler.downloadermw",
    "EchoDupeFilter": "scrapy_echo.crawler.dupefilter",
    "EchoExtension": "scrapy_echo.crawler.extension",
    "EchoLinkCollector": "scrapy_echo.crawler.link_collector",
    "EchoScheduler": "scrapy_echo.crawler.scheduler",
    "EchoSpiderMiddleware": "scrapy_echo.crawler.spidermw",
}

__all__ = [
    "Addon",
    "CrawlCore",
    "DistributedScheduler",
    "EchoDownloaderMiddleware",
    "EchoDupeFilter",
    "EchoExtension",
    "EchoLinkCollector",
    "EchoScheduler",
    "EchoSpiderMiddleware",
    "__version__",
    "page_found",
    "push_clicks",
    "push_signals",
    "source_retired",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'scrapy_echo' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def push_clicks(crawler: Crawler, rows: Iterable[Mapping[str, Any]]) -> int:
    """Feed clicks from Python: ``{"url": ..., "ts": ..., "clicks": ...}`` rows, checked like
    click-feed rows (a bad one is skipped and counted). Returns how many were taken."""
    from scrapy_echo.crawler.runtime import EchoRuntime

    return EchoRuntime.of(crawler).click_intake.push(rows, relay=True)


def push_signals(crawler: Crawler, rows: Iterable[Mapping[str, Any]]) -> int:
    """Feed change-indicating signals from Python: ``{"url": ..., "ts": ...}`` rows, each
    saying something at ``url`` (a source, or a page found on one) changed at ``ts``; checked
    like signal-feed rows (a bad one is skipped and counted). Returns how many were taken."""
    from scrapy_echo.crawler.runtime import EchoRuntime

    return EchoRuntime.of(crawler).signal_intake.push(rows, relay=True)
