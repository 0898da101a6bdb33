"""What a crawl observes, as typed events: the only way anything changes the crawl state.

The Scrapy middlewares, the Redis planner (events from every worker) and the simulator all
describe what happened with these frozen dataclasses and hand them to one
:class:`~scrapy_echo.core.crawl.CrawlCore`. Events name sources by URL, not by index, so a
worker never needs the state's numbering.

Where an event crosses Redis it travels as JSON (:func:`to_json`, :func:`from_json`), in the
shape below. JSON read from Redis may be malformed or hostile: :func:`from_json` accepts only
exactly these shapes, else raises :class:`InvalidEvent` naming what is wrong.

========== ==================================================================================
``e``      fields
========== ==================================================================================
crawl      ``url``, ``t`` (fetch time), ``links`` (``[[url, published or null], ...]``),
           ``etag``, ``lm`` (``Last-Modified``; both may be null); optional, when the links
           passed the spider middlewares: ``xs`` (the distinct extras they added, each a JSON
           object as text, or empty) and ``xi`` (per link, the index of its extras in
           ``xs``, or -1 if a middleware dropped its request); ``more`` (true: a hub's next
           page, more of its crawl at ``t``); from a worker without the crawl state,
           ``next`` (the hub's next page as this one links it) and ``page`` (this one's
           number), for the planner to decide whether the crawl reads on
304        ``url``, ``t``
fail       ``url``, ``t``, ``why``
blocked    ``url``, ``t`` (robots.txt forbids the source: no request was sent)
page       ``url`` (the page), ``source`` (its source's URL), ``appeared``, ``t``,
           ``aliases`` (``[url, ...]``, optional: the page's other URLs), ``digest``
           (optional: its body's hash and ETag, :mod:`scrapy_echo.model.refetch.content`),
           ``refresh`` (optional: true for a refetch of a page fetched before)
pagefail   ``url``, ``source``, ``appeared``, ``t``, ``why``, ``win`` (its source crawl's
           window, two times), ``disc`` (when found), ``x`` (optional: what the spider
           middlewares added to its request, a JSON object as text), ``ra`` (optional:
           ``Retry-After`` in s): a new page's fetch failed, to be tried again
clicks     ``rows`` (``[[url, ts, clicks], ...]``, checked as click-feed rows by the receiver)
signals    ``rows`` (``[[url, ts], ...]``, checked as signal-feed rows by the receiver)
source     ``url`` (a source to add); ``cfg`` (optional, true: from a worker's settings at
           its start, which revive no retired or removed source); ``depth`` (optional, 0 if
           absent: how many sources
           listing sources lead to it from one the operator gave)
remove     ``url`` (a source to stop crawling)
========== ==================================================================================
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

_MAX_URL = 8192
_MAX_TEXT = 1024
_MAX_EXTRAS = 8192  # what the spider middlewares added to one link's request, as JSON text
_MAX_TIME = 1e11  # seconds: the year 5138 (a simulated crawl counts from 0)
_MAX_DEPTH = 1000  # levels of sources listing sources; no crawl allows near this many
MAX_ALIASES = 8  # a redirect chain and a canonical link; more is not one page


@dataclass(frozen=True)
class SourceFetched:
    """A source answered with ``links`` (URL, publication time it states or ``None``).

    ``treated``: empty, or per link what Scrapy's spider middlewares made of its request:
    the extras they added (:attr:`~scrapy_echo.core.pages.NewPage.extras`), or ``None`` if
    one dropped it (the link is listed, never a page to fetch). ``continued``: these are the
    links of a further page of the source's crawl at ``t`` (a paginated hub's next page),
    not a crawl of their own."""

    url: str
    t: float
    links: tuple[tuple[str, float | None], ...]
    etag: str | None = None
    last_modified: str | None = None
    treated: tuple[str | None, ...] = ()
    continued: bool = False
    # From a worker without the crawl state (a fleet's, not the planner's): the hub's next
    # page as the response links it, and which page this was; the planner, which knows which
    # links are new, decides whether the crawl reads on (core.hub_paging).
    next_page: str | None = None
    hub_page: int = 1


@dataclass(frozen=True)
class SourceNotModified:
    """A source answered 304: nothing new, cheaply."""

    url: str
    t: float


@dataclass(frozen=True)
class SourceFailed:
    """A source crawl failed for good (after Scrapy's retries); ``retry_after``: the seconds
    its host asked to be left alone (``Retry-After``), if it said."""

    url: str
    t: float
    why: str | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class PageFetched:
    """A new page found on ``source`` was fetched at ``t``; it appeared at about ``appeared``."""

    url: str
    source: str
    appeared: float
    t: float
    aliases: tuple[str, ...] = ()  # other URLs of this page: where it redirected, its canonical
    digest: str | None = None  # body hash and ETag (model.content): the refresh lane's changes
    refresh: bool = False  # a refetch by the refresh lane, not the page's first fetch


@dataclass(frozen=True)
class PageFailed:
    """A new page's fetch failed at ``t`` (after Scrapy's retries; an error status or an
    exception, ``why``): the page as its request told it (``url`` and ``source`` URLs, its
    appearance time, its source crawl's window and discovery, what the spider middlewares
    added), to wait and be tried again (:mod:`scrapy_echo.core.page_retries`); a 429's or
    503's ``Retry-After`` in seconds, if it sent one."""

    url: str
    source: str
    appeared: float
    t: float
    why: str
    window: tuple[float, float]
    discovered: float
    extras: str = ""
    retry_after: float | None = None


