"""Replay a trace against a crawl policy with a simulated clock.

The crawler has ``N`` crawl slots per second. Each slot runs as a live crawl's does: a
refetch if the refresh lane has one due, else the core's dispatch (a source, a waiting new
page, or nothing). The crawl's bookkeeping is the live crawler's own: one
:class:`~scrapy_echo.core.crawl.CrawlCore`, driven with the same typed events the Scrapy
middlewares send (docs/architecture.rst). Only the fetcher (the trace, as :class:`TraceWeb`)
and the clock differ.

Crawling a source reveals the links on it at that moment; a link is new if it was never seen
before; what a source lists at its first crawl is new too under the crawl's default
``backlog="crawl"``, and only recorded under the paper's set-up (:data:`PAPER_SETUP`).
Crawling a page earns the clicks it gets from then on. Clicks are delivered every push period
for the pages crawled, never from the future, and intervals are re-solved every re-solve
period.

Sources and pages get URLs (:class:`TraceWeb`) so that the core sees what it sees in a live
crawl: per-host figures (the refresh lane's change rates) stay per host. To save the replay
time, a source crawl reports the links
that appeared on it since its previous crawl (every other visible link was seen then), and
the first crawl all it shows: the core takes the same new pages from either. With them it
reports the newest link still shown from before, if any, so that the core tells a hub that
overflowed from one that did not (docs/how-it-works.rst, "Hubs that show only their latest
links"), and a source whose listing is dated (``sources.csv``'s ``dated``) states each link's
publication time, the page's ``created``. With a refresh lane (``refresh_share``), a page's
content digest is how many of its updates (``updates.csv``) came before the fetch, and a slot
the lane takes refetches a page instead of asking the policy.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scrapy_echo.core.crawl import BUSY_TRIES, CrawlCore
from scrapy_echo.core.defaults import DEFAULTS
from scrapy_echo.core.events import PageFetched, SourceFailed, SourceFetched
from scrapy_echo.core.identity import PageIdentity
from scrapy_echo.core.pages import Dispatch
from scrapy_echo.model.decisions.policies import Policy
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.sim.capacity_greedy import CapacityGreedy
from scrapy_echo.sim.oracle import GreedyOracle
from scrapy_echo.sim.trace import Trace
from scrapy_echo.sim.trace_web import ClickLog, Signals, TraceWeb
from scrapy_echo.sim.web_hosts import HostGate, WebHosts, first_sources


def _default(setting: str) -> Any:
    return DEFAULTS[setting]


# The paper's set-up (Lefortier et al.): no refresh lane, and what a source lists at its first
# crawl is old. The ``sim`` commands and the benchmarks replay it (docs/simulator.rst).
PAPER_SETUP: dict[str, Any] = {"refresh_share": 0.0, "backlog": "skip"}


@dataclass(frozen=True)
class SimSettings:
    """How the simulated crawler runs: the crawl settings of the same names (``ECHO_*``,
    docs/reference.rst), with the crawl's defaults (``SimSettings(rate, **PAPER_SETUP)``
    for the paper's set-up)."""

    crawl_rate: float  # crawls per second, sources and pages together
    resolve_interval: float = _default("ECHO_RESOLVE_INTERVAL")  # s between re-solves
    click_push_period: float = _default("ECHO_CLICK_PUSH_PERIOD")  # s between click deliveries
    history_size: int = _default("ECHO_HISTORY_SIZE")  # crawls of a source behind its λ
    click_bin: float = _default("ECHO_CLICK_BIN")  # seconds per age bin of the click fit
    click_bins: int = _default("ECHO_CLICK_BINS")  # age bins fitted
    default_profit: float = _default("ECHO_DEFAULT_PROFIT")  # P before any click data
    default_half_life: float = _default("ECHO_DEFAULT_HALF_LIFE")  # s, before click data
    site_weights: dict[str, float] = field(default_factory=dict, compare=False)
    site_scores: dict[str, float] = field(default_factory=dict, compare=False)
    # False: the crawler gets no click log (a monitor without a click feed)
    clicks: bool = True
    # False: the crawler gets none of the trace's change-indicating signals
    signals: bool = True
    failure_backoff: float = _default("ECHO_FAILURE_BACKOFF")  # (sources never fail here)
    failure_backoff_max: float = _default("ECHO_FAILURE_BACKOFF_MAX")
    source_max_failures: int = _default("ECHO_SOURCE_MAX_FAILURES")
    page_max_tries: int = _default("ECHO_PAGE_MAX_TRIES")
    max_sources_per_site: int = _default("ECHO_MAX_SOURCES_PER_SITE")
    max_found_sources: int = _default("ECHO_MAX_FOUND_SOURCES")
    # The refresh lane's share of the budget (0: none, the paper) and what a click on a
    # stale copy loses (ECHO_REFRESH_SHARE, ECHO_REFRESH_STALE_COST).
    refresh_share: float = _default("ECHO_REFRESH_SHARE")
    refresh_stale_cost: float = _default("ECHO_REFRESH_STALE_COST")
    refresh_prior_period: float = _default("ECHO_REFRESH_PRIOR_PERIOD")
    # Its risk controls: seconds between refetches of a page, at least and at most, and the
    # share of refetches expected very stale (ECHO_REFRESH_SHORTEST, _LONGEST, _VERY_STALE).
    refresh_shortest: float = _default("ECHO_REFRESH_SHORTEST")
    refresh_longest: float = _default("ECHO_REFRESH_LONGEST")
    refresh_very_stale: float = _default("ECHO_REFRESH_VERY_STALE")
    backlog: str = _default("ECHO_BACKLOG")  # "skip": what a first crawl lists is old
    min_interval: float = _default("ECHO_MIN_INTERVAL")  # s; bounds of every source's interval
    max_interval: float = math.inf  # (ECHO_MAX_INTERVAL's None: no bound)
    seen_ttl: float = _default("ECHO_SEEN_TTL")  # s a link is remembered unseen
    # True: the click log has every click of a crawled page, also those before the crawl
    # (site analytics). False: only clicks after the crawl (a search engine's own log: a page
    # it has not indexed gets no clicks from it).
    clicks_before_crawl: bool = True
    # The trace's URLs are clean already: the default identity only folds their scheme.
    identity: PageIdentity = field(default_factory=PageIdentity, compare=False)
    # ``(time, crawls/s)``: from each time on, slots come at that rate (a budget that changes
    # mid-run, as a live crawl's measured throughput does); the plan learns of it at its
    # next re-solve, as a live crawl's does.
    rate_changes: tuple[tuple[float, float], ...] = ()
    # Whether the replay honours the trace's hosts (hosts.csv: delays, outages, hub pages;
    # docs/simulator.rst, "Hosts"), and the seconds a download keeps its host busy.
    hosts: bool = True
    download_time: float = 0.0
    max_next_pages: int = _default("ECHO_MAX_NEXT_PAGES")  # next pages read in one hub crawl

    def __post_init__(self) -> None:
        for name in (
            "crawl_rate",
            "resolve_interval",
            "click_push_period",
            "click_bin",
            "default_half_life",
        ):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not (math.isfinite(self.download_time) and self.download_time >= 0):
            raise ValueError(
                f"download_time must be a finite number >= 0, got {self.download_time!r}"
            )
        if self.max_next_pages < 0:
            raise ValueError(f"max_next_pages must be >= 0, got {self.max_next_pages!r}")
        for name in ("history_size", "click_bins"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        times = [at for at, _ in self.rate_changes]
        rates = [rate for _, rate in self.rate_changes]
        if times != sorted(times) or not all(math.isfinite(x) and x > 0 for x in (*times, *rates)):
            raise ValueError(
                "rate_changes must be (time, rate) pairs, times > 0 in order and rates > 0, "
                f"got {self.rate_changes!r}"
            )


@dataclass
class Replay:
    """What happened in one run: per page, when it was discovered and crawled (NaN: never)."""

    policy: str
    settings: SimSettings
    discovered: FloatArray
    crawled: FloatArray
    source_crawls: int = 0
    page_crawls: int = 0
    idle_slots: int = 0
    solves: int = 0
    omega: list[tuple[float, float]] = field(default_factory=list)  # (time, ω) per re-solve
    crawls_per_source: list[int] = field(default_factory=list)
    core: CrawlCore | None = field(default=None, compare=False, repr=False)  # its final state
    refetches: list[tuple[int, float]] = field(default_factory=list)  # (page, when), in order
    # With hosts: a hub's next pages read, requests a host refused (503 while down), new
    # pages whose fetch it refused (lost, as a live crawl loses them), refetches put off.
    next_pages: int = 0
    refused: int = 0
    lost_pages: int = 0
    refreshes_put_off: int = 0


def simulate(
    trace: Trace,
    policy: Policy,
    settings: SimSettings,
    *,
    progress: Callable[[float], None] | None = None,
    decisions: list[tuple[float, str, str]] | None = None,
) -> Replay:
    """Run ``policy`` over ``trace``; ``progress`` gets the fraction done now and then, and
    ``decisions``, if given, each slot's fetch as ``(time, kind, url)`` (kind ``"source"``,
    ``"page"``, ``"refresh"`` or, on a trace with paginated hubs, ``"next-page"`` with its
    source's URL)."""
    web = TraceWeb(trace)
    core = CrawlCore(settings, policy)
    state = core.state  # (a replay never replaces it; locals keep the loop lean)
    source_urls, page_urls, page_ids = web.source_urls, web.page_urls, web.page_ids
    core.add_sources(source_urls)
    replay = Replay(
        policy.name, settings, np.full(trace.n_pages, np.nan), np.full(trace.n_pages, np.nan)
    )
    replay.crawls_per_source = crawls_per_source = [0] * trace.n_sources
    replay.core = core
    clicks = ClickLog(trace)
    if isinstance(policy, GreedyOracle):
        policy.attach(trace, replay.discovered)
    elif isinstance(policy, CapacityGreedy):
        policy.attach(trace, replay.discovered, page_urls)

    next_resolve = 0.0
    next_push = settings.click_push_period
    report_every = max(1, math.floor(trace.duration * settings.crawl_rate) // 200)
    signals = Signals(trace if settings.signals else None)
    refreshing = core.refreshing
    gate = _gate(trace, settings)
    # The plan's per-host capacity, as the live crawl's politeness gives it.
    capacity = None if gate is None else gate.capacity_by_url(source_urls).__getitem__
    next_pages: deque[tuple[int, int, float]] = deque()  # (source, page, crawl before)
    for k, (now, rate) in enumerate(_slot_times(trace.duration, settings)):
        if now >= signals.next_at:
            signals.deliver(core, now, source_urls)
        if now >= next_push:
            if settings.clicks:
                _push_clicks(core, clicks.until(next_push), replay, settings, page_urls)
            next_push += settings.click_push_period
        if now >= next_resolve:
            plan = core.replan(now, rate, capacity)
            replay.solves += 1
            replay.omega.append((now, plan.omega))
            next_resolve += settings.resolve_interval
        if gate is not None and next_pages and gate.free(gate.source_host(next_pages[0][0]), now):
            # As the live scheduler serves a follow-up of its own request first, the latest
            # first (its plain lane's head).
            source, number, before = next_pages.popleft()
            if decisions is not None:
                decisions.append((now, "next-page", source_urls[source]))
            _read_next_page(core, web, gate, replay, next_pages, source, number, before, now)
            continue
        if refreshing:
            key = core.next_refresh(now)
            if key is not None:
                on = state.refresh.source_of(key) or 0
                page = page_ids[key]
                if gate is not None and not gate.free(gate.page_host[page], now):
                    # As the live scheduler: due again when its host frees.
                    core.refresh_put_back(key, float(gate.free_at[gate.page_host[page]]))
                    replay.refreshes_put_off += 1
                else:
                    replay.refetches.append((page, now))
                    if decisions is not None:
                        decisions.append((now, "refresh", key))
                    if gate is None or gate.take(gate.page_host[page], now) is None:
                        core.apply(
                            PageFetched(
                                page_urls[page],
                                source_urls[on],
                                web.created[page],
                                now,
                                digest=web.digest(page, now),
                                refresh=True,
                            )
                        )
                    continue
        dispatched = (
            core.dispatch(now) if gate is None else _dispatch_polite(core, gate, page_ids, now)
        )
        if dispatched is None:
            replay.idle_slots += 1
        elif dispatched.page is not None:
            waiting = dispatched.page
            url = waiting.page.url  # type: ignore[attr-defined]
            page = page_ids[url]
            if decisions is not None:
                decisions.append((now, "page", url))
            if gate is not None and gate.take(gate.page_host[page], now) is not None:
                replay.lost_pages += 1  # (a live crawl sends no event for it either)
                continue
            replay.page_crawls += 1
            replay.crawled[page] = now
            digest = web.digest(page, now) if refreshing else None
            core.apply(
                PageFetched(url, source_urls[waiting.source], waiting.appeared, now, digest=digest)
            )
        else:
            source = dispatched.source
            replay.source_crawls += 1
            crawls_per_source[source] += 1
            if decisions is not None:
                decisions.append((now, "source", source_urls[source]))
            previous = state.sources[source].last_fetched  # NaN: never crawled
            if gate is None:
                shown = web.shown(source, previous, now)
            else:
                retry_after = gate.take(gate.source_host(source), now)
                if retry_after is not None:
                    replay.refused += 1
                    core.apply(
                        SourceFailed(source_urls[source], now, "HTTP 503", retry_after=retry_after)
                    )
                    continue
                shown = web.shown(
                    source, previous, now, size=gate.page_size_of(source), newest_first=True
                )
                if gate.page_size_of(source) and _reads_on(
                    core, source, 1, shown, None, settings.max_next_pages
                ):
                    next_pages.appendleft((source, 2, previous))
            for new in core.apply(SourceFetched(source_urls[source], now, shown)):
                replay.discovered[page_ids[new.url]] = now
                core.queue(new)
        if progress is not None and k % report_every == 0:
            progress(now / trace.duration)
    if progress is not None:
        progress(1.0)
    return replay


def _gate(trace: Trace, settings: SimSettings) -> HostGate | None:
    """The replay's per-host gate, if the trace has hosts (and the replay honours them) or
    downloads take time."""
    if not settings.hosts or not (trace.hosts or settings.download_time > 0):
        return None
    hosts = trace.hosts if trace.hosts is not None else WebHosts()
    pages = first_sources(trace.link_page, trace.link_source, trace.link_appeared, trace.n_pages)
    return HostGate(
        hosts,
        trace.source_urls,
        pages,
        download_time=settings.download_time,
        longest_hold=settings.failure_backoff_max,
    )


def _dispatch_polite(
    core: CrawlCore, gate: HostGate, page_ids: dict[str, int], now: float
) -> Dispatch | None:
    """The core's dispatch among sources whose host is free, as the live scheduler's
    (:meth:`scrapy_echo.crawler.scheduler.EchoScheduler.next_echo_request`): a choice that
    lands on a busy host anyway (a policy that does not look at crawl times) is put back and
    its source set aside, up to :data:`~scrapy_echo.core.crawl.BUSY_TRIES` times."""
    blocked = gate.blocked(now)
    for _ in range(BUSY_TRIES):
        dispatched = core.dispatch(now, blocked)
        if dispatched is None:
            return None
        waiting = dispatched.page
        if waiting is None:
            host = gate.source_host(dispatched.source)
        else:  # (a page is on the host its URL names, as a live request's slot is)
            host = gate.page_host[page_ids[waiting.page.url]]  # type: ignore[attr-defined]
        if gate.free(host, now):
            return dispatched
        core.put_back(dispatched)
        grown = np.zeros(len(core.state.sources), dtype=bool)
        if blocked is not None:
            grown[: blocked.size] = blocked
        grown[dispatched.source] = True
        blocked = grown
    return None


def _reads_on(
    core: CrawlCore,
    source: int,
    page: int,
    shown: tuple[tuple[str, float | None], ...],
    boundary: int | None,
    most: int,
) -> bool:
    """Whether a hub crawl reads the page after page ``page`` (at most ``most`` past the
    first), by the live crawl's rule (:mod:`scrapy_echo.core.hub_paging`), asked before the
    page's links reach the core."""
    if not shown:
        return False
    urls = [url for url, _ in shown]
    known = core.state.links_seen(urls)
    return core.reads_on(source, page, urls, known, boundary, most=most) == "next"


def _read_next_page(
    core: CrawlCore,
    web: TraceWeb,
    gate: HostGate,
    replay: Replay,
    next_pages: deque[tuple[int, int, float]],
    source: int,
    number: int,
    before: float,
    now: float,
) -> None:
    """Page ``number`` of ``source``'s hub, read at ``now`` as part of its crawl (the crawl
    before it at ``before``); the next one queued if this one too was all new."""
    url = web.source_urls[source]
    replay.next_pages += 1
    if gate.take(gate.source_host(source), now) is not None:
        replay.refused += 1  # (the crawl itself was read: a next page's failure is no crawl's)
        return
    shown = web.shown(
        source, before, now, page=number, size=gate.page_size_of(source), newest_first=True
    )
    urls = [link for link, _ in shown]
    boundary = core.next_page_boundary(source, number, urls, core.state.links_seen(urls))
    if boundary is not None:  # (what it lists past a link shown before is older still)
        shown = shown[: boundary + 1]
    if _reads_on(core, source, number, shown, boundary, replay.settings.max_next_pages):
        next_pages.appendleft((source, number + 1, before))
    for new in core.apply(SourceFetched(url, now, shown, continued=True)):
        replay.discovered[web.page_ids[new.url]] = now
        core.queue(new)


def _slot_times(duration: float, settings: SimSettings) -> Iterator[tuple[float, float]]:
    """Each slot's time and the crawl rate then: ``1/rate`` apart, the rate changing at
    ``settings.rate_changes`` (times computed as ``start + k/rate``, so a run without changes
    has exactly the slots it always had)."""
    start, rate = 0.0, settings.crawl_rate
    for until, next_rate in (*settings.rate_changes, (duration, rate)):
        until = min(until, duration)
        slot = 1.0 / rate
        if until < duration:
            count = max(0, math.ceil((until - start) * rate))
        else:
            count = math.floor((duration - start) * rate)
        for k in range(count):
            yield start + k * slot, rate
        if until >= duration:
            return
        start, rate = until, next_rate


def _push_clicks(
    core: CrawlCore,
    delivered: tuple[list[int], list[float], list[float]],
    replay: Replay,
    settings: SimSettings,
    page_urls: list[str],
) -> None:
    pages, ts, counts = delivered
    if not settings.clicks_before_crawl:
        crawled = replay.crawled[pages] if pages else np.zeros(0)
        logged = (crawled <= np.asarray(ts)).tolist()  # NaN (never crawled): False
        pages = [x for x, keep in zip(pages, logged, strict=True) if keep]
        ts = [x for x, keep in zip(ts, logged, strict=True) if keep]
        counts = [x for x, keep in zip(counts, logged, strict=True) if keep]
    core.add_clicks([page_urls[page] for page in pages], ts, counts, count_matched=False)
