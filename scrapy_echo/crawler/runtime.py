"""The objects one crawler's ECHO components share: config, state, policy, clock.

Scrapy builds the scheduler, the middlewares and the extension separately, each from the
crawler; :meth:`EchoRuntime.of` gives them all the same runtime, created on first use.
"""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from scrapy_echo.core.crawl import CrawlCore
from scrapy_echo.core.events import (
    ClicksArrived,
    Event,
    PageFetched,
    SignalsArrived,
    SourceAdded,
    SourceFailed,
    SourceRemoved,
)
from scrapy_echo.core.pages import NewPage
from scrapy_echo.core.seen import Housekeeping
from scrapy_echo.crawler.echo_requests import page_request
from scrapy_echo.crawler.link_batch import LinkBatch
from scrapy_echo.crawler.page_delays import PageDelays
from scrapy_echo.crawler.settings import EchoConfig, read_sources
from scrapy_echo.crawler.signals import page_found, source_retired
from scrapy_echo.crawler.throughput import LaneShare, Throughput
from scrapy_echo.inputs.click_intake import ClickIntake
from scrapy_echo.inputs.signalfeed import SignalIntake
from scrapy_echo.model.decisions.policies import Policy, SolveJob
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.intervals.plan import Plan
from scrapy_echo.sources.address_guard import AddressGuard

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure
    from typing_extensions import Self

    from scrapy_echo.core.seen import Remembered
    from scrapy_echo.core.view import CrawlView
    from scrapy_echo.crawler.politeness import Politeness
    from scrapy_echo.inputs.feed_reader import FeedReader

logger = logging.getLogger(__name__)

# Scrapy's own scheduler stats, kept for dashboards built on them.
_SCRAPY_ENQUEUED = ("scheduler/enqueued", "scheduler/enqueued/memory")
# Budget for the first plan, before any throughput is measured, when ECHO_CRAWL_RATE is unset.
_UNMEASURED_RATE = 1.0