@dataclass(frozen=True)
class SourceBlocked:
    """robots.txt forbids crawling the source: nothing was sent, nothing failed."""

    url: str
    t: float


@dataclass(frozen=True)
class SourceAdded:
    """Crawl ``url`` as a source. ``depth``: 0 for a source the operator gave (settings, the
    sources file, ``scrapy echo-sources``, a spider's request), else one more than that of
    the source whose response listed it (a sitemap index's sitemaps, a robots.txt's)."""

    url: str
    depth: int = 0
    # Given in the settings a worker of a fleet started with (ECHO_SOURCES, the sources
    # file), not added by an operator now: a source known already, even retired or removed,
    # is left as it is (a restart must not revive what the crawl retired).
    configured: bool = False


@dataclass(frozen=True)
class SourceRemoved:
    """Stop crawling a source (its links stay seen; adding it again brings it back)."""

    url: str


@dataclass(frozen=True)
class ClicksArrived:
    """Click rows (``[url, ts, clicks]``), not yet checked: the receiver checks each as a
    click-feed row and counts the bad ones."""

    rows: tuple[Any, ...]


@dataclass(frozen=True)
class SignalsArrived:
    """Change-indicating signal rows (``[url, ts]``), not yet checked: the receiver checks
    each as a signal-feed row and counts the bad ones."""

    rows: tuple[Any, ...]


Event = (
    SourceFetched
    | SourceNotModified
    | SourceFailed
    | SourceBlocked
    | PageFetched
    | PageFailed
    | SourceAdded
    | SourceRemoved
    | ClicksArrived
    | SignalsArrived
)


