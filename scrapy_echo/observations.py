"""What a crawl observes, as plain JSON-able events, and how each one changes the state.

The middlewares describe what they saw (a source showed these links, answered 304, failed; a
new page was fetched; click rows came in) as an event dict, and :meth:`EchoRuntime.observe`
hands it on. On one machine it is applied at once; in distributed mode it travels through Redis
to the one worker that holds the state (:mod:`scrapy_echo.distributed`), which applies it with
the same :func:`apply_event`. Events name sources by URL, not by index, so a worker never needs
the state's numbering.

An event read from Redis may be malformed or hostile: :func:`check_event` rejects anything
that is not exactly the shape below, with an :class:`InvalidEvent` naming what is wrong.

========== ==================================================================================
``e``      fields
========== ==================================================================================
crawl      ``url``, ``t`` (fetch time), ``links`` (``[[url, published or null], ...]``),
           ``etag``, ``lm`` (``Last-Modified``; both may be null)
304        ``url``, ``t``
fail       ``url``, ``t``, ``why``
page       ``url`` (the page), ``source`` (its source's URL), ``appeared``, ``t``
clicks     ``rows`` (``[[url, ts, clicks], ...]``, checked as click-feed rows)
source     ``url`` (a source to add)
========== ==================================================================================
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scrapy import Request

    from scrapy_echo.state import CrawlState

logger = logging.getLogger(__name__)

# A page request for a new link: (page URL, its ECHO meta) -> Request.
PageRequestFactory = Callable[[str, dict[str, Any]], "Request"]

_MAX_URL = 8192
_MAX_TEXT = 1024


class EventTarget(Protocol):
    """What an event changes: the crawl state, and the click input (the crawler's runtime)."""

    state: CrawlState

    def push_clicks(self, rows: Iterable[Mapping[str, Any]]) -> int: ...


class InvalidEvent(ValueError):
    """An event that is not one of the documented shapes; ``kind`` names the problem."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _url(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise InvalidEvent("bad_url", f"{what} must be an http(s) URL, got {value!r:.80}")
    if len(value) > _MAX_URL:
        raise InvalidEvent("bad_url", f"{what} is longer than {_MAX_URL} characters")
    return value


def _time(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidEvent("bad_time", f"{what} must be a finite number, got {value!r:.80}")
    return float(value)


def _text(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise InvalidEvent("bad_field", f"{what} must be a short string or null")
    return value


def check_event(event: Any) -> dict[str, Any]:
    """``event`` if it is well formed, else :class:`InvalidEvent`."""
    if not isinstance(event, dict):
        raise InvalidEvent("not_object", f"an event must be an object, got {type(event).__name__}")
    kind = event.get("e")
    if kind in ("crawl", "304", "fail", "source"):
        _url(event.get("url"), "url")
    if kind in ("crawl", "304", "fail"):
        _time(event.get("t"), "t")
    if kind == "crawl":
        links = event.get("links")
        if not isinstance(links, list):
            raise InvalidEvent("bad_field", "links must be a list")
        for link in links:
            if not isinstance(link, list) or len(link) != 2:
                raise InvalidEvent("bad_field", "each link must be [url, published]")
            _url(link[0], "link")
            if link[1] is not None:
                _time(link[1], "published")
        _text(event.get("etag"), "etag")
        _text(event.get("lm"), "lm")
    elif kind == "fail":
        _text(event.get("why"), "why")
    elif kind == "page":
        _url(event.get("url"), "url")
        _url(event.get("source"), "source")
        _time(event.get("appeared"), "appeared")
        _time(event.get("t"), "t")
    elif kind == "clicks":
        if not isinstance(event.get("rows"), list):
            raise InvalidEvent("bad_field", "rows must be a list")
    elif kind not in ("304", "source"):
        raise InvalidEvent("unknown_event", f"unknown event kind {kind!r:.40}")
    return event


def apply_event(
    runtime: EventTarget, event: dict[str, Any], page_request: PageRequestFactory
) -> list[Request]:
    """Change ``runtime.state`` by one (checked) event; the requests for the new pages a
    source crawl revealed."""
    state = runtime.state
    kind = event["e"]
    if kind == "clicks":
        runtime.push_clicks(
            {"url": row[0], "ts": row[1], "clicks": row[2]}
            if isinstance(row, list) and len(row) == 3
            else row
            for row in event["rows"]
        )
        return []
    if kind == "page":
        source = state.add_source(event["source"])
        state.page_crawled(event["url"], source, float(event["appeared"]), float(event["t"]))
        return []
    source = state.add_source(event["url"])
    if kind == "source":
        return []
    now = float(event["t"])
    if kind == "304":
        state.source_not_modified(source, now)
        return []
    if kind == "fail":
        backoff = state.source_failed(source, now)
        logger.info(
            "ECHO source %s failed (%s, %d in a row); next try in %.0f s",
            event["url"],
            event.get("why"),
            state.sources[source].failures,
            backoff,
        )
        return []
    return _source_crawled(runtime, source, event, page_request)


def _source_crawled(
    runtime: EventTarget, source: int, event: dict[str, Any], page_request: PageRequestFactory
) -> list[Request]:
    state = runtime.state
    status = state.sources[source]
    status.etag, status.last_modified = event.get("etag"), event.get("lm")
    fetched = float(event["t"])
    previous = status.last_fetched
    links: list[list[Any]] = event["links"]
    new = set(state.source_crawled(source, fetched, [url for url, _ in links]))
    if not new:
        return []
    window_start = previous if math.isfinite(previous) else fetched
    midpoint = 0.5 * (window_start + fetched)
    requests = []
    for url, stated in links:
        if url not in new:
            continue
        new.discard(url)  # a link listed twice is one page
        fits = stated is not None and window_start <= stated <= fetched
        meta = {
            "kind": "page",
            "source": source,
            "source_url": status.url,
            "page": url,
            "appeared": stated if fits else midpoint,
            "window": [window_start, fetched],
            "discovered": fetched,
        }
        requests.append(page_request(url, meta))
    return requests
