"""Synthetic webs whose hosts decide the crawl (docs/simulator.rst, "Hosts"), by seed.

- :func:`slow_valuable_hosts`: a few hosts publish nearly all the value and allow one request
  every 2 s; the others are cheap, allow two a second, and one of them goes down for good;
  hubs list their latest 10 links. Each valuable host publishes several times what its slot
  can fetch, so each of its requests has a price: a hub crawl there that finds nothing worth
  more than what already waits is a lost page. (The regime of the live check of slow
  valuable hosts; the figures here are this generator's own.)
- :func:`bursty_paginated_hubs`: hubs that show 5 links a page with the rest on next pages,
  and publish a burst of 12 within a second every 30 s.
- :func:`daily_bursts`: 20 hubs that change once a day, each at its own hour, about 80 new
  items a day between them, each item's popularity its own, hubs listing their latest 10:
  replayed at budgets of a few crawls a day, far fewer than the new pages.

On the first two, time runs in seconds and pages lose value within a minute or two: replay
them with the crawl's short loop settings (:data:`FAST_LOOP`); the third, with the crawl's
own.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scrapy_echo.sim.trace import Trace
from scrapy_echo.sim.web_hosts import WebHosts

# The replay settings these webs are made for (as the live checks set them): re-solve every
# 5 s, clicks pushed every 2 s into 2 s bins.
FAST_LOOP: dict[str, Any] = {"resolve_interval": 5.0, "click_push_period": 2.0, "click_bin": 2.0}


class _Builder:
    """Sources, pages, links and clicks as they are generated, then one :class:`Trace`."""

    def __init__(self, seed: int, duration: float) -> None:
        self.rng = np.random.default_rng(seed)
        self.duration = duration
        self.source_urls: list[str] = []
        self.shows: list[int] = []
        self.page_urls: list[str] = []
        self.created: list[float] = []
        self.link_source: list[int] = []
        self.clicks: list[tuple[int, float, float]] = []

    def hub(self, url: str, shows: int) -> int:
        """A new hub at ``url`` showing its latest ``shows`` links; its source index."""
        self.source_urls.append(url)
        self.shows.append(shows)
        return len(self.source_urls) - 1

    def page(
        self, source: int, path: str, t: float, clicks: int, mu: float, bin_width: float
    ) -> None:
        """A page of ``source`` published at ``t`` (its URL the hub's plus ``path`` and its
        number), ``clicks`` clicks coming exponentially after (rate ``mu``), counted per
        page and ``bin_width`` s bin, as a click feed aggregates them."""
        page = len(self.page_urls)
        self.page_urls.append(f"{self.source_urls[source].rstrip('/')}/{path}/{page}")
        self.created.append(t)
        self.link_source.append(source)
        for delay in self.rng.exponential(1.0 / mu, clicks).tolist():
            self.clicks.append((page, t + bin_width * math.ceil(delay / bin_width), 1.0))

    def section(
        self, url: str, times: np.ndarray, value: float, half_life: float, shows: int
    ) -> None:
        """A hub at ``url`` listing a page at each of ``times``, each worth ``value`` clicks on
        average (gamma noise), its clicks halving every ``half_life`` s."""
        source = self.hub(url, shows)
        mu = math.log(2.0) / half_life
        for t in times.tolist():
            count = int(self.rng.poisson(value * self.rng.gamma(2.0, 0.5)))
            self.page(source, "a", t, count, mu, 2.0)

    def trace(self, name: str, hosts: WebHosts, warmup: float) -> Trace:
        clicks = sorted(self.clicks, key=lambda row: row[1])
        pages = np.array([p for p, _, _ in clicks], dtype=np.intp)
        created = np.array(self.created)
        n = len(self.page_urls)
        return Trace(
            duration=self.duration,
            warmup=warmup,
            name=name,
            source_ids=[str(i) for i in range(len(self.source_urls))],
            source_urls=self.source_urls,
            page_urls=self.page_urls,
            page_created=created,
            link_source=np.array(self.link_source, dtype=np.intp),
            link_page=np.arange(n, dtype=np.intp),
            link_appeared=created.copy(),
            link_disappeared=_pushed_out(self.link_source, created, self.shows),
            click_page=pages,
            click_ts=np.array([t for _, t, _ in clicks]),
            click_count=np.array([c for _, _, c in clicks]),
            source_shows=np.array(self.shows, dtype=np.intp),
            hosts=hosts,
        )


def _pushed_out(link_source: list[int], appeared: np.ndarray, shows: list[int]) -> np.ndarray:
    """When each link leaves its hub: when the ``shows``-th newer one appears there."""
    gone = np.full(appeared.size, np.inf)
    sources = np.array(link_source, dtype=np.intp)
    for source, keep in enumerate(shows):
        mine = np.flatnonzero(sources == source)
        order = mine[np.argsort(appeared[mine], kind="stable")]
        if keep and order.size > keep:
            gone[order[:-keep]] = appeared[order[keep:]]
    return gone


def _poisson_times(rng: np.random.Generator, rate: float, start: float, end: float) -> np.ndarray:
    count = int(rng.poisson(rate * (end - start)))
    return np.sort(rng.uniform(start, end, count))


def slow_valuable_hosts(
    seed: int,
    *,
    duration: float = 600.0,
    warmup: float = 60.0,
    valuable_hosts: int = 3,
    cheap_hosts: int = 5,
    valuable_delay: float = 2.0,
    cheap_delay: float = 0.5,
    pages_per_valuable_host: float = 3.8,
    pages_per_cheap_host: float = 1.0,
    down_at: float = 20.0,
    history: float = 0.0,
) -> Trace:
    """Hosts that publish nearly all the value behind a strict delay (see the module);
    pages are published from ``-history`` s on, so the crawl starts with full hubs (as the
    live check's site starts)."""
    web = _Builder(seed, duration)
    rng = web.rng
    delay: dict[str, float] = {}
    start = -history
    for h in range(valuable_hosts + cheap_hosts):
        valuable = h < valuable_hosts
        host = f"{'news' if valuable else 'cheap'}{h}.sim.example"
        delay[host] = valuable_delay if valuable else cheap_delay
        shares = rng.dirichlet(np.full(4, 2.0))  # four sections of differing rate
        for k in range(4):
            rate = shares[k] * (pages_per_valuable_host if valuable else pages_per_cheap_host)
            value = float(rng.lognormal(math.log(30.0), 0.6)) if valuable else 0.1
            half_life = float(rng.uniform(20.0, 120.0))
            times = _poisson_times(rng, rate, start, duration)
            web.section(f"http://{host}/s{k}/", times, value, half_life, shows=10)
    dying = f"cheap{valuable_hosts + cheap_hosts - 1}.sim.example"
    hosts = WebHosts(delay=delay, outages={dying: (down_at, duration + 1.0)})
    return web.trace(f"slow-valuable-hosts-{seed}", hosts, warmup)


def bursty_paginated_hubs(
    seed: int,
    *,
    duration: float = 600.0,
    warmup: float = 60.0,
    hubs: int = 2,
    burst: int = 12,
    every: float = 30.0,
    page_size: int = 5,
    delay: float = 0.5,
) -> Trace:
    """Hubs that show ``page_size`` links a page and publish ``burst`` pages within a second
    every ``every`` s (see the module)."""
    web = _Builder(seed, duration)
    rng = web.rng
    host = "bursts.sim.example"
    for k in range(hubs):
        offset = float(rng.uniform(0.0, every))
        starts = np.arange(offset, duration, every)
        times = np.sort((starts[:, None] + rng.uniform(0.0, 1.0, (starts.size, burst))).ravel())
        web.section(f"http://{host}/hub{k}/", times, 10.0, 60.0, shows=100)
    hosts = WebHosts(delay={host: delay}, page_size={host: page_size})
    return web.trace(f"bursty-paginated-hubs-{seed}", hosts, warmup)


__all__ = ["FAST_LOOP", "bursty_paginated_hubs", "daily_bursts", "slow_valuable_hosts"]


def daily_bursts(
    seed: int,
    *,
    days: float = 14.0,
    warmup_days: float = 7.0,
    hubs: int = 20,
    items_per_day: float = 80.0,
    half_life_hours: float = 24.0,
) -> Trace:
    """Hubs that change once a day, each at its own hour, with a burst of new items (about
    ``items_per_day`` between them), each item's popularity its own (lognormal): the regime
    where the budget is far smaller than the new pages, and a hub crawl that finds pages the
    plan will not fetch is worth nothing."""
    duration = days * 86400.0
    web = _Builder(seed, duration)
    rng = web.rng
    mu = math.log(2.0) / (half_life_hours * 3600.0)
    for k in range(hubs):
        hour = float(rng.uniform(0.0, 86400.0))
        times: list[float] = []
        for day in range(math.ceil(days)):
            at = day * 86400.0 + hour
            if at < duration:
                times += [at] * int(rng.poisson(items_per_day / hubs))
        source = web.hub(f"http://daily{k}.sim.example/", shows=10)
        for t in times:
            value = float(rng.lognormal(math.log(20.0), 1.2))
            web.page(source, "item", t, int(rng.poisson(value)), mu, 1200.0)
    return web.trace(f"daily-bursts-{seed}", WebHosts(), warmup_days * 86400.0)
