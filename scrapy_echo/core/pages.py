"""What the core hands out: the new pages a source crawl revealed, and a dispatch (a source to
crawl, or a page to fetch).

A page is data, not a request: the frontier holds pages, and each driver builds the request
for one when it leaves (``scrapy_echo.crawler.echo_requests.page_request``). What Scrapy's spider
middlewares added to a page's link when the source's response was handled (its depth, its
``Referer``, a project's own meta) travels with the page as ``extras``."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from scrapy_echo.model.decisions.frontier import WaitingPage


@dataclass(frozen=True)
class NewPage:
    """A link a source showed for the first time: a page to fetch.

    ``appeared`` is the page's estimated appearance time: the publication time it states if
    that falls inside ``window`` (the source's previous crawl to this one), else the window's
    midpoint (docs/how-it-works.rst, "Estimating the parameters")."""

    url: str
    source: int
    source_url: str
    appeared: float
    window: tuple[float, float]
    discovered: float
    # What the spider middlewares added to the link's request, as JSON text
    # (``{"meta": {...}, "headers": {name: [value, ...]}}``; "" for nothing): text, so that
    # a page stays hashable, and the pages of one response share one string.
    extras: str = ""

    @classmethod
    def from_meta(cls, echo: dict[str, Any], url: str, extras: str = "") -> NewPage:
        """The page a request for ``url`` says it is in ``meta["echo"]`` (:meth:`meta`)."""
        window = echo.get("window") or (echo["discovered"], echo["discovered"])
        return cls(
            str(echo.get("page") or url),
            int(echo["source"]),
            str(echo.get("source_url", "")),
            float(echo["appeared"]),
            (float(window[0]), float(window[1])),
            float(echo["discovered"]),
            extras,
        )

    def to_data(self) -> list[Any]:
        """The page as a list (its source's index aside: a snapshot stores that beside)."""
        start, end = self.window
        return [self.url, self.source_url, self.appeared, start, end, self.discovered, self.extras]

    @classmethod
    def from_data(cls, source: int, data: Sequence[Any]) -> NewPage:
        """The page :meth:`to_data` gave, of ``source``; ``ValueError`` if ``data`` is not one."""
        if not isinstance(data, Sequence) or isinstance(data, str) or len(data) != 7:
            raise ValueError(f"not a waiting page: {data!r:.80}")
        url, source_url, appeared, start, end, discovered, extras = data
        times = (appeared, start, end, discovered)
        if not all(isinstance(t, int | float) and math.isfinite(t) for t in times):
            raise ValueError(f"a waiting page with bad times: {data!r:.80}")
        if not (isinstance(url, str) and isinstance(source_url, str) and isinstance(extras, str)):
            raise ValueError(f"a waiting page with bad fields: {data!r:.80}")
        return cls(url, source, source_url, appeared, (start, end), discovered, extras)

    def meta(self) -> dict[str, Any]:
        """What a page request carries in ``meta["echo"]``."""
        return {
            "kind": "page",
            "source": self.source,
            "source_url": self.source_url,
            "page": self.url,
            "appeared": self.appeared,
            "window": list(self.window),
            "discovered": self.discovered,
        }


@dataclass(frozen=True)
class Dispatch:
    """What :meth:`CrawlCore.dispatch` hands out: a crawl of ``source`` itself, or
    (``kind == "page"``) ``page``, the newest page waiting on it. ``previous`` is the
    source's crawl time before this dispatch (what :meth:`CrawlCore.put_back` restores)."""

    kind: Literal["source", "page"]
    source: int
    page: WaitingPage | None = None
    previous: float = math.nan


def pages_found(
    links: Sequence[tuple[str, float | None]],
    found: Sequence[str],
    source: int,
    source_url: str,
    previous: float,
    fetched: float,
    *,
    first: bool,
    extras: Mapping[str, str] | None = None,
) -> list[NewPage]:
    """A :class:`NewPage` for each link ``found`` new, in the order ``links`` lists them (a
    link listed twice is one page), from a crawl of ``source`` at ``fetched`` whose previous
    crawl was at ``previous`` (NaN at its ``first``). A page appeared at the time its listing
    states if that falls in the window between the two crawls (at a first crawl: any time up
    to it, a backlog page being as old as it says), else at the window's midpoint.
    ``extras``: by link, what the spider middlewares added to its request
    (:attr:`NewPage.extras`)."""
    start = previous if math.isfinite(previous) else fetched
    window = (start, fetched)
    midpoint = 0.5 * (start + fetched)
    new = set(found)
    pages = []
    for url, stated in links:
        if url not in new:
            continue
        new.discard(url)
        fits = stated is not None and (stated <= fetched if first else start <= stated <= fetched)
        appeared = stated if fits and stated is not None else midpoint
        added = extras.get(url, "") if extras else ""
        pages.append(NewPage(url, source, source_url, appeared, window, fetched, added))
    return pages


def link_treatment(
    links: Sequence[tuple[str, float | None]], treated: Sequence[str | None]
) -> tuple[dict[str, str], set[str]]:
    """By link, what the spider middlewares added to its request, and the links they dropped
    (``treated`` as :attr:`SourceFetched.treated <scrapy_echo.core.events.SourceFetched>`;
    a link listed twice is dropped only if every copy was)."""
    extras: dict[str, str] = {}
    refused: set[str] = set()
    for (url, _), added in zip(links, treated, strict=True) if treated else ():
        if added is None:
            refused.add(url)
        else:
            extras.setdefault(url, added)
    return extras, refused - extras.keys()


__all__ = ["Dispatch", "NewPage", "link_treatment", "pages_found"]
