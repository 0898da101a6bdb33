"""The requests ECHO's scheduler makes itself: a source's recrawl and a page's refetch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scrapy import Request

from scrapy_echo.core.source_status import SourceStatus
from scrapy_echo.model.refetch.refresh_lane import Tracked


def source_request(status: SourceStatus, source: int, callback: Callable[..., Any]) -> Request:
    """A recrawl of ``source``, conditional on the validators its last response gave."""
    headers = {}
    if status.etag:
        headers["If-None-Match"] = status.etag
    if status.last_modified:
        headers["If-Modified-Since"] = status.last_modified
    return Request(
        status.url,
        callback=callback,
        headers=headers,
        dont_filter=True,
        meta={"echo": {"kind": "source", "source": source, "url": status.url}},
    )


def refresh_request(page: Tracked, source_url: str, callback: Callable[..., Any]) -> Request:
    """A refetch of a page the refresh lane tracks (docs/how-it-works.rst, "Refreshing pages
    that change"), to the page callback with ``echo_refresh`` set."""
    echo = {
        "kind": "refresh",
        "page": page.url,
        "source_url": source_url,
        "appeared": page.appeared,
    }
    return Request(
        page.url,
        callback=callback,
        dont_filter=True,  # fetched before: Scrapy's own filter would drop it
        # (an HTTP cache would answer a refetch with the copy it has)
        meta={"echo": echo, "echo_refresh": True, "dont_cache": True},
    )


__all__ = ["refresh_request", "source_request"]
