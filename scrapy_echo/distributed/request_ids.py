"""The ids requests are queued under in Redis (docs/distributed.rst, "How the work is split"):
the planner's, one per source crawl, new page and refetch."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy_echo.core.state import fingerprint
from scrapy_echo.sources.urls import canonical_url

if TYPE_CHECKING:
    from scrapy import Request

# A refetch's id, before its page's fingerprint: a "u:" id, never remembered as done.
REFRESH_PREFIX = "u:refresh:"


def request_id(request: Request) -> str:
    """``s:`` + a source's URL fingerprint (one queued crawl per source at a time), ``p:`` +
    a page's (queued once, remembered when done), ``u:refresh:`` + a page's for its refetch
    (not remembered: the page is refetched again when the lane has it due)."""
    echo: Any = request.meta.get("echo", {})
    if echo.get("kind") == "source":
        return source_id(request.url)
    if echo.get("kind") == "refresh":
        return refresh_id(str(echo.get("page", request.url)))
    return page_id(request.url)


def kind_of(rid: str) -> str:
    """What ``rid`` was queued for: ``"source"``, ``"page"`` or ``"refresh"`` (the
    planner's), else ``"plain"``."""
    if rid.startswith("s:"):
        return "source"
    if rid.startswith("p:"):
        return "page"
    return "refresh" if rid.startswith(REFRESH_PREFIX) else "plain"


def page_id(url: str) -> str:
    return f"p:{_key(url)}"


def refresh_id(url: str) -> str:
    return f"{REFRESH_PREFIX}{_key(url)}"


def source_id(url: str) -> str:
    return f"s:{_key(url)}"


def _key(url: str) -> str:
    return f"{fingerprint(canonical_url(url)):016x}"


__all__ = ["REFRESH_PREFIX", "kind_of", "page_id", "refresh_id", "request_id", "source_id"]