class EchoRuntime:
    """Per-crawler ECHO objects; see :meth:`of`."""

    _instances: ClassVar[weakref.WeakKeyDictionary[Crawler, EchoRuntime]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(self, crawler: Crawler, *, clock: Callable[[], float] = time.time) -> None:
        self.crawler = crawler
        self.config = EchoConfig.from_settings(crawler.settings)
        self.clock = clock
        self.core = CrawlCore(self.config, make_policy(self.config.policy))
        self.core.run_housekeeping = self._housekeep_on_thread
        self.throughput = Throughput(window=max(60.0, self.config.resolve_interval))
        self.lanes = LaneShare(window=max(60.0, self.config.resolve_interval))
        # Clicks and change-indicating signals, however they come.
        self.click_intake = ClickIntake(self, self.config.identity.clean)
        self.signal_intake = SignalIntake(self)
        # By id of a source response, its links on their way through the spider middlewares.
        self.link_batches: dict[int, LinkBatch] = {}
        self._wake_warned = False
        # Distributed mode (:mod:`scrapy_echo.distributed`) sets these: events then travel to
        # the worker that holds the state, and each leased request is acknowledged when done.
        self.transport: Callable[[Event], None] | None = None
        self.holds_state = True  # False on a distributed worker that is not the planner
        # Whether a plan made now may be installed: a distributed planner's only while its
        # lease is sure to be held (a solve runs on a thread, and may outlast the lease).
        self.may_plan: Callable[[], bool] = lambda: True
        self.on_done: Callable[[Request], None] | None = None
        # With JOBDIR, each event applied here goes to the journal too, so that a crash loses
        # about a second of the crawl, not a checkpoint period (scrapy_echo.crawler.journal).
        self.journal: Callable[[Event], None] | None = None
        # The scheduler's view of Scrapy's download slots: each host's capacity for the plan.
        self.politeness: Politeness | None = None
        # Gives back the budget slot of a request that was never sent (robots.txt forbade it).
        self.refund: Callable[[], None] | None = None
        self._address_guard: AddressGuard | None = None
        # For the metrics endpoint: how long new pages waited, and the re-solves' time.
        self.delays = PageDelays()
        self.solve_seconds = 0.0  # all re-solves this process made (not those made loading)
        self.last_solve_seconds = 0.0

    # The core's parts, read-only here: only the core changes them (CrawlCore.reset).
    @property
    def state(self) -> CrawlView:
        return self.core.state

    @property
    def policy(self) -> Policy:
        return self.core.policy

    @property
    def solves(self) -> int:
        return self.core.solves

    @property
    def address_guard(self) -> AddressGuard:
        """Which hosts links, sitemaps, redirects and requests read from Redis may name
        (:mod:`scrapy_echo.sources.address_guard`): besides public ones, the hosts of the
        crawl's own sources (``ECHO_SOURCES`` and the spider's ``echo_sources``, as they were
        at start) and ``ECHO_ALLOWED_PRIVATE_HOSTS``."""
        if self._address_guard is not None:
            return self._address_guard
        spider = self.crawler.spider
        own = read_sources(getattr(spider, "echo_sources", ()))
        guard = AddressGuard.for_crawl(self.config.sources + own, self.config.allowed_private_hosts)
        if spider is not None:  # (known for good once the spider is)
            self._address_guard = guard
        return guard

    @classmethod
    def of(cls, crawler: Crawler) -> EchoRuntime:
        """The crawler's runtime (``NotConfigured`` from bad settings propagates)."""
        runtime = cls._instances.get(crawler)
        if runtime is None:
            runtime = cls._instances[crawler] = cls(crawler)
        return runtime

    def crawl_rate(self) -> float:
        """The budget ``N`` (pages/s): ``ECHO_CRAWL_RATE``, else the measured throughput."""
        if self.config.crawl_rate is not None:
            return self.config.crawl_rate
        measured = self.throughput.rate(self.clock())
        return measured if measured else _UNMEASURED_RATE

    def replan(self) -> Plan:
        """Fresh estimates, a fresh schedule; one summary line in the log."""
        return self.replan_job()()()

    def replan_job(self) -> SolveJob:
        """:meth:`replan` in the parts of :meth:`CrawlCore.replan_job`: the estimates taken
        now, on the reactor's thread; the solve, on any; the install, on the reactor's."""
        budget = self.plan_budget()
        capacity = self.politeness.capacity if self.politeness is not None else None
        started = time.perf_counter()
        job = self.core.replan_job(self.clock(), budget, capacity)
        estimated = time.perf_counter() - started

        def work() -> Callable[[], Plan]:
            started = time.perf_counter()
            install = job()
            seconds = estimated + time.perf_counter() - started

            def installed() -> Plan:
                self.last_solve_seconds = seconds
                self.solve_seconds += seconds
                return self.replanned(install(), budget)

            return installed

        return work

    def plan_budget(self) -> float:
        """What a re-solve now plans to spend (pages/s): the budget less the plain lane's
        share of it, as measured lately."""
        return self.crawl_rate() * (1.0 - self.lanes.share())

    def replanned(self, plan: Plan, budget: float) -> Plan:
        """The stats and the log line of a re-solve that planned ``budget``."""
        plain_share = self.lanes.share()
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value("echo/solver/solves", self.solves)
            stats.set_value("echo/solver/omega", plan.omega)
            stats.set_value("echo/solver/kept", int(plan.kept.sum()))
            stats.set_value("echo/solver/crawl_rate", budget)
            stats.set_value("echo/solver/plain_share", plain_share)
            if self.core.refreshing:
                lane = self.state.refresh
                stats.set_value("echo/refresh/pages", len(lane.pages))
                stats.set_value("echo/refresh/planned_rate", lane.planned_rate)
                stats.set_value("echo/refresh/changes", lane.changes)
                stats.set_value("echo/refresh/incomparable", lane.incomparable)
                # The plan's expected risks (Ford et al.'s Sec. 5.3); NaN before a plan.
                for name in ("very_stale_share", "underestimate_risk", "shrink"):
                    value = getattr(lane, name)
                    if math.isfinite(value):
                        stats.set_value(f"echo/refresh/{name}", value)
            site_share = self.state.learner.site_share
            if site_share is not None:
                stats.set_value("echo/sources/site_share", site_share)
            trusted = getattr(self.policy, "trusted_signals", None)
            if trusted is not None and self.state.signals.received:
                stats.set_value("echo/signals/trusted_sources", trusted())
        logger.info(
            "ECHO re-solve %d: %d sources, %d kept, budget %.3g pages/s, omega %.3g, "
            "%d pages waiting",
            self.solves,
            len(plan),
            int(plan.kept.sum()),
            budget,
            plan.omega,
            len(self.state.frontier),
        )
        return plan

    def _housekeep_on_thread(self, job: Housekeeping) -> None:
        """Merge and expire a fingerprint set on the reactor's thread pool: it takes a second
        or so at 10 M links, which the reactor must not wait for (docs/monitor.rst)."""
        from twisted.internet.threads import deferToThread  # (no reactor at import time)

        started = time.perf_counter()

        def done(result: Remembered) -> None:
            job.done(result)
            logger.debug("ECHO %s merged in %.3f s", job.what, time.perf_counter() - started)

        def failed(failure: Failure) -> None:
            job.failed()
            logger.error("ECHO could not merge the %s (%s); next re-solve tries again",
                         job.what, failure.value)  # fmt: skip

        deferToThread(job.work).addCallbacks(done, failed)

    def observe(self, event: Event) -> None:
        """Apply what a middleware saw, and queue the new pages it revealed. In distributed
        mode the event is sent on instead, to the worker that applies it."""
        if self.transport is not None:
            self.transport(event)
            return
        self.found(self.apply(event))
        if self.journal is not None:
            self.journal(event)

    def found(self, pages: list[NewPage]) -> None:
        """Queue new ``pages`` in the core; :data:`~scrapy_echo.crawler.signals.page_found`
        for each."""
        if not pages:
            return
        for page in pages:
            self.core.queue(page)
        if self._listened(page_found):  # (a request each, for the listeners only)
            callback, signals = self.page_callback(), self.crawler.signals
            for page in pages:
                signals.send_catch_log(
                    signal=page_found,
                    request=page_request(page, callback),
                    source=page.source_url,
                    spider=self.crawler.spider,
                )
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value("echo/pages/new", len(pages))
            if self.transport is None:  # queued in this process's scheduler: enqueued there
                for key in ("echo/scheduler/enqueued/page", *_SCRAPY_ENQUEUED):
                    stats.inc_value(key, len(pages))
        if self.config.debug:
            logger.debug("ECHO %d new pages on %s", len(pages), pages[0].source_url)

    def apply(self, event: Event) -> list[NewPage]:
        """Hand ``event`` to the core; click rows are checked (and bad ones counted) here."""
        if isinstance(event, ClicksArrived):
            self.click_intake.push(event.rows)
            return []
        if isinstance(event, SignalsArrived):
            self.signal_intake.push(event.rows)
            return []
        pages = self.core.apply(event)
        if isinstance(event, PageFetched) and not event.refresh:
            self.delays.fetched(event.source, appeared=event.appeared, t=event.t)
        if isinstance(event, SourceFailed):
            status = self.core.status_of(event.url)
            if (
                status is not None
                and status.retired
                and status.failures == self.config.source_max_failures
            ):
                self.crawler.signals.send_catch_log(
                    signal=source_retired,
                    source=event.url,
                    why=event.why,
                    spider=self.crawler.spider,
                )
        return pages

    # -- sources while the crawl runs -----------------------------------------------------------
    def add_source(self, url: str) -> None:
        """Crawl ``url`` as a source from now on (a retired or removed one comes back);
        ``ValueError`` if it is not an absolute http(s) URL."""
        self.observe(SourceAdded(self._checked_source(url)))

    def remove_source(self, url: str) -> None:
        """Stop crawling source ``url`` (its waiting pages are dropped)."""
        self.observe(SourceRemoved(self._checked_source(url)))

    def sources(self) -> list[dict[str, Any]]:
        """Every source this process knows, with its status (``active``, ``retired``,
        ``removed``) and counters."""
        return [status.summary() for status in self.state.sources]

    @staticmethod
    def _checked_source(url: str) -> str:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"source {url!r} must be an absolute http(s) URL")
        return url

    def done(self, request: Request | None) -> None:
        """``request`` has been processed (its response, or its final failure)."""
        if self.on_done is not None and request is not None:
            self.on_done(request)

    def _listened(self, signal: object) -> bool:
        from pydispatch.dispatcher import getAllReceivers, liveReceivers  # type: ignore[import-untyped]

        receivers = liveReceivers(getAllReceivers(self.crawler.signals.sender, signal))
        return any(True for _ in receivers)

    def page_callback(self) -> Callable[..., Any]:
        """The spider method new pages go to: its ``echo_page_callback`` (a method or its
        name), else ``ECHO_PAGE_CALLBACK``; ``ValueError`` naming both if there is none."""
        spider = self.crawler.spider
        chosen = getattr(spider, "echo_page_callback", None) or self.config.page_callback
        callback = chosen if callable(chosen) else getattr(spider, str(chosen), None)
        if not callable(callback):
            raise ValueError(
                f"ECHO_PAGE_CALLBACK ({chosen!r}) is not a method of spider "
                f"{getattr(spider, 'name', spider)!r}: set ECHO_PAGE_CALLBACK (or the spider's "
                "echo_page_callback) to the method that handles a new page"
            )
        return callback  # type: ignore[no-any-return]

    def wake_engine(self) -> None:
        """Ask the engine for requests now, not at its next 5 s heartbeat.

        Scrapy has no public call for this: the engine's private ``_slot.nextcall`` is the
        one way in, used here and nowhere else. If a Scrapy release moves it, the heartbeat
        still comes (requests go out up to 5 s late), a warning says so once, and
        ``echo/scheduler/wake_unavailable`` counts the misses; the live-crawl test fails on
        that stat, so an upgrade cannot break this silently."""
        try:
            engine: Any = getattr(self.crawler, "engine", None)
        except RuntimeError:  # Scrapy 2.13+: before the crawl starts (nothing to wake yet)
            engine = None
        nextcall = getattr(getattr(engine, "_slot", None), "nextcall", None)
        stats = self.crawler.stats
        if nextcall is not None and callable(getattr(nextcall, "schedule", None)):
            nextcall.schedule()
            if stats is not None:
                stats.inc_value("echo/scheduler/wakes")
            return
        if engine is not None and not self._wake_warned:
            self._wake_warned = True
            logger.warning(
                "ECHO cannot wake the Scrapy engine (engine._slot.nextcall is gone in this "
                "Scrapy); requests wait for the engine's 5 s heartbeat"
            )
        if stats is not None:
            stats.inc_value("echo/scheduler/wake_unavailable")

    def feed_state(self) -> dict[str, Any]:
        return {str(reader.path): reader.state() for reader in self._feed_readers()}

    def restore_feeds(self, saved: Mapping[str, Any]) -> None:
        """Each feed reader's saved position: the one saved under its path, else the one
        position saved for a feed of its kind at a path no reader has (a planner on another
        host, its copy of the feed elsewhere: the reader checks the bytes before it reads on).
        A reader without one reads its file from the top: the restored state counted none of
        it."""
        readers = self._feed_readers()
        paths = {str(reader.path) for reader in readers}
        for reader in readers:
            position = saved.get(str(reader.path))
            if position is None:
                elsewhere = [
                    other
                    for path, other in saved.items()
                    if path not in paths
                    and isinstance(other, Mapping)
                    and other.get("kind") == reader.what
                ]
                position = elsewhere[0] if len(elsewhere) == 1 else None
            if position is None:
                reader.rewind()
            else:
                reader.restore(position)

    def _feed_readers(self) -> list[FeedReader[Any]]:
        return [*self.click_intake.readers, *self.signal_intake.readers]


class EchoComponent:
    """What every ECHO Scrapy component starts from: the crawler, its shared runtime and
    state, built by ``from_crawler``, and a stats counter."""

    def __init__(self, crawler: Crawler, runtime: EchoRuntime) -> None:
        self.crawler = crawler
        self.runtime = runtime

    @property
    def state(self) -> CrawlView:
        """The crawl state, read through the runtime: whoever replaces it (a planner taking
        over) replaces it for every component."""
        return self.runtime.state

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls(crawler, EchoRuntime.of(crawler))

    def inc_stat(self, key: str, count: int = 1) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, count)

    def count_scrapy_stat(self, direction: str, queue: str) -> None:
        """Scrapy's own scheduler stats (``scheduler/enqueued``, ``.../memory``, ...), kept
        for dashboards built on them."""
        self.inc_stat(f"scheduler/{direction}")
        self.inc_stat(f"scheduler/{direction}/{queue}")