class InvalidEvent(ValueError):
    """JSON that is not one of the documented shapes; ``kind`` names the problem."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def to_json(event: Event) -> dict[str, Any]:
    """The JSON form of ``event`` (the table above)."""
    if isinstance(event, SourceFetched):
        links = [[url, published] for url, published in event.links]
        out = {"e": "crawl", "url": event.url, "t": event.t, "links": links,
               "etag": event.etag, "lm": event.last_modified}  # fmt: skip
        if event.treated:
            # Most links of one response get the same extras: each distinct one is sent once.
            distinct: dict[str, int] = {}
            out["xi"] = [
                -1 if extras is None else distinct.setdefault(extras, len(distinct))
                for extras in event.treated
            ]
            out["xs"] = list(distinct)
        if event.continued:
            out["more"] = True
        if event.next_page is not None:
            out["next"], out["page"] = event.next_page, event.hub_page
        return out
    if isinstance(event, SourceNotModified):
        return {"e": "304", "url": event.url, "t": event.t}
    if isinstance(event, SourceFailed):
        raw = {"e": "fail", "url": event.url, "t": event.t, "why": event.why}
        if event.retry_after is not None:
            raw["ra"] = event.retry_after
        return raw
    if isinstance(event, PageFetched):
        out = {"e": "page", "url": event.url, "source": event.source,
               "appeared": event.appeared, "t": event.t,
               "aliases": list(event.aliases)}  # fmt: skip
        if event.digest is not None:
            out["digest"] = event.digest
        if event.refresh:
            out["refresh"] = True
        return out
    if isinstance(event, PageFailed):
        out = {"e": "pagefail", "url": event.url, "source": event.source,
               "appeared": event.appeared, "t": event.t, "why": event.why,
               "win": list(event.window), "disc": event.discovered}  # fmt: skip
        if event.extras:
            out["x"] = event.extras
        if event.retry_after is not None:
            out["ra"] = event.retry_after
        return out
    if isinstance(event, SourceBlocked):
        return {"e": "blocked", "url": event.url, "t": event.t}
    if isinstance(event, SourceAdded):
        out = {"e": "source", "url": event.url}
        if event.depth:
            out["depth"] = event.depth
        if event.configured:
            out["cfg"] = True
        return out
    if isinstance(event, SourceRemoved):
        return {"e": "remove", "url": event.url}
    if isinstance(event, SignalsArrived):
        return {"e": "signals", "rows": list(event.rows)}
    return {"e": "clicks", "rows": list(event.rows)}


def from_json(raw: Any) -> Event:
    """The event ``raw`` describes, if it is exactly one of the shapes above; else
    :class:`InvalidEvent`."""
    if not isinstance(raw, dict):
        raise InvalidEvent("not_object", f"an event must be an object, got {type(raw).__name__}")
    kind = raw.get("e")
    if kind == "crawl":
        url, t = _url(raw.get("url"), "url"), _time(raw.get("t"), "t")
        links = raw.get("links")
        if not isinstance(links, list):
            raise InvalidEvent("bad_field", "links must be a list")
        return SourceFetched(
            url,
            t,
            tuple(_link(link) for link in links),
            _text(raw.get("etag"), "etag"),
            _text(raw.get("lm"), "lm"),
            _treated(raw, len(links)),
            _flag(raw.get("more", False), "more"),
            None if raw.get("next") is None else _url(raw.get("next"), "next"),
            _hub_page(raw.get("page", 1)),
        )
    if kind == "304":
        return SourceNotModified(_url(raw.get("url"), "url"), _time(raw.get("t"), "t"))
    if kind == "fail":
        wait = raw.get("ra")
        return SourceFailed(
            _url(raw.get("url"), "url"),
            _time(raw.get("t"), "t"),
            _text(raw.get("why"), "why"),
            None if wait is None else _wait(wait),
        )
    if kind == "page":
        return PageFetched(
            _url(raw.get("url"), "url"),
            _url(raw.get("source"), "source"),
            _time(raw.get("appeared"), "appeared"),
            _time(raw.get("t"), "t"),
            _aliases(raw.get("aliases", [])),
            _text(raw.get("digest"), "digest"),
            _flag(raw.get("refresh", False), "refresh"),
        )
    if kind == "pagefail":
        window = raw.get("win")
        if not isinstance(window, list) or len(window) != 2:
            raise InvalidEvent("bad_field", "win must be a list of two times")
        wait = raw.get("ra")
        return PageFailed(
            _url(raw.get("url"), "url"),
            _url(raw.get("source"), "source"),
            _time(raw.get("appeared"), "appeared"),
            _time(raw.get("t"), "t"),
            _text(raw.get("why"), "why") or "",
            (_time(window[0], "win"), _time(window[1], "win")),
            _time(raw.get("disc"), "disc"),
            _extras_text(raw.get("x", "")),
            None if wait is None else _wait(wait),
        )
    if kind == "blocked":
        return SourceBlocked(_url(raw.get("url"), "url"), _time(raw.get("t"), "t"))
    if kind == "source":
        return SourceAdded(
            _url(raw.get("url"), "url"),
            _depth(raw.get("depth", 0)),
            _flag(raw.get("cfg", False), "cfg"),
        )
    if kind == "remove":
        return SourceRemoved(_url(raw.get("url"), "url"))
    if kind in ("clicks", "signals"):
        if not isinstance(raw.get("rows"), list):
            raise InvalidEvent("bad_field", "rows must be a list")
        rows = tuple(raw["rows"])
        return ClicksArrived(rows) if kind == "clicks" else SignalsArrived(rows)
    raise InvalidEvent("unknown_event", f"unknown event kind {kind!r:.40}")


def _link(link: Any) -> tuple[str, float | None]:
    if not isinstance(link, list) or len(link) != 2:
        raise InvalidEvent("bad_field", "each link must be [url, published]")
    return _url(link[0], "link"), None if link[1] is None else _time(link[1], "published")


def _treated(raw: dict[str, Any], links: int) -> tuple[str | None, ...]:
    """A crawl event's ``xs`` and ``xi``, per link: its extras, or ``None`` (dropped)."""
    if "xi" not in raw and "xs" not in raw:
        return ()
    distinct, index = raw.get("xs"), raw.get("xi")
    if not isinstance(distinct, list) or not isinstance(index, list) or len(index) != links:
        raise InvalidEvent("bad_field", "xi must be a list of one index per link, with xs")
    for extras in distinct:
        if not isinstance(extras, str) or len(extras) > _MAX_EXTRAS:
            raise InvalidEvent("bad_field", f"each of xs must be text of {_MAX_EXTRAS} at most")
        if not extras:  # (nothing added)
            continue
        try:
            parsed = json.loads(extras)
        except (ValueError, RecursionError):
            parsed = None
        if not isinstance(parsed, dict):
            raise InvalidEvent("bad_field", f"each of xs must be a JSON object: {extras!r:.60}")
    if not all(type(i) is int and -1 <= i < len(distinct) for i in index):
        raise InvalidEvent("bad_field", "each of xi must be -1 or an index into xs")
    return tuple(None if i < 0 else distinct[i] for i in index)


