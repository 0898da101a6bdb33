"""scrapy_echo: find new pages as soon as they appear and crawl the valuable ones first.

The ECHO model (Lefortier et al., CIKM 2013) as a Scrapy plugin. The model layer lives in
:mod:`scrapy_echo.model` and depends on numpy and the standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

from scrapy_echo.addon import Addon

__version__ = "0.1.0"

__all__ = ["Addon", "__version__", "push_clicks", "push_signals"]


def push_clicks(crawler: Crawler, rows: Iterable[Mapping[str, Any]]) -> int:
    """Feed clicks from Python: ``{"url": ..., "ts": ..., "clicks": ...}`` rows, checked like
    click-feed rows (a bad one is skipped and counted). Returns how many were taken."""
    from scrapy_echo.runtime import EchoRuntime

    return EchoRuntime.of(crawler).push_clicks(rows)


def push_signals(crawler: Crawler, rows: Iterable[Mapping[str, Any]]) -> int:
    """Feed change-indicating signals from Python: ``{"url": ..., "ts": ...}`` rows, each
    saying something at ``url`` (a source, or a page found on one) changed at ``ts``; checked
    like signal-feed rows (a bad one is skipped and counted). Returns how many were taken."""
    from scrapy_echo.runtime import EchoRuntime

    return EchoRuntime.of(crawler).signal_intake.push(rows)
