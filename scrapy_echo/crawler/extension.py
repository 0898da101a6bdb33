"""Extension: every ``ECHO_RESOLVE_INTERVAL`` seconds, fold in the click feed and re-solve;
every ``ECHO_SIGNAL_POLL_INTERVAL`` seconds, read the signal feed; every ``ECHO_LOG_INTERVAL``
seconds, one status line.

Each round reads what the click feed files gained since the last round (``ECHO_CLICK_FEED``,
tailed across rotations), hands the rows to the learner (which attributes each click to its
page's source and age, and refits ``P, μ`` at most every ``ECHO_CLICK_PUSH_PERIOD``), refreshes
``λ``, re-solves the intervals, logs one summary line and sets the ``echo/`` stats. A feed is
read a batch at a time (:class:`~scrapy_echo.inputs.feed_reader.FeedReader`): a backlog larger
than a batch is read on in the next reactor turns, a batch a turn, so the reactor serves the
crawl (and a planner renews its lease) in between.

The status line, like Scrapy's LogStats, says what the scheduler is doing: sources scheduled
(kept by the plan) and idle, new pages waiting, the request rate against the budget, ``ω``
(the value a crawl must bring), and pages dropped as not worth a crawl. Every figure is also a
stat.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from scrapy import signals
from twisted.internet.task import LoopingCall

from scrapy_echo.core.unexpected import unexpected_counts
from scrapy_echo.crawler.runtime import EchoComponent, EchoRuntime
from scrapy_echo.inputs.clickfeed import ClickFeedReader
from scrapy_echo.inputs.feed_reader import FeedReader
from scrapy_echo.inputs.signalfeed import SignalFeedReader

if TYPE_CHECKING:
    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure
    from typing_extensions import Self

logger = logging.getLogger(__name__)

T = TypeVar("T")


class EchoExtension(EchoComponent):
    def __init__(self, crawler: Crawler, runtime: EchoRuntime) -> None:
        super().__init__(crawler, runtime)
        feed = runtime.config.click_feed
        # Created now, before the scheduler opens, so a JOBDIR resume can restore positions.
        runtime.click_intake.readers = [ClickFeedReader(feed)] if feed is not None else []
        signal_feed = runtime.config.signal_feed
        runtime.signal_intake.readers = (
            [SignalFeedReader(signal_feed)] if signal_feed is not None else []
        )
        self._signal_loop: LoopingCall | None = None
        self._loop: LoopingCall | None = None
        self._status_loop: LoopingCall | None = None
        self._responses_then = (0, 0.0)  # responses counted, and when, at the last status
        # The next batch of a feed's backlog, by feed (IDelayedCall: zope interfaces do not
        # type-check as classes).
        self._reading_on: dict[str, Any] = {}
        self._resolving = False  # a click fit or a solve of the re-solve is on a thread
        self._closed = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        extension = super().from_crawler(crawler)
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        self._read_clicks_on()  # (a failure is logged: the loops start whatever the feed holds)
        self._loop = LoopingCall(self.resolve)
        # The scheduler made the first plan when it opened.
        self._loop.start(self.runtime.config.resolve_interval, now=False)
        self._responses_then = (0, self.runtime.clock())
        self._status_loop = LoopingCall(self.log_status)
        self._status_loop.start(self.runtime.config.log_interval, now=False)
        if self.runtime.signal_intake.readers:
            self._signal_loop = LoopingCall(self._read_signals_on)
            self._signal_loop.start(self.runtime.config.signal_poll_interval, now=True)

    def spider_closed(self) -> None:
        self._closed = True  # (a click fit still on its thread re-solves nothing after)
        for loop in (self._loop, self._status_loop, self._signal_loop):
            if loop is not None and loop.running:
                loop.stop()
        for call in self._reading_on.values():
            if call.active():
                call.cancel()
        self._set_unexpected_stats()

    def _set_unexpected_stats(self) -> None:
        """Library calls that failed in ways not documented (:mod:`scrapy_echo.core.unexpected`)."""
        stats = self.crawler.stats
        if stats is not None:
            for key, count in unexpected_counts().items():
                stats.set_value(f"echo/unexpected/{key}", count)

    def log_status(self) -> dict[str, float]:
        """Log the status line and set its stats; returns its figures."""
        figures = self.status()
        stats = self.crawler.stats
        if stats is not None:
            for key, value in figures.items():
                stats.set_value(f"echo/status/{key}", value)
        self._set_unexpected_stats()
        retired = f", {figures['retired']:.0f} retired" if figures["retired"] else ""
        logger.info(
            "ECHO: %d sources scheduled, %d idle%s; %d new pages waiting; %.2f requests/s of a "
            "budget of %.2f; omega %.3g; %d pages dropped as not worth a crawl",
            figures["scheduled"], figures["idle"], retired, figures["waiting"], figures["rate"],
            figures["budget"], figures["omega"], figures["dropped"],
        )  # fmt: skip
        return figures

    def status(self) -> dict[str, float]:
        runtime, now = self.runtime, self.runtime.clock()
        plan = runtime.policy.plan
        kept = int(plan.kept.sum()) if runtime.holds_state else 0
        sources = len(runtime.state.sources) if runtime.holds_state else 0
        # This worker's responses since the last line (the whole crawl on one machine).
        stats = self.crawler.stats
        responses = int(stats.get_value("response_received_count", 0)) if stats else 0
        before, then = self._responses_then
        self._responses_then = (responses, now)
        rate = (responses - before) / (now - then) if now > then else 0.0
        if runtime.transport is not None and runtime.holds_state:
            rate = runtime.throughput.rate(now) or 0.0  # the planner sees every worker's
        return {
            "scheduled": kept,
            "idle": max(0, sources - kept),
            "waiting": len(runtime.state.frontier),
            "rate": rate,
            "budget": runtime.crawl_rate(),
            "omega": float(plan.omega) if runtime.holds_state else 0.0,
            "dropped": int(getattr(runtime.policy, "dropped_pages", 0)),
            "retired": runtime.state.retired_sources if runtime.holds_state else 0,
        }

    def resolve(self) -> None:
        if not self.runtime.holds_state:
            return  # distributed mode: the planner re-solves, the others read its schedule
        if self._resolving:
            return  # the last round's click fit or solve is still on its thread
        if not self.runtime.may_plan():
            return  # (a planner whose lease is not sure: the next round, once renewed)
        try:
            self.read_click_feeds()
            refit = self.runtime.core.refit_work(self.runtime.clock())
        except Exception:
            self._resolve_failed()
            return
        if refit is None:
            self._replan()
            return
        # The click fit takes seconds at 100 k sources: on the reactor's thread pool, then
        # the re-solve (docs/monitor.rst).

        def fitted(install: Callable[[], None]) -> None:
            install()
            self._replan()

        self._on_thread(refit, "click fit", fitted)

    def _replan(self) -> None:
        """The estimates here; the solve on the thread pool (a limited solve of a few
        sources takes a tenth of a second, one of 100 k seconds: docs/monitor.rst), while the
        reactor keeps the downloads going on the last plan; its install back here."""
        try:
            work = self.runtime.replan_job()
        except Exception:
            self._resolve_failed()
            return

        def solved(install: Callable[[], object]) -> None:
            try:
                install()
            except Exception:
                self._resolve_failed()
                return
            self._set_stats()
            self._read_on_soon("click", self.runtime.click_intake.readers, self._read_clicks_on)

        self._on_thread(work, "re-solve", solved)

    def _on_thread(self, work: Callable[[], T], what: str, then: Callable[[T], None]) -> None:
        """``work`` on the thread pool (the next rounds wait for it), then ``then`` with its
        result back on the reactor, if still wanted (:meth:`_current`)."""
        from twisted.internet.threads import deferToThread  # (no reactor at import time)

        made_for = self._state_now()

        def done(result: T) -> None:
            self._resolving = False
            if self._current(made_for):
                then(result)

        self._resolving = True
        deferToThread(work).addCallbacks(done, self._thread_failed(what))

    def _state_now(self) -> tuple[object, object]:
        return self.runtime.core.state, self.runtime.core.policy

    def _current(self, made_for: tuple[object, object]) -> bool:
        """Whether what a thread made for the state and policy ``made_for`` is still wanted:
        not if the crawl ended, or the planner stepped down, took over another state or is
        no longer sure of its lease (counted: the next round solves again)."""
        if self._closed or not self.runtime.holds_state:
            return False
        state, policy = self._state_now()
        if state is not made_for[0] or policy is not made_for[1]:
            return False
        if not self.runtime.may_plan():
            self.inc_stat("echo/solver/dropped_unsure_lease")
            return False
        return True

    def _thread_failed(self, what: str) -> Callable[[Failure], None]:
        def failed(failure: Failure) -> None:
            self._resolving = False
            logger.error("ECHO %s failed (%s); keeping the previous schedule",
                         what, failure.getTraceback())  # fmt: skip
            self.inc_stat("echo/solver/errors")

        return failed

    def _resolve_failed(self) -> None:
        # A failed round must not stop the loop: the old plan stays in force.
        logger.exception("ECHO re-solve failed; keeping the previous schedule")
        self.inc_stat("echo/solver/errors")

    def read_click_feeds(self) -> int:
        """Fold in the next batch of complete rows of each feed (at most ``batch_lines``:
        :class:`~scrapy_echo.inputs.feed_reader.FeedReader`; only the planner reads them in
        distributed mode); returns how many were good."""
        return self.runtime.click_intake.read_files()

    def _read_clicks_on(self) -> None:
        """A batch of each click feed, then the next one in the next reactor turn while a feed
        has a backlog. A failure is logged and counted, never raised: the loops go on."""
        try:
            self.read_click_feeds()
        except Exception:
            logger.exception("ECHO could not fold in the click feed; trying again next re-solve")
            self.inc_stat("echo/clickfeed/errors")
            return
        self._read_on_soon("click", self.runtime.click_intake.readers, self._read_clicks_on)

    def _read_signals_on(self) -> None:
        """A batch of each signal feed, then the next one in the next reactor turn while a feed
        has a backlog."""
        self.read_signal_feeds()
        self._read_on_soon("signal", self.runtime.signal_intake.readers, self._read_signals_on)

    def _read_on_soon(
        self, feed: str, readers: Sequence[FeedReader[Any]], read: Callable[[], object]
    ) -> None:
        """Call ``read`` in the next reactor turn if a reader stopped at its batch size (once,
        however often asked): a backlog is read a batch a turn, between the crawl's own work
        (and a planner's lease renewals), never all at once."""
        if not any(reader.backlog for reader in readers):
            return
        call = self._reading_on.get(feed)
        if call is not None and call.active():
            return
        # Imported here: importing it at module level would install a reactor of its own.
        from twisted.internet import reactor as installed

        reactor: Any = installed  # zope interfaces do not type-check as classes
        self._reading_on[feed] = reactor.callLater(0, read)

    def read_signal_feeds(self) -> int:
        """Hand on the next batch of complete rows of each signal feed (only the planner reads
        them in distributed mode); returns how many were good. A failure is logged, never
        fatal."""
        if not self.runtime.holds_state:
            return 0
        try:
            return self.runtime.signal_intake.read_files()
        except Exception:
            logger.exception("ECHO could not read the signal feed; trying again next poll")
            self.inc_stat("echo/signalfeed/errors")
            return 0

    def _set_stats(self) -> None:
        stats = self.crawler.stats
        if stats is None:
            return
        state = self.runtime.state
        stats.set_value("echo/sources/count", len(state.sources))
        stats.set_value("echo/sources/retired", state.retired_sources)
        stats.set_value("echo/pages/waiting", len(state.frontier))
        retrying, given_up = state.pages_retrying()
        stats.set_value("echo/pages/retrying", retrying)
        stats.set_value("echo/pages/given_up", given_up)
        stats.set_value("echo/sources/capped", self.runtime.core.sources_capped)
        stats.set_value("echo/clickfeed/pending_rows", state.learner.pending_clicks)
        stats.set_value("echo/clickfeed/dropped_rows", state.learner.dropped_clicks)
