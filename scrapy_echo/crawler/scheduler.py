"""The ECHO scheduler: a source lane, a new-page lane and a plain lane behind one budget.

Every time the engine asks for a request, the policy (:mod:`scrapy_echo.model.decisions.policies`,
the same objects the simulator runs) decides between recrawling a source and fetching a waiting
new page; any other request the spider yields waits in a plain FIFO lane, which gets at most
``ECHO_PLAIN_SHARE`` of the slots while ECHO has work, and every slot when it has none. With
``ECHO_CRAWL_RATE`` set, requests leave no faster than that rate.

The plain lane holds at most ``ECHO_PLAIN_QUEUE_MAX`` of the spider's requests: past that, a
new one is refused (the engine sends ``request_dropped``), counted and logged once. It is
refused before the dupefilter sees it, so it is not remembered: yielded again once the lane has
room (a listing the spider reads again), it gets in. Refused rather than spilled to disk: a
spider that yields faster than its share of the budget serves would grow a spill without end
too, only on disk, and in every checkpoint (which saves the lane); and a full lane, 100,000
by default, is already hours of work at a few requests a second. The redirects and retries
of ECHO's own requests wait in the lane too and are never refused: they finish work under way.

The scheduler never reports itself empty while there are sources: a monitor runs until it is
stopped (or a ``CLOSESPIDER_*`` condition closes it). When nothing may leave now, it wakes the
engine itself at the moment something can, instead of waiting for the engine's 5 s heartbeat.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from scrapy import Request
from scrapy.utils.misc import build_from_crawler, load_object
from twisted.internet.task import LoopingCall

from scrapy_echo.core.crawl import BUSY_TRIES
from scrapy_echo.core.events import SourceAdded
from scrapy_echo.core.pages import Dispatch, NewPage
from scrapy_echo.crawler.busy_slots import BusySlots
from scrapy_echo.crawler.callbacks import (
    check_link_middlewares,
    check_page_callback,
    source_seen,
)
from scrapy_echo.crawler.dupefilter import EchoDupeFilter
from scrapy_echo.crawler.echo_requests import (
    extras_of,
    landed_on_fetched,
    page_request,
    refresh_request,
    source_request,
)
from scrapy_echo.crawler.jobdir import Checkpointer
from scrapy_echo.crawler.politeness import Politeness
from scrapy_echo.crawler.runtime import EchoComponent, EchoRuntime
from scrapy_echo.crawler.settings import read_sources
from scrapy_echo.distributed.wire import RequestRules, decode_request, encode_request
from scrapy_echo.inputs import source_control
from scrapy_echo.inputs.source_control import SOURCES_POLL, SourcesFile

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

# A budget left unused while idle may be spent at once, up to this many seconds of it.
_BURST_SECONDS = 1.0
# Longest nap between wake-ups when nothing is due (new sources or pages may arrive).
_MAX_NAP = 1.0
# Plain requests looked at for one whose download slot is free.
_PLAIN_SCAN = 32


class EchoScheduler(EchoComponent):
    """Scrapy scheduler (``SCHEDULER = "scrapy_echo.scheduler.EchoScheduler"``)."""

    def __init__(self, crawler: Crawler, runtime: EchoRuntime) -> None:
        super().__init__(crawler, runtime)
        self.dupefilter: Any = build_from_crawler(
            load_object(crawler.settings["DUPEFILTER_CLASS"]), crawler
        )
        self.plain: deque[Request] = deque()
        self.checkpointer = Checkpointer.from_crawler(crawler, runtime, self)
        if isinstance(self.dupefilter, EchoDupeFilter):
            self.dupefilter.write_with(self.checkpointer)
        self._plain_full_logged = False
        self.spider: Spider | None = None
        self._source_callback: Any = source_seen
        self.request_rules: RequestRules | None = None  # what a request in Redis may ask
        self._next_slot = -math.inf  # earliest time the budget lets the next request leave
        self.last_dispatched: Dispatch | None = None  # behind the last ECHO request made
        self._plain_served = 0
        self._echo_served = 0
        self._wake_call: Any = None  # IDelayedCall
        self._checkpoint_loop: LoopingCall | None = None
        self._journal_loop: LoopingCall | None = None
        self._sources_loop: LoopingCall | None = None
        self._sources_file: SourcesFile | None = None
        jobdir = crawler.settings.get("JOBDIR")
        self._jobdir = Path(jobdir) if jobdir else None
        self.politeness = Politeness(
            crawler,
            max_crawl_delay=runtime.config.max_crawl_delay,
            max_wait=runtime.config.failure_backoff_max,
        )
        if runtime.config.politeness:
            runtime.politeness = self.politeness
        runtime.refund = self.refund
        self.busy = BusySlots(self.politeness, self.inc_stat)

    # -- BaseScheduler ---------------------------------------------------------------------
    def attach(self, spider: Spider) -> None:
        """Know the spider: its source callback, whose methods stored requests name, and (with
        rules for stored requests: Redis) the hosts of its sources, which they may name."""
        self.spider = spider
        self._source_callback = getattr(spider, "parse_source", None) or source_seen
        if self.request_rules is not None:
            # (Completed only now: the address guard needs the spider's echo_sources.)
            config = self.runtime.config
            self.request_rules = replace(
                self.request_rules,
                refused_meta=config.redis_meta_refuse,
                guard=self.runtime.address_guard,
            )

    def open(self, spider: Spider) -> None:
        self.attach(spider)
        check_page_callback(self.runtime)
        check_link_middlewares(self.runtime)
        restored = self.checkpointer.restore(spider)
        # (After the checkpoint: one set aside as unreadable takes the dupefilter's file along.)
        self.dupefilter.open()
        own = read_sources(getattr(spider, "echo_sources", ()))
        added, removed = self.runtime.core.configure_sources(self.runtime.config.sources + own)
        if restored and (added or removed):
            logger.info("ECHO sources changed while the crawl was down: %d added, %d removed",
                        len(added), len(removed))  # fmt: skip
        if not self.state.sources:
            logger.warning(
                "ECHO has no sources: set ECHO_SOURCES or the spider's echo_sources; "
                "only the spider's own requests will be crawled"
            )
        logger.info(
            "ECHO scheduler: %d sources, policy %s, budget %s%s",
            len(self.state.sources),
            self.runtime.policy.name,
            f"{self.runtime.config.crawl_rate:g} pages/s"
            if self.runtime.config.crawl_rate
            else "the measured throughput",
            ", resumed from JOBDIR" if restored else "",
        )
        config = self.runtime.config
        if config.sources_file is not None:
            self._sources_file = SourcesFile(config.sources_file, config.sources)
        self.poll_sources()  # commands left while the crawl was down
        self.runtime.replan()
        self._sources_loop = LoopingCall(self.poll_sources)
        self._sources_loop.start(SOURCES_POLL, now=False)
        if self.checkpointer.enabled:
            self._checkpoint_loop = LoopingCall(self.checkpointer.save)
            self._checkpoint_loop.start(config.checkpoint_interval, now=False)
        journal = self.checkpointer.journal
        if journal is not None and journal.recording:
            self._journal_loop = LoopingCall(journal.flush)
            self._journal_loop.start(config.journal_interval, now=False)

    def close(self, reason: str) -> None:
        if self._wake_call is not None and self._wake_call.active():
            self._wake_call.cancel()
        for loop in (self._checkpoint_loop, self._journal_loop, self._sources_loop):
            if loop is not None and loop.running:
                loop.stop()
        self.checkpointer.close()
        self.dupefilter.close(reason)

    def has_pending_requests(self) -> bool:
        return bool(self.state.sources) or bool(self.plain) or bool(len(self.state.frontier))

    def __len__(self) -> int:
        return len(self.plain) + len(self.state.frontier)

    def enqueue_request(self, request: Request) -> bool:
        taken = self._enqueue(request)
        if taken:
            self.count_scrapy_stat("enqueued", "memory")
        return taken

    def _enqueue(self, request: Request) -> bool:
        echo = request.meta.get("echo")
        if landed_on_fetched(request, self.state):
            self.inc_stat("echo/pages/duplicate_skipped")
            return False
        if (
            isinstance(echo, dict)
            and echo.get("kind") == "page"
            and request.meta.get("redirect_urls")
        ):
            # A page that redirected: finish it first, like a source's redirect.
            self.plain.appendleft(request)
            self.inc_stat("echo/scheduler/enqueued/page_followup")
            return True
        if isinstance(echo, dict) and echo.get("kind") == "page":
            # (A page's retry: it waits again in the frontier, with what its request carries.)
            extras, _ = extras_of(request)
            self.runtime.core.queue(NewPage.from_meta(echo, request.url, extras))
            self.inc_stat("echo/scheduler/enqueued/page")
            return True
        if isinstance(echo, dict) and echo.get("kind") in ("source", "refresh"):
            # A redirect or retry of a source crawl or a refetch already under way, or a hub's
            # next page (a crawl under way too): finish it first.
            self.plain.appendleft(request)
            self.inc_stat(f"echo/scheduler/enqueued/{echo['kind']}_followup")
            return True
        if request.meta.get("echo_source"):
            # The policy decides when to crawl it; a retired source added again comes back.
            self.runtime.observe(SourceAdded(request.url))
            self.inc_stat("echo/scheduler/enqueued/new_source")
            return True
        if len(self.plain) >= self.runtime.config.plain_queue_max:
            # (Before the dupefilter: a refused request is not remembered as seen.)
            self._refuse_plain(request)
            return False
        if not request.dont_filter and self.dupefilter.request_seen(request):
            self.dupefilter.log(request, self.spider)
            return False
        self.plain.append(request)
        self.inc_stat("echo/scheduler/enqueued/plain")
        return True

    def _refuse_plain(self, request: Request) -> None:
        self.inc_stat("echo/scheduler/plain_refused")
        if not self._plain_full_logged:
            self._plain_full_logged = True
            logger.warning(
                "ECHO plain lane full: %d of the spider's requests wait (ECHO_PLAIN_QUEUE_MAX); "
                "%s and any further one are refused until it has room, counted in "
                "echo/scheduler/plain_refused (logged once)",
                len(self.plain),
                request,
            )

    def next_request(self) -> Request | None:
        request = self._next_request()
        if request is not None:
            self.count_scrapy_stat("dequeued", "memory")
            self.checkpointer.handed(request)  # in flight, for checkpoints to save
        return request

    def _next_request(self) -> Request | None:
        now = self.runtime.clock()
        if now < self._next_slot:
            self._wake_at(self._next_slot - now)
            return None
        self.busy.start_call()
        request = self._pick(now)
        if request is None:
            self._wake_at(min(self._nap(now), self.busy.soonest_free))
            return None
        self.politeness.handed(self.politeness.slot_key(request))
        rate = self.runtime.config.crawl_rate
        if rate is not None:
            self._next_slot = max(self._next_slot, now - _BURST_SECONDS) + 1.0 / rate
        return request

    def poll_sources(self) -> None:
        """Apply what changed in the sources file and the commands left in the JOBDIR
        (:mod:`scrapy_echo.inputs.source_control`)."""
        for event in source_control.poll(self._sources_file, self._jobdir, self.inc_stat):
            self.runtime.observe(event)

    def refund(self) -> None:
        """A request handed over was never sent (robots.txt forbade it): its budget slot
        can go to another request."""
        rate = self.runtime.config.crawl_rate
        if rate is not None:
            self._next_slot -= 1.0 / rate
        self.inc_stat("echo/scheduler/refunded")

    # -- requests as data (JOBDIR and Redis) -------------------------------------------------
    def encode(self, request: Request) -> str:
        """``request`` as JSON data (:mod:`scrapy_echo.distributed.wire`); ``ValueError`` if
        it cannot be stored (a callback that is not a spider method, meta that is not JSON)."""
        assert self.spider is not None
        return encode_request(request, self.spider, self._source_callback, rules=self.request_rules)

    def decode(self, payload: bytes | str) -> Request:
        """The request ``payload`` stores; ``ValueError`` (``InvalidPayload``) if it is not
        one this spider can run."""
        assert self.spider is not None
        return decode_request(payload, self.spider, self._source_callback, rules=self.request_rules)

    # -- lanes -----------------------------------------------------------------------------
    def _pick(self, now: float) -> Request | None:
        request = self._followup()
        if request is None:
            share = self.runtime.config.plain_share
            total = self._plain_served + self._echo_served
            if self.plain and self._plain_served <= share * total:
                plain = self._serve_plain()
                if plain is not None:
                    return plain
            request = self.next_refresh_request(now) or self.next_echo_request(now)
        if request is not None:
            self._echo_served += 1
            self.runtime.lanes.add(now, plain=False)
            return request
        return self._serve_plain() if self.plain else None

    def _followup(self) -> Request | None:
        """A redirect or retry of ECHO's own request under way (see _enqueue), if its slot is
        free: finished first, whatever the plain lane's share."""
        head = self.plain[0] if self.plain else None
        if head is None or not isinstance(head.meta.get("echo"), dict):
            return None
        if not self._slot_free(self.politeness.slot_key(head)):
            return None
        self.inc_stat("echo/scheduler/dequeued/followup")
        return self.plain.popleft()

    def next_refresh_request(
        self, now: float, *, count: bool = True, polite: bool = True
    ) -> Request | None:
        """A fetched page due for a refetch by the refresh lane (``count`` and ``polite`` as
        for :meth:`next_echo_request`)."""
        core = self.runtime.core
        page = core.next_refresh(now)
        if page is None:
            return None
        tracked = self.state.refresh.pages[page]
        source_url = self.state.sources[tracked.source].url
        request = refresh_request(tracked, source_url, self.runtime.page_callback())
        if polite and self.runtime.config.politeness:
            key = self.politeness.slot_key(request)
            if not self._slot_free(key):
                core.refresh_put_back(page, now + self.politeness.wait(key))
                self.inc_stat("echo/scheduler/refresh_put_back")
                return None
        if count:
            self.inc_stat("echo/scheduler/dequeued/refresh")
        return request

    def _serve_plain(self) -> Request | None:
        """The first plain request (of the first few) whose download slot is free."""
        for position, request in enumerate(self.plain):
            if position == _PLAIN_SCAN:
                return None
            if self._slot_free(self.politeness.slot_key(request)):
                del self.plain[position]
                break
        else:
            return None
        self._plain_served += 1
        self.runtime.lanes.add(self.runtime.clock(), plain=True)
        self.inc_stat("echo/scheduler/dequeued/plain")
        return request

    def _slot_free(self, key: str) -> bool:
        return not self.runtime.config.politeness or self.busy.free(key)

    def next_echo_request(
        self, now: float, *, count: bool = True, polite: bool = True
    ) -> Request | None:
        """The policy's choice as a request (``count``: as a request leaving this worker).

        ``polite``: only a request whose download slot is free
        (:mod:`scrapy_echo.crawler.politeness`); the core dispatches among the sources whose
        slot is free, and a dispatch that lands on a busy slot anyway (a page on another host
        than its source) is put back."""
        self.last_dispatched = None
        polite = polite and self.runtime.config.politeness
        if polite:
            blocked = self.busy.of_sources(self.state.sources)
        else:
            blocked = self.busy.blocked = None
        core = self.runtime.core
        skipped = core.duplicates_skipped
        try:
            for _ in range(BUSY_TRIES):
                dispatched = core.dispatch(now, blocked)
                if dispatched is None:
                    return None
                request = self._request_for(dispatched)
                if polite and not self._slot_free(self.politeness.slot_key(request)):
                    core.put_back(dispatched)
                    blocked = self.busy.set_aside(dispatched.source, len(self.state.sources))
                    continue
                if count:
                    self.inc_stat(f"echo/scheduler/dequeued/{dispatched.kind}")
                self.last_dispatched = dispatched
                return request
            return None
        finally:
            if core.duplicates_skipped > skipped:
                self.inc_stat("echo/pages/duplicate_skipped", core.duplicates_skipped - skipped)

    @property
    def source_callback(self) -> Any:
        """The callback of a source crawl's request: the spider's ``parse_source``, if any."""
        return self._source_callback

    def put_back_last(self) -> None:
        """Undo the dispatch behind the last request :meth:`next_echo_request` returned, when
        it does not leave after all: its page waits again, its source is as due as it was."""
        if self.last_dispatched is not None:
            self.runtime.core.put_back(self.last_dispatched)
            self.last_dispatched = None

    def _request_for(self, dispatched: Dispatch) -> Request:
        if dispatched.page is not None:
            page: NewPage = dispatched.page.page  # type: ignore[assignment]
            return page_request(page, self.runtime.page_callback())
        source = dispatched.source
        return source_request(self.state.sources[source], source, self._source_callback)

    def _nap(self, now: float) -> float:
        """Seconds until a source is due under the current plan (at most ``_MAX_NAP``);
        sources on busy download slots wait for their slot (``busy.soonest_free``) instead."""
        plan = self.runtime.policy.plan
        last = self.state.last_crawl
        if len(plan) != last.size or not last.size:
            return _MAX_NAP
        due_at = last + plan.intervals
        blocked = self.busy.blocked
        if blocked is not None:
            due_at[blocked[: due_at.size]] = math.inf
        with np.errstate(invalid="ignore"):
            soonest = float(np.nanmin(due_at, initial=math.inf))  # (never-crawled: NaN)
        due = min(_MAX_NAP, max(0.0, soonest - now))
        return due if math.isfinite(due) else _MAX_NAP

    def wake_in(self, delay: float) -> None:
        """Have the engine ask for a request again in ``delay`` s (or sooner)."""
        self._wake_at(delay)

    def _wake_at(self, delay: float) -> None:
        # Imported here: importing it at module level would install a reactor of its own.
        from twisted.internet import reactor as installed

        reactor: Any = installed  # zope interfaces do not type-check as classes
        delay = max(delay, 0.001)
        call = self._wake_call
        if call is not None and call.active():
            if call.getTime() <= reactor.seconds() + delay:
                return
            call.cancel()
        self._wake_call = reactor.callLater(delay, self._wake)

    def _wake(self) -> None:
        self._wake_call = None
        self.runtime.wake_engine()
