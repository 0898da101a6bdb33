"""What a live crawl knows, in memory: sources, crawl times, seen links, what was learned.

One :class:`CrawlState` per crawl, written by its :class:`~scrapy_echo.core.crawl.CrawlCore`
alone (the Scrapy glue, the Redis planner and the simulator read it through the core). It
holds plain data and the model objects the simulator uses too (:class:`SourceLearner`,
:class:`Frontier`); Scrapy objects stay out, except the waiting page requests a live crawl's
frontier carries, which the snapshot stores as data.
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scrapy_echo.core.history_samples import thinned
from scrapy_echo.core.identity import fold_scheme
from scrapy_echo.core.page_retries import PageRetries
from scrapy_echo.core.seen import FingerprintSet, Housekeeping
from scrapy_echo.core.source_status import STATUS_FIELDS, SourceStatus, status_row
from scrapy_echo.core.state_config import StateConfig
from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.estimation.change_signals import SignalBook
from scrapy_echo.model.estimation.cycles import WeekProfile
from scrapy_echo.model.estimation.learning import SourceLearner
from scrapy_echo.model.estimation.overflow import OverflowWatch
from scrapy_echo.model.estimation.overlap import OverlapBook
from scrapy_echo.model.estimation.priors import ColdStart
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.refetch.refresh_lane import RefreshLane

RETIRED = 1e18  # the crawl time of a retired source (some 3e10 years from now)


def fingerprint(url: str) -> int:
    """64 bits of a canonical URL: the seen-links set holds these instead of strings."""
    return int.from_bytes(hashlib.blake2b(url.encode(), digest_size=8).digest(), "big")


@dataclass
class CrawlState:
    """Sources, their crawl times and learned estimates, seen links, and waiting pages."""

    config: StateConfig
    sources: list[SourceStatus] = field(default_factory=list)
    source_ids: dict[str, int] = field(default_factory=dict)  # canonical URL -> id
    # Fingerprints of the links the sources showed, and of the fetched pages' keys; each is
    # forgotten ``seen_ttl`` after it was last seen (docs/monitor.rst, "Bounded state").
    seen: FingerprintSet = field(init=False)
    fetched: FingerprintSet = field(init=False)
    # Page identity (docs/tutorial.rst, "Real sites"): another URL's key -> the key of the page
    # it names (a redirect's target, a canonical link); forgotten with the fetched pages.
    aliases: dict[str, str] = field(default_factory=dict)
    alias_times: deque[tuple[float, str]] = field(default_factory=deque)  # oldest first
    crawled_pages: int = 0
    started: float = math.nan  # the first source crawl's time (of this process)
    retired_count: int = 0  # sources retired (kept as they retire: every re-solve asks)
    removed_count: int = 0  # sources removed by the user, likewise
    source_crawls: int = 0  # Σ crawls of the sources (kept as they happen: reports sample it)
    # Sources whose status changed since the last :meth:`status_rows` (a snapshot re-copies
    # only those), and the rows it copied.
    changed_sources: set[int] = field(default_factory=set)
    _status_rows: list[tuple[Any, ...]] = field(default_factory=list)
    # One sample per re-solve (see :meth:`record`), for reports (:mod:`.history_samples`).
    history: list[dict[str, Any]] = field(default_factory=list)
    _last_crawl: FloatArray = field(default_factory=lambda: np.full(0, np.nan))
    _ids_as_given: dict[str, int] = field(default_factory=dict)  # URL as given -> id
    _last_view: FloatArray = field(default_factory=lambda: np.full(0, np.nan))

    def __post_init__(self) -> None:
        cfg = self.config
        self.seen = FingerprintSet(cfg.seen_ttl)
        self.fetched = FingerprintSet(cfg.seen_ttl)
        self.learner = SourceLearner(
            0,
            history=cfg.history_size,
            bin_width=cfg.click_bin,
            bins=cfg.click_bins,
            grace=cfg.click_push_period,
            # Without clicks, a page is worth P halving every default_half_life seconds
            # (docs/how-it-works.rst, "Without a click feed").
            cold=ColdStart(profit=cfg.default_profit, decay=math.log(2.0) / cfg.default_half_life),
            # P and μ are refitted once per push of the click log (the paper's "logs push
            # period"): clicks come in that often.
            refit_every=cfg.click_push_period,
        )
        self.frontier = Frontier(0)
        # The sources the crawl last started with (CrawlCore.configure_sources); None: unknown
        self.configured_sources: list[str] | None = None
        # New pages whose fetch failed, until tried again (core.page_retries)
        self.page_retries = PageRetries(
            backoff=cfg.failure_backoff,
            backoff_max=cfg.failure_backoff_max,
            max_tries=cfg.page_max_tries,
        )
        self.signals = SignalBook()  # change-indicating signals (docs/how-it-works.rst)
        self.profile = WeekProfile()  # when sources publish, by hour of the week
        self.overlap = OverlapBook()  # which sources list the same pages
        self.overflow = OverflowWatch()  # which crawls found a hub overflowed
        # Fetched pages to fetch again when they may have changed (docs/how-it-works.rst)
        self.refresh = RefreshLane(
            share=cfg.refresh_share,
            stale_cost=cfg.refresh_stale_cost,
            prior_period=cfg.refresh_prior_period,
            shortest=cfg.refresh_shortest,
            longest=cfg.refresh_longest,
            very_stale=cfg.refresh_very_stale,
        )

    # -- sources --------------------------------------------------------------------------
    @property
    def last_crawl(self) -> FloatArray:
        """When each source was last crawled (NaN: never), a view of the first ``n``."""
        return self._last_view

    def add_source(self, url: str) -> int:
        """The id of ``url`` as a source, adding it if new."""
        (source,) = self.add_sources([url])
        return source

    def add_sources(self, urls: Iterable[str]) -> list[int]:
        """The ids of ``urls`` as sources, adding those that are new. The per-source tables
        grow once for all of them: one at a time, each would be copied at every addition."""
        ids = [self._register(url) for url in urls]
        n = len(self.sources)
        if n > self._last_crawl.size:  # grow by doubling: sources may come one by one
            grown = np.full(max(16, 2 * self._last_crawl.size, n), np.nan)
            grown[: self._last_crawl.size] = self._last_crawl
            self._last_crawl = grown
        # The view the policies read at every decision, made once per addition.
        self._last_view = self._last_crawl[:n]
        self.learner.grow(n)
        self.frontier.grow(n)
        self.signals.grow(n)
        return ids

    def _register(self, url: str) -> int:
        known = self._ids_as_given.get(url)  # (the key costs more than the rest)
        if known is not None:
            return known
        key = self.config.identity.key(url)
        known = self.source_ids.get(key)
        if known is not None:
            self._ids_as_given[url] = known
            return known
        source = len(self.sources)
        self.sources.append(SourceStatus(url))
        self.source_ids[key] = source
        self._ids_as_given[url] = source
        return source

    def add_listed_source(self, url: str, depth: int) -> int:
        """The id of ``url`` as a source ``depth`` levels of listing below one the operator
        gave (:attr:`SourceStatus.depth`): a new source is at ``depth``, a known one at the
        shallower of its own level and ``depth``."""
        known = len(self.sources)
        source = self.add_source(url)
        status = self.sources[source]
        if source >= known or depth < status.depth:
            status.depth = depth
            self.changed_sources.add(source)
        return source

    def revive(self, source: int) -> bool:
        """Crawl a retired or removed source again (it was added again); ``True`` if it was
        either."""
        status = self.sources[source]
        if not (status.retired or status.removed):
            return False
        self.retired_count -= status.retired
        self.removed_count -= status.removed
        status.retired = status.removed = False
        status.failures = 0
        self.changed_sources.add(source)
        self._last_crawl[source] = math.nan  # due now, as a new source
        return True

    def remove(self, source: int) -> bool:
        """Stop crawling ``source`` and forget its waiting pages (its links stay seen, so
        adding it again finds only what is new); ``True`` if it was not removed already."""
        status = self.sources[source]
        if status.removed:
            return False
        status.removed = True
        self.removed_count += 1
        self.changed_sources.add(source)
        self._last_crawl[source] = RETIRED
        self.frontier.drop(source)
        return True

    def off_schedule(self) -> list[int]:
        """Sources never crawled again: retired or removed (a plan gives them no budget)."""
        if not (self.retired_count or self.removed_count):
            return []
        return [i for i, status in enumerate(self.sources) if status.retired or status.removed]

    def source_blocked(self, source: int, now: float, recheck: float) -> None:
        """robots.txt forbids ``source``: ask again after ``recheck`` seconds (robots.txt
        changes), without counting a failure."""
        self.sources[source].robots_blocked += 1
        self.changed_sources.add(source)
        self._last_crawl[source] = now + recheck

    @property
    def retired_sources(self) -> int:
        return self.retired_count

    def source_dispatched(self, source: int, now: float) -> None:
        """A crawl of ``source`` was handed to the downloader: it is not due again for now."""
        self._last_crawl[source] = now

    def source_crawled(
        self,
        source: int,
        fetched: float,
        links: list[str],
        fresh: set[str] | None = None,
        stated: dict[str, float] | None = None,
        refused: set[str] | None = None,
    ) -> list[str]:
        """Record a crawl of ``source`` that showed ``links`` (clean URLs); returns the new
        ones: those whose key no source showed before, nor names a fetched page or a source.
        The first crawl of a source only records what is there, but for the ``fresh``
        links. ``stated``: the publication times the listing states, by link. ``refused``:
        links the spider middlewares dropped: seen, never pages, not counted in the yield."""
        status = self.sources[source]
        self.changed_sources.add(source)
        first = status.crawls == 0
        previous = status.last_fetched
        fetched = self._fetch_time(status, fetched)
        new, overflowed = self._new_links(links, fetched, source, first) if links else ([], False)
        if refused:
            new = [link for link in new if link not in refused]
        if first:
            new = [link for link in new if link in fresh] if fresh else []
        status.new_links += len(new)
        cut, floor = 0.0, False
        if new and not first:
            cut, floor = self.overflow.censoring(
                source, overflowed, new, stated or {}, previous, fetched
            )
        # The first crawl only starts the λ window (CrawlHistory ignores its count).
        self.learner.record_crawl(source, fetched, len(new), cut=cut, floor=floor)
        if not first:
            self.profile.observe(source, previous, fetched, len(new))
        if self.signals.received:  # (a first crawl only settles the signals before it)
            self.signals.crawled(source, 0.0 if first else fetched - previous, len(new))
        return new

    def source_continued(
        self, source: int, fetched: float, links: list[str], refused: set[str] | None = None
    ) -> list[str]:
        """More of the last crawl of ``source`` (a paginated hub's next page, read because
        the pages before were all new): its new ``links``, as :meth:`source_crawled` finds
        them, counted in its yield. Not a crawl: ``λ`` still sees the first page only, an
        overflow (its censoring-aware count takes that for what it is)."""
        status = self.sources[source]
        fresh, _, _ = self._unseen_links(links, fetched)
        new = [link for link, _ in fresh if not (refused and link in refused)]
        status.new_links += len(new)
        status.next_pages += 1
        self.changed_sources.add(source)
        return new

    def _new_links(
        self, links: list[str], now: float, source: int, first: bool
    ) -> tuple[list[str], bool]:
        """The links no source showed before (now all seen), and whether the crawl found the
        source overflowed; a link to another source is navigation, not a page. The source's
        recent links are noted for its overlaps."""
        fresh, marks, unseen = self._unseen_links(links, now)
        self.overlap.record(source, marks, [not u for u in unseen])
        # A first crawl's links are navigation and backlog alike: none is known content yet.
        content = [] if first else [mark for _, mark in fresh]
        overflowed = self.overflow.crawled(source, listed=marks, new=content)
        return [link for link, _ in fresh], overflowed

    def _unseen_links(
        self, links: list[str], now: float
    ) -> tuple[list[tuple[str, int]], list[int], list[bool]]:
        """The links no source showed before and that name no source, with their marks
        (now all seen); every link's mark, and whether it was unseen."""
        keys = [fold_scheme(link) for link in links]
        marks = [fingerprint(key) for key in keys]
        unseen = self.seen.add_new(marks, now)
        sources = self.source_ids
        fresh = [
            (link, mark)
            for link, key, mark, is_new in zip(links, keys, marks, unseen, strict=True)
            if is_new and key not in sources
        ]
        return fresh, marks, unseen

    def source_not_modified(self, source: int, fetched: float) -> None:
        """A 304: a crawl that found nothing new."""
        status = self.sources[source]
        self.changed_sources.add(source)
        status.not_modified += 1
        if status.crawls:
            previous = status.last_fetched
            fetched = self._fetch_time(status, fetched)
            self.learner.record_crawl(source, fetched, 0)
            self.profile.observe(source, previous, fetched, 0)
            if self.signals.received:
                self.signals.crawled(source, fetched - previous, 0)

    def source_failed(
        self,
        source: int,
        now: float,
        *,
        interval: float = math.inf,
        retry_after: float | None = None,
    ) -> float:
        """A crawl of ``source`` failed: back off so that a broken source does not eat the
        budget, and retire it after ``source_max_failures`` in a row. Returns the back-off in
        seconds (``inf``: retired).

        The back-off is on the source's own scale: its planned ``interval``, at most
        ``failure_backoff``, doubling per failure in a row up to ``failure_backoff_max``. A
        source crawled every few seconds whose host comes back after an outage is crawled
        again within a few intervals, so the pages published meanwhile are found; a source
        the plan does not keep waits ``failure_backoff``. Never less than ``retry_after``,
        the seconds its host asked for (up to ``failure_backoff_max``)."""
        status = self.sources[source]
        self.changed_sources.add(source)
        status.failures += 1
        cfg = self.config
        if status.failures >= cfg.source_max_failures:
            if not status.retired:
                self.retired_count += 1
            status.retired = True
            # Far in the future, yet finite: policies subtract it from now and scale the
            # difference, where inf would give NaN and win an argmax.
            self._last_crawl[source] = RETIRED
            return math.inf
        first = min(interval, cfg.failure_backoff) if interval > 0 else cfg.failure_backoff
        backoff = min(first * 2.0 ** (status.failures - 1), cfg.failure_backoff_max)
        if retry_after is not None:  # (within the longest back-off: a host cannot ask more)
            backoff = max(backoff, min(retry_after, cfg.failure_backoff_max))
        # A crawl time in the future keeps the source off every policy's list until then.
        self._last_crawl[source] = now + backoff
        return backoff

    def _fetch_time(self, status: SourceStatus, fetched: float) -> float:
        # Responses of one source may finish out of order (a redirect, a slow retry); its
        # crawl history must not go back in time.
        if fetched < status.last_fetched:
            fetched = status.last_fetched
        status.last_fetched = fetched
        status.crawls += 1
        self.source_crawls += 1
        status.failures = 0
        return fetched

    def status_rows(self) -> list[tuple[Any, ...]]:
        """Every source's status as a tuple (:data:`STATUS_FIELDS` in order), copied afresh
        only for the sources changed since the last call: a snapshot taken on the reactor
        costs what changed, not what is held. (A status changed other than through this
        class's methods must be added to ``changed_sources``.)"""
        rows, sources = self._status_rows, self.sources
        if len(rows) < len(sources):
            rows.extend(map(status_row, sources[len(rows) :]))
        for source in self.changed_sources:
            rows[source] = status_row(sources[source])
        self.changed_sources.clear()
        return list(rows)

    # -- history --------------------------------------------------------------------------
    def record(self, now: float, **figures: Any) -> None:
        """A history sample at ``now``: the counters so far (per-source new links included)
        and the ``figures`` given (budget, ω, ...)."""
        self.history.append(
            {
                "t": now,
                "source_crawls": self.source_crawls,
                "page_crawls": self.crawled_pages,
                "new_links": np.fromiter(
                    (s.new_links for s in self.sources), np.int64, len(self.sources)
                ),
                "clicks_caught": self.learner.clicks_caught,
                "waiting": len(self.frontier),
                **figures,
            }
        )
        self.history = thinned(self.history, len(self.sources))

    # -- pages ----------------------------------------------------------------------------
    def page_crawled(
        self,
        page: str,
        source: int,
        appeared: float,
        crawled: float,
        aliases: tuple[str, ...] = (),
    ) -> None:
        """``page`` (the clean URL it was queued under) was fetched; ``aliases`` are its other
        URLs (where it redirected, its canonical link)."""
        key = self.page_key(page)
        self.crawled_pages += 1
        self.fetched.add(fingerprint(key), crawled)
        self.page_retries.fetched(page)
        for alias in aliases:
            try:
                other = self.config.identity.key(alias)
            except ValueError:
                continue
            mark = fingerprint(other)
            # (A URL fetched as a page of its own keeps its own clicks.)
            if other != key and other not in self.aliases and mark not in self.fetched:
                self.aliases[other] = key
                self.alias_times.append((crawled, other))
                self.seen.add(mark, crawled)  # a source listing it later shows nothing new
        self.learner.add_page(key, source=source, appeared=appeared, crawled=crawled)

    def page_tries(self, url: str) -> int:
        """How many fetches of the new page ``url`` failed, while it waits to be tried again
        (0: none, or it was fetched or given up)."""
        return self.page_retries.failures.get(url, 0)

    def pages_retrying(self) -> tuple[int, int]:
        """New pages waiting to be tried again after a failed fetch, and those given up."""
        return len(self.page_retries), self.page_retries.given_up

    def page_key(self, clean_url: str) -> str:
        """The key of the page a clean URL names: its own, or that of the page it is an alias
        of. (Cheap: links, queued pages and click rows are cleaned where they come in.)"""
        key = fold_scheme(clean_url)
        return self.aliases.get(key, key)

    def links_seen(self, links: Sequence[str]) -> list[bool]:
        """Per link (a clean URL), whether a source showed it before: then it is no new page
        whatever it shows now."""
        seen = self.seen
        return [fingerprint(fold_scheme(link)) in seen for link in links]

    def already_fetched(self, url: str) -> bool:
        """Whether the page any URL names was fetched (under this URL or another)."""
        try:
            key = self.config.identity.key(url)
        except ValueError:
            return False
        return fingerprint(self.aliases.get(key, key)) in self.fetched

    # -- bounded state --------------------------------------------------------------------
    def housekeeping(self, now: float) -> list[Housekeeping]:
        """Forget aliases older than ``seen_ttl`` now, and the merges of the fingerprint sets
        that are due (the O(n) part, for the driver to run where it likes)."""
        cutoff = now - self.config.seen_ttl
        times, aliases = self.alias_times, self.aliases
        while times and times[0][0] < cutoff:
            aliases.pop(times.popleft()[1], None)
        jobs = []
        for what, fingerprints in (("seen links", self.seen), ("fetched pages", self.fetched)):
            work = fingerprints.merge_job(now)
            if work is not None:
                jobs.append(
                    Housekeeping(what, work, fingerprints.install, fingerprints.merge_failed)
                )
        return jobs


__all__ = [
    "STATUS_FIELDS",
    "CrawlState",
    "SourceStatus",
    "StateConfig",
    "fingerprint",
]
