"""What the core hands out: the new pages a source crawl revealed, and a dispatch (a source to
crawl, or a page to fetch)."""

from __future__ import annotations

import math
from collections.abc import Sequence
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

    @classmethod
    def from_meta(cls, echo: dict[str, Any], url: str) -> NewPage:
        """The page a request for ``url`` says it is in ``meta["echo"]`` (:meth:`meta`)."""
        window = echo.get("window") or (echo["discovered"], echo["discovered"])
        return cls(
            str(echo.get("page") or url),
            int(echo["source"]),
            str(echo.get("source_url", "")),
            float(echo["appeared"]),
            (float(window[0]), float(window[1])),
            float(echo["discovered"]),
        )

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
) -> list[NewPage]:
    """A :class:`NewPage` for each link ``found`` new, in the order ``links`` lists them (a
    link listed twice is one page), from a crawl of ``source`` at ``fetched`` whose previous
    crawl was at ``previous`` (NaN at its ``first``). A page appeared at the time its listing
    states if that falls in the window between the two crawls (at a first crawl: any time up
    to it, a backlog page being as old as it says), else at the window's midpoint."""
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
        pages.append(NewPage(url, source, source_url, appeared, window, fetched))
    return pages


__all__ = ["Dispatch", "NewPage", "pages_found"]
