"""The distributed ECHO scheduler: every worker runs ``scrapy crawl NAME`` against one Redis.

On with ``REDIS_URL`` (the add-on picks this scheduler; ``REDIS_PARAMS`` as in scrapy-redis).
Each worker, every ``ECHO_REDIS_POLL_INTERVAL``, makes one round trip on its Redis thread:

- sends the events its middlewares observed (:mod:`scrapy_echo.core.events`, numbered so
  that one sent twice is applied once: :mod:`.dedup`), the acks of requests it finished, lease
  renewals of those still in its hands (waiting in its buffer or under way: :mod:`.leases`),
  and the spider's own requests (the plain lane, deduplicated in Redis with expiry);
- leases up to ``ECHO_REDIS_PREFETCH`` requests, within the global ``ECHO_CRAWL_RATE`` (a
  token bucket in Redis shared by all workers). A lease is not a delete: an expired lease
  returns the request to the queue, so a killed worker loses nothing, and a slow one keeps
  its requests as long as it renews them.

``next_request`` only reads the local buffer, so the reactor never waits on Redis. If Redis is
unreachable, nothing is dropped: events and acks wait in memory and the round trips back off
(doubling up to 10 s) until it answers. One worker at a time is also the planner
(:mod:`.planner`).
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import socket
import time
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

import redis
from scrapy.utils.defer import deferred_from_coro
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import LoopingCall

from scrapy_echo.core.events import Event, SourceAdded, SourceFetched, to_json
from scrapy_echo.crawler.busy_slots import BusySlots
from scrapy_echo.crawler.callbacks import check_link_middlewares, check_page_callback
from scrapy_echo.crawler.echo_requests import landed_on_fetched, source_request
from scrapy_echo.crawler.runtime import EchoComponent
from scrapy_echo.crawler.scheduler import EchoScheduler
from scrapy_echo.crawler.settings import read_sources
from scrapy_echo.distributed import preflight
from scrapy_echo.distributed.clock import FleetClock
from scrapy_echo.distributed.connection import redis_client
from scrapy_echo.distributed.dedup import stamp
from scrapy_echo.distributed.fleet_politeness import FleetPoliteness, changed_delays
from scrapy_echo.distributed.iothread import RedisThread
from scrapy_echo.distributed.leases import HeldLeases
from scrapy_echo.distributed.planner import Planner
from scrapy_echo.distributed.planner_round import PlannerRound
from scrapy_echo.distributed.store import RedisStore, key_base
from scrapy_echo.distributed.store_messages import Exchange, FleetRules, Reply
from scrapy_echo.distributed.wire import RequestRules
from scrapy_echo.inputs import source_control
from scrapy_echo.inputs.source_control import SOURCES_POLL, SourcesFile

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from scrapy_echo.core import snapshot as snapshots
    from scrapy_echo.crawler.runtime import EchoRuntime
    from scrapy_echo.distributed.store_messages import PushedApplied

logger = logging.getLogger(__name__)

_MAX_BACKOFF = 10.0
# A request in hand for this many lease timeouts without being reported done is let go.
_FORGOTTEN_AFTER = 10


class DistributedScheduler(EchoComponent):
    def __init__(self, crawler: Crawler, runtime: EchoRuntime) -> None:
        super().__init__(crawler, runtime)
        # The one-machine scheduler turns the policy's choices into requests and stores
        # requests as data; the planner uses it for both (composition: its lanes and loops
        # stay unused here, the shared queue in Redis is this worker's lane).
        self.local = EchoScheduler(crawler, runtime)
        self.local.request_rules = RequestRules.allowing(runtime.config.redis_meta_allow)
        # This worker's downloader keeps the politeness of the slots leased to it (and
        # reports their delays); the planner queues by the fleet's turns per slot.
        config = runtime.config
        self.downloads = self.local.politeness
        self.fleet = FleetPoliteness(crawler, ahead=config.redis_queue_ahead,
                                     max_crawl_delay=config.max_crawl_delay)  # fmt: skip
        # The downloader's politeness hears what hosts say back; the fleet's holds by it.
        self.fleet.pushback = self.downloads.pushback
        self.local.politeness = self.fleet
        self.local.busy = BusySlots(self.fleet, self.local.inc_stat)
        if config.politeness:
            runtime.politeness = self.fleet
        self._sent_delays: dict[str, float] = {}
        self.client = redis_client(crawler.settings)
        self.store: RedisStore = None  # type: ignore[assignment]  # set in open()
        self.io = RedisThread()
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.planner = Planner(self)
        self.planner_round = PlannerRound(self)
        self.held = HeldLeases(self.inc_stat)
        self.followups: deque[Request] = deque()  # redirects and retries of leased requests
        self.outbox = Exchange()
        self._event_seq = 0
        self._round_call: Any = None  # IDelayedCall of the next round trip
        self._closing = False
        self._renewed_at = 0.0
        self._down_since: float | None = None
        self._pause_until = 0.0
        self._backoff = 0.0
        self._logged_kinds: set[str] = set()
        self._sources_file: SourcesFile | None = None
        self._sources_loop: LoopingCall | None = None
        self._checked = False  # Redis and the crawl's keys checked (preflight), once
        self._refused = False
        self._hurried = False  # a source crawl's links wait to be sent: no poll delay
        # Everything this worker observes is dated by Redis's clock (see .clock).
        self.clock = FleetClock()
        runtime.clock = self.clock
        runtime.transport = self._send_event
        runtime.on_done = self._done
        runtime.holds_state = False
        runtime.may_plan = self.planner.lease_sure
        runtime.refund = self.refund  # (the fleet's budget, not the embedded scheduler's)

    # -- BaseScheduler ---------------------------------------------------------------------
    @property
    def spider(self) -> Spider | None:
        return self.local.spider

    def encode(self, request: Request) -> str:
        return self.local.encode(request)

    def decode(self, payload: bytes | str) -> Request:
        return self.local.decode(payload)

    def next_echo_request(self, now: float, *, count: bool = True) -> Request | None:
        # Polite by the fleet's turns per slot (FleetPoliteness), not this downloader's.
        return self.local.next_echo_request(now, count=count)

    def next_refresh_request(self, now: float) -> Request | None:
        return self.local.next_refresh_request(now, count=False)

    def set_aside_state(self) -> str:
        """Move the saved state (unreadable) aside in Redis, kept for its owner to look at;
        the key it goes to. (Queued on the Redis thread before any save of a fresh state.)"""
        aside = f"{self.store.keys['state']}:unreadable:{int(time.time() * 1000)}"
        failed = self.io.run(self.store.set_aside_state, self.token, aside)
        failed.addErrback(lambda f: logger.error("ECHO could not set the unreadable state "
                                                 "aside: %s", f.getErrorMessage()))  # fmt: skip
        return aside

    def release_lease(self) -> None:
        released = self.io.run(self.store.release_solver, self.token)
        released.addErrback(lambda f: logger.warning("ECHO could not release the planner "
                                                     "lease: %s", f.getErrorMessage()))  # fmt: skip

    def queued_slot(self, request: Request) -> str:
        """The download slot of ``request``, queued by the planner now: it takes the slot's
        next turn."""
        key = self.fleet.slot_key(request)
        self.fleet.handed(key)
        return key

    def open(self, spider: Spider) -> None:
        self.local.attach(spider)
        check_page_callback(self.runtime)
        check_link_middlewares(self.runtime)
        self.store = RedisStore(
            self.client, key_base(self.runtime.config.redis_key_prefix, spider.name)
        )
        self.io.start()
        config = self.runtime.config
        for url in config.sources + read_sources(getattr(spider, "echo_sources", ())):
            self._send_event(SourceAdded(url, configured=True))
        if config.sources_file is not None:
            # Every worker watches the file: the planner applies an addition or removal once
            # however many send it.
            self._sources_file = SourcesFile(config.sources_file, config.sources)
            self._sources_loop = LoopingCall(self._poll_sources)
            self._sources_loop.start(SOURCES_POLL, now=False)
        logger.info(
            "ECHO distributed worker %s on %s, budget %s for all workers",
            self.token,
            self.store.prefix,
            f"{self.runtime.config.crawl_rate:g} pages/s"
            if self.runtime.config.crawl_rate
            else "unlimited",
        )
        self._next_round()

    def _poll_sources(self) -> None:
        for event in source_control.poll(self._sources_file, None, self.inc_stat):
            self._send_event(event)

    def close(self, reason: str) -> Deferred[None]:
        self._closing = True
        if self._sources_loop is not None and self._sources_loop.running:
            self._sources_loop.stop()
        if self._round_call is not None and self._round_call.active():
            self._round_call.cancel()
        # One last round trip: events and acks out. Requests still buffered are not acked,
        # so their leases expire and they return to the queue for the others.
        self.outbox.want = 0
        if self._refused:
            self.io.stop()
            return succeed(None)
        planner = self.planner
        # Captured here, on the reactor, and only a state this worker holds: a planner still
        # loading its predecessor's state would save an empty one over it.
        held = planner.active and not planner.loading and self.runtime.holds_state
        snapshot = planner.snapshot(self.clock()) if held else None
        done: Deferred[Any] = self.io.run(self._final_round, snapshot)
        done.addErrback(lambda failure: logger.warning(
            "ECHO could not reach Redis at close (%s); unsent events are lost, leased "
            "requests return to the queue when their leases expire", failure.value))  # fmt: skip
        done.addBoth(lambda _: self.io.stop())
        return done

    def _final_round(self, snapshot: tuple[snapshots.Captured, str, PushedApplied] | None) -> None:
        self.store.exchange(self.outbox, **self._exchange_options())
        if snapshot is not None:
            captured, event_id, pushed = snapshot
            self.store.save_snapshot(self.token, captured.to_blocks(), event_id, pushed)
        if self.planner.active:
            self.store.release_solver(self.token)

    def has_pending_requests(self) -> bool:
        return True  # the queue is shared and sources are recrawled: a monitor runs on

    def __len__(self) -> int:
        return len(self.held) + len(self.followups)

    def enqueue_request(self, request: Request) -> bool:
        taken = self._enqueue(request)
        if taken:
            self.count_scrapy_stat("enqueued", "redis")
        return taken

    def _enqueue(self, request: Request) -> bool:
        echo = request.meta.get("echo")
        if isinstance(echo, dict) or "echo_lease" in request.meta:
            # A redirect or retry of a leased request: finish it here, under the same lease;
            # but a page that redirected to one fetched under another URL is that page,
            # fetched already (known where the state is; elsewhere its report's aliases tell
            # the planner it is one page).
            if self.runtime.holds_state and landed_on_fetched(request, self.state):
                self.inc_stat("echo/pages/duplicate_skipped")
                self._done(request)
                return False
            self.followups.append(request)
            return True
        if request.meta.get("echo_source"):
            self._send_event(SourceAdded(request.url))
            self.inc_stat("echo/scheduler/enqueued/new_source")
            return True
        if request.dont_filter:
            rid = f"u:{uuid.uuid4().hex}"
        else:
            fingerprinter: Any = self.crawler.request_fingerprinter
            rid = f"r:{fingerprinter.fingerprint(request).hex()}"
        try:
            payload = self.encode(request)
        except ValueError as exc:
            self.count_rejected("unencodable", message=str(exc))
            return False
        slot = self.downloads.slot_key(request)
        self.outbox.plain.append((rid, time.time() * 1000, payload, slot))
        self.inc_stat("echo/scheduler/enqueued/plain")
        return True

    def next_request(self) -> Request | None:
        request = self._next_request()
        if request is not None:
            self.count_scrapy_stat("dequeued", "redis")
        return request

    def _next_request(self) -> Request | None:
        # As on one machine, the downloader is handed only requests whose host is not
        # holding the crawl off (Retry-After): one handed during a hold would wait in its
        # download slot, taking a CONCURRENT_REQUESTS place, past its lease, and keep the
        # worker from stopping until the hold ends.
        now, wall = time.monotonic(), time.time()
        longest = self.runtime.config.redis_lease_timeout
        request, soonest = self._ready_followup(now, wall, longest)
        if request is not None:
            return request
        request, buffered = self.held.next(wall, lambda r: self._hold_wait(r, now), longest)
        if request is None:
            soonest = min(soonest, buffered)
            if math.isfinite(soonest):
                self.local.wake_in(soonest)
            return None
        echo = request.meta.get("echo")
        kind = echo.get("kind") if isinstance(echo, dict) else "plain"
        self.inc_stat(f"echo/scheduler/dequeued/{kind}")
        return request

    def _hold_wait(self, request: Request, now: float) -> float:
        """Seconds ``request``'s host asked this worker to leave it alone for (0: none)."""
        downloads = self.downloads
        return downloads.pushback.wait(downloads.slot_key(request), now)

    def _ready_followup(
        self, now: float, wall: float, longest: float
    ) -> tuple[Request | None, float]:
        """The first redirect or retry whose host may be sent it now, and the soonest wait
        of the others; one whose host holds off longer than ``longest`` is given back."""
        soonest = math.inf
        for request in list(self.followups):
            wait = self._hold_wait(request, now)
            if wait <= 0:
                self.followups.remove(request)
                return request, soonest
            if wait > longest and self.held.give_back(request):
                self.followups.remove(request)
                continue
            self.held.still_waiting(request, wall)
            soonest = min(soonest, wait)
        return None, soonest

    def count_rejected(self, kind: str, count: int = 1, *, message: str = "") -> None:
        """Count something refused (a bad payload, event or source); log each kind once."""
        self.inc_stat("echo/redis/rejected", count)
        self.inc_stat(f"echo/redis/rejected/{kind}", count)
        if kind not in self._logged_kinds:
            self._logged_kinds.add(kind)
            logger.warning("ECHO refused %s from Redis (%s); more are only counted", kind,
                           message or "see stats")  # fmt: skip

    # -- what the middlewares report -------------------------------------------------------
    def _send_event(self, event: Event) -> None:
        self._event_seq += 1
        data = stamp(to_json(event), self.token, self._event_seq)
        self.outbox.events.append(json.dumps(data, separators=(",", ":"), allow_nan=False))
        if isinstance(event, SourceFetched):
            self._hurry()

    def _hurry(self) -> None:
        """The next round trip now: the links a source crawl found live only in this
        process until sent (its request is acked with them, so a worker killed before is
        crawled again once its lease expires, but a hub may have moved on by then)."""
        self._hurried = True
        if self._round_call is not None and self._round_call.active():
            self._round_call.reset(max(0.0, self._pause_until - time.time()))

    def _done(self, request: Request) -> None:
        member = self.held.finish(request)
        if member is not None:
            self.outbox.acks.append(member)

    # -- the round trip --------------------------------------------------------------------
    def _exchange_options(self) -> dict[str, Any]:
        config = self.runtime.config
        rate = config.crawl_rate or 0.0
        return {
            "lease_ms": int(config.redis_lease_timeout * 1000),
            "rate": rate,
            "burst": max(1.0, rate * config.redis_poll_interval * 2),
            "plain_share": config.plain_share,
            "done_ttl_ms": int(config.redis_dupefilter_ttl * 1000),
            "max_attempts": config.redis_max_attempts,
            "fleet": self._fleet_rules if config.politeness else None,
        }

    def next_page_request(self, source: int, url: str, page: int) -> Request:
        """The request for page ``page`` (at ``url``) of a crawl of ``source`` that reads on,
        as the spider middleware makes it where the state is."""
        status = self.runtime.state.sources[source]
        request = source_request(status, source, self.local.source_callback)
        echo = {**request.meta["echo"], "hub_page": page}
        return request.replace(url=url, headers={}, meta={"echo": echo})

    def put_back_last(self) -> None:
        """Undo the dispatch behind the last request the policy made (see Planner.choose)."""
        self.local.put_back_last()

    def refund(self) -> None:
        """A leased request was never sent (robots.txt forbade it): its token goes back to
        the fleet's budget with the next round trip."""
        self.outbox.refunds += 1
        self.inc_stat("echo/scheduler/refunded")

    def slot_held(self, slot: str) -> bool:
        """Whether ``slot``'s host asked this worker or another to be left alone."""
        return self.fleet.held(slot)

    @property
    def _fleet_rules(self) -> FleetRules:
        # A slot's request is leased up to three poll intervals before its turn: the worker
        # holds it until then (its downloader keeps the delay), and asks again sooner.
        horizon = max(0.05, 3 * self.runtime.config.redis_poll_interval)
        return FleetRules(self.token, round(self.downloads.delay * 1000), round(horizon * 1000))

    def _next_round(self, _: object = None) -> None:
        """Schedule the next round trip, after a jittered poll interval: workers started
        together would otherwise poll in lockstep, and the one whose turn always comes just
        after the budget's next token would take every token."""
        if self._closing:
            return
        from twisted.internet import reactor as installed  # see scheduler._wake_at

        reactor: Any = installed
        delay = self.runtime.config.redis_poll_interval * random.uniform(0.5, 1.5)
        if self._hurried:  # (something to send came while the last round trip ran)
            delay = 0.0
        delay = max(delay, self._pause_until - time.time())
        self._round_call = reactor.callLater(delay, self._round)

    def _round(self) -> None:
        if self._closing:
            return
        self._hurried = False
        now = time.time()
        self.inc_stat("echo/redis/rounds")
        batch, self.outbox = self.outbox, Exchange()
        batch.want = max(0, self.runtime.config.redis_prefetch - len(self.held))
        if self.runtime.config.politeness:
            now_delays = self.downloads.current_delays()
            changed = changed_delays(now_delays, self._sent_delays, self.downloads.delay)
            batch.delays.update(changed)
            self._sent_delays.update(changed)  # (a failed round sends them again)
        # A host's Retry-After holds the fleet, not only this worker (and, through it, the
        # leases of that host's requests).
        batch.holds.update(self.downloads.pushback.new_holds(time.monotonic()))
        lease = self.runtime.config.redis_lease_timeout
        if now - self._renewed_at > lease / 3:
            self._renewed_at = now
            self.held.let_go(now - _FORGOTTEN_AFTER * lease)
            batch.renew = self.held.members()
        solves = self.planner.new_solves(now)
        work: Deferred[Any] = self.io.run(self._trip, batch, now, solves)
        # _failed handles a failed round trip only: a bug in handling its reply must not look
        # like one (the batch would be sent twice).
        work.addCallbacks(self._received, self._failed, (batch,), errbackArgs=(batch,))
        work.addErrback(self._bug)
        work.addBoth(self._next_round)

    def _bug(self, failure: Any) -> None:
        # A bug here must not end the round trips: the crawl would stall silently.
        logger.error("ECHO round trip failed: %s", failure.getTraceback())
        self.inc_stat("echo/redis/round_errors")

    def _trip(self, batch: Exchange, now: float, solves: list[str]) -> tuple[Reply, Any]:
        """On the Redis thread: the worker's exchange, then the planner's part."""
        if not self._checked:
            who = preflight.crawl_of(self.crawler.settings, self.spider)
            verdict = preflight.check(self.store, who, time.time() * 1000)
            self._checked = True
            if verdict.refused or verdict.warnings or verdict.notes:
                return Reply(), ("preflight", verdict)
        sent = time.time()
        reply = self.store.exchange(batch, **self._exchange_options())
        if reply.server is not None:
            self.clock.sample(sent, reply.server, time.time())
        try:
            return reply, self.planner_round.trip(now, solves)
        except redis.RedisError as exc:
            # The worker's part went through; the planner's is retried next round.
            return reply, ("error", exc)

    def _received(self, result: tuple[Reply, Any], batch: Exchange) -> Deferred[None] | None:
        reply, planner_part = result
        if planner_part is not None and planner_part[0] == "preflight":
            self._preflight(planner_part[1], batch)
            return None
        if self._down_since is not None:
            logger.warning("ECHO: Redis is back after %.0f s", time.time() - self._down_since)
            self._down_since = None
        self._backoff = 0.0
        self._took(reply)
        if planner_part is None:
            return None
        return self.planner_round.handle(*planner_part)

    def _preflight(self, verdict: preflight.Verdict, batch: Exchange) -> None:
        verdict.log()
        if verdict.refused:
            self.inc_stat("echo/redis/refused")
            self._closing = self._refused = True  # (close sends nothing to these keys)
            closing = self.crawler.engine.close_spider_async(reason="echo_redis_refused")
            deferred_from_coro(closing).addErrback(self._bug)
            return
        self.outbox.put_back(batch)  # this round only checked: its batch goes out next round

    def _took(self, reply: Reply) -> None:
        """The worker's part of a round trip's answer."""
        for member, exc in self.held.take(reply, self.decode, self.store.keys["dead"]):
            self.count_rejected(exc.kind, message=str(exc))
            self.outbox.acks.append(member)  # removes it from Redis
            self.outbox.rejected.append(exc.kind)
        if reply.leased:
            self.inc_stat("echo/redis/leased", len(reply.leased))
            self.runtime.wake_engine()
        if reply.errors:
            # Committed but for these commands: what they carried goes again, nothing else.
            self.outbox.put_back(reply.unsent)
            self._renewed_at = 0.0
            self.inc_stat("echo/redis/command_errors", len(reply.errors))
            if "command_errors" not in self._logged_kinds:
                self._logged_kinds.add("command_errors")
                logger.warning("ECHO: commands failed in Redis (%s); more are only counted",
                               "; ".join(reply.errors))  # fmt: skip

    def _failed(self, failure: Any, batch: Exchange) -> None:
        # Nothing of the batch is lost: it goes back in front of what came since.
        self.outbox.put_back(batch)
        now = time.time()
        self._backoff = min(_MAX_BACKOFF, max(0.5, self._backoff * 2))
        self._pause_until = now + self._backoff
        self.inc_stat("echo/redis/errors")
        self._renewed_at = 0.0  # renew the leases in hand at the first chance
        if self._down_since is None:
            self._down_since = now
            logger.warning("ECHO: Redis unreachable (%s); retrying with back-off",
                           failure.getErrorMessage())  # fmt: skip
        planner = self.planner
        if planner.active and now - planner.renewed_at > self.runtime.config.redis_solver_lease:
            planner.step_down("Redis unreachable for longer than the lease")
