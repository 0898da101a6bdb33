"""The demo's news site: sections publishing on a compressed clock, served by twisted.web.

Deterministic by seed. Sections publish articles as Poisson processes with heavy-tailed rates
(some sections are dead); articles differ in value (expected clicks, heavy-tailed across
sections, half the sections low-quality) and in how fast interest fades (half-lives of 8-40 s:
a second here stands for about a minute of a real news site). A section's hub shows only its
latest K articles, so a crawler that comes back too late misses some for good.

The site is also the referee: it records when each article was first shown on a hub it served
(found) and first fetched (crawled), and :func:`score` turns that into the profit each crawler
caught, the same way for any crawler.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import format_datetime
from typing import Any

import numpy as np
from twisted.web import resource, server


@dataclass(frozen=True)
class SiteParams:
    seed: int = 0
    sections: int = 24
    duration: float = 600.0  # seconds of publishing schedule
    articles_per_second: float = 5.0  # all sections together
    rate_sigma: float = 1.2  # lognormal spread of section rates
    dead_share: float = 0.1  # sections that never publish
    profit_median: float = 5.0  # expected clicks per article, median section
    profit_sigma: float = 1.5
    low_quality_share: float = 0.5
    low_quality_factor: float = 0.05
    half_life: tuple[float, float] = (8.0, 40.0)  # seconds, log-uniform per section
    hub_items: tuple[int, int] = (4, 10)  # K, from the slowest to the busiest section


@dataclass(frozen=True)
class Section:
    name: str
    rate: float
    profit: float
    decay: float
    hub_items: int


@dataclass(frozen=True)
class Article:
    id: int
    section: int
    published: float  # seconds after the site started
    profit: float
    decay: float


class SiteModel:
    """Sections and their articles, the same for the same parameters."""

    def __init__(self, params: SiteParams) -> None:
        self.params = p = params
        rng = np.random.default_rng(p.seed)
        n = p.sections
        rates = rng.lognormal(0.0, p.rate_sigma, n)
        rates[rng.random(n) < p.dead_share] = 0.0
        rates *= p.articles_per_second / max(rates.sum(), 1e-12)
        profit = p.profit_median * rng.lognormal(0.0, p.profit_sigma, n)
        profit *= np.where(rng.random(n) < p.low_quality_share, p.low_quality_factor, 1.0)
        low, high = np.log(p.half_life[0]), np.log(p.half_life[1])
        decay = math.log(2.0) / np.exp(rng.uniform(low, high, n))
        rank = np.argsort(np.argsort(rates)) / max(n - 1, 1)
        items = np.round(p.hub_items[0] + rank * (p.hub_items[1] - p.hub_items[0]))
        self.sections = [
            Section(f"s{i:02d}", float(rates[i]), float(profit[i]), float(decay[i]), int(items[i]))
            for i in range(n)
        ]
        found: list[tuple[float, int, float]] = []
        for i, section in enumerate(self.sections):
            if section.rate <= 0:
                continue
            count = rng.poisson(section.rate * p.duration)
            times = np.sort(rng.uniform(0.0, p.duration, count))
            noise = rng.gamma(2.0, 0.5, count)  # per-article value around the section's
            found += [
                (float(t), i, float(section.profit * k)) for t, k in zip(times, noise, strict=True)
            ]
        found.sort()
        self.articles = [
            Article(j, i, t, value, self.sections[i].decay) for j, (t, i, value) in enumerate(found)
        ]
        self.by_section: list[list[Article]] = [[] for _ in self.sections]
        for article in self.articles:
            self.by_section[article.section].append(article)


class NewsSite(resource.Resource):
    """The site's pages; ``clock()`` is seconds since :meth:`start`."""

    def __init__(self, model: SiteModel) -> None:
        super().__init__()
        self.model = model
        self.started = math.nan
        self.epoch = math.nan  # wall-clock time of the start, for published dates
        self.first_shown: dict[int, float] = {}
        self.first_fetched: dict[int, float] = {}
        self.hits = {"hub": 0, "article": 0, "not_modified": 0, "other": 0}

    def start(self) -> None:
        self.started = time.monotonic()
        self.epoch = time.time()

    def clock(self) -> float:
        return time.monotonic() - self.started

    def latest(self, section: int, now: float) -> list[Article]:
        articles = self.model.by_section[section]
        published = [a for a in articles if a.published <= now]  # short lists: fine
        return published[::-1][: self.model.sections[section].hub_items]

    def getChild(self, path: bytes, request: Any) -> resource.Resource:
        return self

    def render_GET(self, request: Any) -> bytes:
        parts = request.path.decode().strip("/").split("/")
        now = self.clock()
        if len(parts) == 2 and parts[0] == "section":
            return self._hub(request, parts[1], now)
        if len(parts) == 2 and parts[0] == "article" and parts[1].endswith(".html"):
            return self._article(request, parts[1][:-5], now)
        self.hits["other"] += 1
        request.setResponseCode(404)
        return b"<html><body>not found</body></html>"

    def _hub(self, request: Any, name: str, now: float) -> bytes:
        index = next((i for i, s in enumerate(self.model.sections) if s.name == name), None)
        if index is None:
            request.setResponseCode(404)
            return b"no such section"
        latest = self.latest(index, now)
        etag = f'"{name}-{latest[0].id if latest else "none"}"'
        request.setHeader(b"ETag", etag.encode())
        if request.getHeader(b"If-None-Match") == etag.encode():
            self.hits["not_modified"] += 1
            request.setResponseCode(304)
            return b""
        self.hits["hub"] += 1
        for article in latest:
            self.first_shown.setdefault(article.id, now)
        nav = " ".join(f'<a href="/section/{s.name}/">{s.name}</a>' for s in self.model.sections)
        items = "".join(f'<li><a href="/article/{a.id}.html">Story {a.id}</a></li>' for a in latest)
        page = f"<html><body><nav>{nav}</nav><h1>{name}</h1><ul>{items}</ul></body></html>"
        request.setHeader(b"Content-Type", b"text/html; charset=utf-8")
        return page.encode()

    def _article(self, request: Any, ident: str, now: float) -> bytes:
        article = self.model.articles[int(ident)] if ident.isdigit() else None
        if article is None or int(ident) >= len(self.model.articles) or article.published > now:
            self.hits["other"] += 1
            request.setResponseCode(404)
            return b"<html><body>not found</body></html>"
        self.hits["article"] += 1
        self.first_fetched.setdefault(article.id, now)
        born = datetime.fromtimestamp(self.epoch + article.published, timezone.utc)
        section = self.model.sections[article.section].name
        request.setHeader(b"Content-Type", b"text/html; charset=utf-8")
        request.setHeader(b"Last-Modified", format_datetime(born, usegmt=True).encode())
        return (
            f'<html><head><meta property="article:published_time" content="{born.isoformat()}">'
            f"</head><body><h1>Story {article.id}</h1>"
            f'<a href="/section/{section}/">{section}</a></body></html>'
        ).encode()