def _depth(value: Any) -> int:
    if type(value) is not int or not 0 <= value <= _MAX_DEPTH:
        raise InvalidEvent("bad_field", f"depth must be an integer from 0 to {_MAX_DEPTH}")
    return value


def _extras_text(value: Any) -> str:
    """What the spider middlewares added to a page's request: a JSON object as text."""
    if value == "":
        return ""
    if not isinstance(value, str) or len(value) > 8192:
        raise InvalidEvent("bad_field", "x must be a JSON object as text")
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        parsed = None
    if not isinstance(parsed, dict):
        raise InvalidEvent("bad_field", "x must be a JSON object as text")
    return value


def _hub_page(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10_000:
        raise InvalidEvent("bad_field", f"page must be a hub page number, got {value!r}")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidEvent("bad_field", f"{name} must be true or false")
    return value


def _aliases(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_ALIASES:
        raise InvalidEvent("bad_field", f"aliases must be a list of at most {MAX_ALIASES} URLs")
    return tuple(_url(url, "alias") for url in value)


def _url(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value.startswith(("http://", "https://")):
        raise InvalidEvent("bad_url", f"{what} must be an http(s) URL, got {value!r:.80}")
    if len(value) > _MAX_URL:
        raise InvalidEvent("bad_url", f"{what} is longer than {_MAX_URL} characters")
    return value


def _wait(value: Any) -> float:
    seconds = _time(value, "ra")
    if seconds < 0:
        raise InvalidEvent("bad_time", f"ra must be seconds >= 0, got {value!r:.80}")
    return seconds


def _time(value: Any, what: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or abs(value) > _MAX_TIME
    ):
        raise InvalidEvent("bad_time", f"{what} must be a time in seconds, got {value!r:.80}")
    return float(value)


def _text(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise InvalidEvent("bad_field", f"{what} must be a short string or null")
    return value
