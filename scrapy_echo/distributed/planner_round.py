"""The planner's part of a worker's round trip.

On the Redis thread, right after the worker's own exchange: take the planner lease if it is
free (and load the saved state), or, holding it, renew it and read the observations since.
On the reactor: apply them, choose what to queue, and decide whether to save. Then, on the
Redis thread again, the writes, fenced by the lease: queue the chosen requests, save the
state, encoded first on a thread of its own. (:mod:`.planner` holds the state and the
choices; this module only moves them.)
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Any, Protocol

import redis
from twisted.internet.threads import deferToThread

from scrapy_echo.distributed.planner import EVENTS_PER_ROUND, Planner

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred

    from scrapy_echo.core import snapshot as snapshots
    from scrapy_echo.crawler.runtime import EchoRuntime
    from scrapy_echo.distributed.fleet_politeness import FleetPoliteness
    from scrapy_echo.distributed.iothread import RedisThread
    from scrapy_echo.distributed.store import RedisStore
    from scrapy_echo.distributed.store_messages import Pushed, PushedApplied


logger = logging.getLogger(__name__)

_DELAYS_EVERY = 5.0  # s between reads of the slots' delays the workers reported


class RoundHost(Protocol):
    """What the planner's round needs of the worker's scheduler that holds it."""

    planner: Planner
    store: RedisStore
    token: str
    io: RedisThread
    runtime: EchoRuntime
    fleet: FleetPoliteness

    def clock(self) -> float: ...

    def inc_stat(self, key: str, count: int = 1) -> None: ...

    def count_rejected(self, kind: str, count: int = 1, *, message: str = "") -> None: ...


class PlannerRound:
    def __init__(self, host: RoundHost) -> None:
        self.host = host
        self._saving = False  # a save under way (encoding or uploading): none begins
        self._delays_read = -math.inf

    def trip(self, now: float, solves: list[str]) -> Any:
        """On the Redis thread, after the worker's exchange: take the lease if it is free,
        else (holding it) renew it and read what came since."""
        planner = self.host.planner
        if not planner.active and planner.try_acquire(now):
            try:
                return "took_over", self.host.store.load_blocks()
            except redis.RedisError:
                planner.term = 0  # not planning without the state; the lease runs out
                raise
        if planner.active and planner.loading:  # (no events until the state is rebuilt)
            return "renewed", self.host.store.renew_solver(
                self.host.token, planner.term, planner.lease_ms()
            )
        if planner.active:
            polled = self.host.store.poll(
                self.host.token,
                planner.term,
                planner.lease_ms(),
                planner.last_event,
                EVENTS_PER_ROUND,
                solves,
                pushed=planner.pushed,
            )
            delays = None
            if now - self._delays_read >= _DELAYS_EVERY:
                self._delays_read = now
                delays = self.host.store.reported_delays()
            # Every round: a host another worker heard say Retry-After must not have its
            # requests fill the queue (they would stay unleased, and nothing else queued).
            holds = self.host.store.fleet_holds()
            return "poll", (polled, delays, holds)
        return None

    def handle(self, what: str, detail: Any) -> Deferred[None] | None:
        """On the reactor: what :meth:`trip` brought back; the writes it calls for go to the
        Redis thread."""
        host = self.host
        planner, now = host.planner, host.clock()
        if what == "error":
            host.inc_stat("echo/redis/errors")
            if planner.active and now - planner.renewed_at > host.runtime.config.redis_solver_lease:
                planner.step_down(f"Redis unreachable for longer than the lease ({detail})")
            return None
        if what == "took_over":
            # Rebuilt on a thread: the reactor never waits on a large state, and the round
            # trips renew the lease meanwhile.
            loading = deferToThread(planner.load, detail, planner.begin_loading())
            loading.addCallback(planner.take_over)
            loading.addErrback(self._load_failed)
            host.inc_stat("echo/redis/planner_terms")
            return None
        if what == "renewed":
            if not detail:
                planner.step_down("its lease expired while it loaded the saved state")
            elif detail != planner.term:
                planner.regained(detail)
                host.inc_stat("echo/redis/planner_regained")
            return None
        (held, events, sources, depth, signals, pushes), delays, holds = detail
        if delays is not None:
            host.fleet.update(delays)
        host.fleet.update_holds(holds)
        if not held:
            planner.step_down("its lease expired (the worker stalled)")
            return None
        if held != planner.term:
            planner.regained(held)
            host.inc_stat("echo/redis/planner_regained")
        elif pushes < planner.pushes_seen:
            planner.went_back(pushes)
            host.inc_stat("echo/redis/went_back")
        planner.pushes_seen = pushes
        planner.renewed_at = now
        planner.apply(events, sources, now)
        planner.take_signals(signals)
        # The state is captured before choosing: the pages chosen now stay in its frontier,
        # so whether or not their queueing goes through, the saved state loses none (queued
        # twice, they are queued once).
        if planner.snapshot_due(now) and not self._saving:
            self._save(*planner.snapshot(now))
        chosen = planner.choose(depth, now)
        if not chosen:
            return None
        pushed: Deferred[Pushed] = host.io.run(host.store.push_checked, host.token, chosen)
        return pushed.addCallbacks(self._pushed, self._push_failed)

    def _save(self, captured: snapshots.Captured, event_id: str, pushed: PushedApplied) -> None:
        """Encode the captured state on a thread of its own (seconds for millions of links:
        the worker's round trips go on meanwhile), then upload it on the Redis thread."""
        host, started = self.host, time.monotonic()
        self._saving = True

        def upload(data: list[bytes]) -> Deferred[bool]:
            if captured.skipped:
                host.count_rejected("unencodable", captured.skipped)
            return host.io.run(host.store.save_snapshot, host.token, data, event_id, pushed)

        def saved(held: bool) -> None:
            host.planner.save_seconds = time.monotonic() - started
            # (Not held: its next renewal steps down or takes the lease back; see _pushed.)

        def failed(failure: Any) -> None:
            # The state is still in memory: the next save tries again.
            host.inc_stat("echo/redis/errors")
            logger.warning("ECHO could not save the planner's state: %s", failure.getErrorMessage())

        def over(_: object) -> None:
            self._saving = False

        encoded: Deferred[list[bytes]] = deferToThread(captured.to_blocks)
        encoded.addCallback(upload).addCallbacks(saved, failed).addBoth(over)

    def _load_failed(self, failure: Any) -> None:
        # A bug in taking over (rebuilding the state, the first re-solve): not planning
        # without it; the lease goes back at once, for another worker to try.
        logger.error("ECHO could not take over as planner: %s", failure.getTraceback())
        self.host.inc_stat("echo/redis/planner_take_over_failed")
        self.host.planner.give_up_lease("it could not take over")

    def _pushed(self, result: Pushed) -> None:
        added, dead, pushes = result
        self.host.planner.pushes_seen = max(self.host.planner.pushes_seen, pushes)
        if added < 0:
            # Another worker holds the lease: it took over, or Redis lost its data and it
            # took the empty lease before this planner's next renewal. That renewal tells
            # the two apart (RENEW_SOLVER): it steps down, or takes the lease back with the
            # only copy of the state. Stepping down here would lose that copy. The pages just
            # refused are in queued_pages, queued again if it takes the lease back.
            self.host.inc_stat("echo/redis/refused_not_holder")
        elif dead:
            self.host.planner.set_aside(dead, self.host.clock())

    def _push_failed(self, failure: Any) -> None:
        # The pages just chosen left the in-memory frontier but may not be queued: drop this
        # state. The next planner (maybe this worker again) reloads the last saved state and
        # replays the events since, which finds them again.
        self.host.inc_stat("echo/redis/errors")
        self.host.planner.step_down(f"queueing failed ({failure.getErrorMessage()})")