def start_site(site: NewsSite) -> tuple[int, Any]:
    """Serve ``site`` on a free port of 127.0.0.1; returns the port and a stop function."""
    from twisted.internet import reactor  # here: at import it would install its own reactor

    port = reactor.listenTCP(0, server.Site(site), interface="127.0.0.1")  # type: ignore[attr-defined]
    site.start()
    return port.getHost().port, port.stopListening


def score(site: NewsSite, *, start: float, end: float) -> dict[str, Any]:
    """What a crawler caught of the articles published in ``[start, end)``: the expected
    clicks of each article it fetched, ``p·e^{-μ·delay}``, against every article's ``p``."""
    window = [a for a in site.model.articles if start <= a.published < end]
    fetched = [a for a in window if a.id in site.first_fetched]
    delays = [site.first_fetched[a.id] - a.published for a in fetched]
    profit = sum(a.profit * math.exp(-a.decay * d) for a, d in zip(fetched, delays, strict=True))
    bound = sum(a.profit for a in window)
    requests = sum(site.hits.values())
    return {
        "published": len(window),
        "found": sum(1 for a in window if a.id in site.first_shown),
        "fetched": len(fetched),
        "median_delay": float(np.median(delays)) if delays else None,
        "profit": profit,
        "upper_bound": bound,
        "fraction": profit / bound if bound else 0.0,
        "requests": dict(site.hits),
        "requests_per_second": requests / max(site.clock(), 1e-9),
    }
