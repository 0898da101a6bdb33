"""Every request ECHO makes itself, in both modes: a source's recrawl, a page's refetch, a new
page's fetch, and the probe a source's link becomes on its way through Scrapy's spider
middlewares (:mod:`scrapy_echo.crawler.link_collector`).

The frontier holds pages (:class:`~scrapy_echo.core.pages.NewPage`), not requests: the one-process
scheduler and the Redis planner both build a page's request here when it leaves, with what the
spider middlewares added to its link (its depth, ``Referer``, a project's own meta)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy import Request

from scrapy_echo.core.pages import NewPage
from scrapy_echo.core.source_status import SourceStatus
from scrapy_echo.model.refetch.refresh_lane import Tracked

if TYPE_CHECKING:
    from scrapy_echo.core.view import CrawlView

LINK = "link"  # meta["echo"]["kind"] of a link's probe


def source_request(status: SourceStatus, source: int, callback: Callable[..., Any]) -> Request:
    """A recrawl of ``source``, conditional on the validators its last response gave; its
    ``depth`` goes along, for the sources its response lists (one deeper)."""
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
        meta={
            "echo": {"kind": "source", "source": source, "url": status.url, "depth": status.depth}
        },
    )


def page_request(page: NewPage, callback: Callable[..., Any]) -> Request:
    """The fetch of a new page, to the page ``callback``: its link's request as the spider
    middlewares left it, ``meta["echo"]`` telling the page (:meth:`NewPage.meta`)."""
    meta: dict[str, Any] = {}
    headers: dict[str, list[str]] = {}
    if page.extras:
        extras = json.loads(page.extras)
        meta.update(extras.get("meta", {}))
        headers = extras.get("headers", {})
    meta["echo"] = page.meta()
    if page.extras:  # (for a failed fetch to put the page back as it was)
        meta["echo"]["extras"] = page.extras
    return Request(page.url, callback=callback, meta=meta, headers=headers)


def link_request(url: str, index: int, callback: Callable[..., Any]) -> Request:
    """The probe for link ``index`` of a source's response: what the spider middlewares do
    to it is what they would do to the page's request (drop it, or add meta and headers)."""
    return Request(url, callback=callback, meta={"echo": {"kind": LINK, "index": index}})


def extras_of(request: Request) -> tuple[str, list[str]]:
    """What the spider middlewares added to a probe (or a page's request): its meta but
    ``echo``, and its headers, as JSON text ("" for nothing); and the meta keys left out
    because their values are not JSON data (a page's request is stored as data)."""
    meta: dict[str, Any] = {}
    unstorable: list[str] = []
    for key, value in request.meta.items():
        if key == "echo":
            continue
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            unstorable.append(str(key))
            continue
        meta[str(key)] = value
    headers = {
        name.decode("latin-1"): [value.decode("latin-1") for value in values]
        for name, values in request.headers.items()
    }
    extras = {name: part for name, part in (("meta", meta), ("headers", headers)) if part}
    return (json.dumps(extras, sort_keys=True) if extras else ""), unstorable


def landed_on_fetched(request: Request, state: CrawlView) -> bool:
    """Whether ``request`` is a page's redirect that landed on a page fetched under another
    URL: then it is that page, fetched already."""
    echo = request.meta.get("echo")
    return (
        isinstance(echo, dict)
        and echo.get("kind") == "page"
        and bool(request.meta.get("redirect_urls"))
        and state.already_fetched(request.url)
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


__all__ = [
    "LINK",
    "extras_of",
    "landed_on_fetched",
    "link_request",
    "page_request",
    "refresh_request",
    "source_request",
]
