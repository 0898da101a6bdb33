"""The planner: the one worker at a time that holds the crawl state and runs the policy.

Every worker sends what it observes to the ``events`` stream. The worker holding the solver
lease (a key with an expiry, renewed every round) applies those events to the state, with the
same :class:`~scrapy_echo.core.crawl.CrawlCore` and policy as a single machine, re-solves
the intervals (the extension asks it, as on one machine), and keeps a couple of seconds of
chosen requests in the shared queue. Every ``ECHO_REDIS_SNAPSHOT_INTERVAL`` it saves the state
and the id of the last event in it, and trims the stream up to there; the sources and signals
users pushed that the state applied leave Redis with the same save, not before.

If it dies, its lease runs out, another worker takes it, loads the snapshot and replays the
events after it, and the pushed sources and signals still in Redis: nothing observed or
pushed is lost, and requests chosen twice are queued once (the queue skips a request id
already queued, leased or done). Every write of the planner is fenced by its token, so a
planner that lost its lease (a long pause) cannot overwrite its successor's work.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from scrapy_echo.core import snapshot as snapshots
from scrapy_echo.core.events import (
    Event,
    InvalidEvent,
    PageFailed,
    PageFetched,
    SourceFailed,
    SourceFetched,
    SourceNotModified,
    from_json,
)
from scrapy_echo.crawler.settings import read_sources
from scrapy_echo.distributed.clock import MAX_AHEAD
from scrapy_echo.distributed.dedup import EventDedup
from scrapy_echo.distributed.planner_loading import Loaded, rebuild
from scrapy_echo.distributed.request_ids import (
    kind_of,
    page_id,
    refresh_id,
    request_id,
    source_id,
)
from scrapy_echo.distributed.store_messages import PushedApplied
from scrapy_echo.model.decisions.registry import make_policy

if TYPE_CHECKING:
    from scrapy import Request, Spider

    from scrapy_echo.crawler.runtime import EchoRuntime
    from scrapy_echo.distributed.store import RedisStore
    from scrapy_echo.distributed.store_messages import Queued

logger = logging.getLogger(__name__)

EVENTS_PER_ROUND = 2000
_PAGE_HEAD_START_MS = 1e9  # ~11 days: more than any source crawl waits in the queue
_SNAPSHOT_NEVER = -math.inf
# A queued page not reported fetched after this many lease timeouts is no longer kept for a
# re-queue: it failed (failures send no event) or its report is long applied.
_PAGES_KEPT_LEASES = 4
_SAVE_SHARE_INVERSE = 10
_RETRY_AFTER_LEASES = 10  # a worker that gave the lease up tries again after this many


class PlannerHost(Protocol):
    """What the planner needs of the worker's scheduler that holds it."""

    runtime: EchoRuntime
    store: RedisStore
    token: str

    @property
    def spider(self) -> Spider | None: ...

    def encode(self, request: Request) -> str: ...

    def decode(self, payload: bytes | str) -> Request: ...

    def count_rejected(self, kind: str, count: int = 1, *, message: str = "") -> None: ...

    def next_echo_request(self, now: float, *, count: bool = True) -> Request | None: ...

    def next_refresh_request(self, now: float) -> Request | None: ...

    def queued_slot(self, request: Request) -> str: ...

    def slot_held(self, slot: str) -> bool: ...

    def put_back_last(self) -> None: ...

    def next_page_request(self, source: int, url: str, page: int) -> Request: ...

    def set_aside_state(self) -> str: ...

    def release_lease(self) -> None: ...

    def inc_stat(self, key: str, count: int = 1) -> None: ...


class Planner:
    def __init__(self, scheduler: PlannerHost) -> None:
        self.scheduler = scheduler
        self.runtime = scheduler.runtime
        self.config = scheduler.runtime.config
        self.term = 0  # > 0 while this worker holds the lease
        self.renewed_at = -math.inf
        # Source crawls queued and not yet reported, by request id -> when queued: the policy
        # is not asked to choose them again meanwhile.
        self.outstanding: dict[str, float] = {}
        # New pages and refetches queued and not yet reported fetched, by request id ->
        # (when, request): a Redis that loses its data loses them with the queue, their links
        # already seen, so the planner queues them again (see regained).
        self.queued_pages: dict[str, tuple[float, Request]] = {}
        # The download slot of each of those (dropped lazily once they are reported).
        self.queued_slots: dict[str, str] = {}
        self._requeue: list[Request] = []
        # Next pages of hubs whose crawl reads on (a worker without the state sent the page;
        # the core's rule said read on): queued before anything the policy chooses.
        self._next_pages: list[Request] = []
        self.pushes_seen = 0  # the planner's pushes Redis last counted (see went_back)
        self.dedup = EventDedup()  # events sent twice (a round trip retried) applied once
        self._solves_logged = 0
        self.last_event = "0-0"
        # The last source and signal users pushed that this term applied. A term starts from
        # the first still in Redis: a save removes exactly those its state applied.
        self.pushed = PushedApplied()
        self._seq = 0
        self._saved_at = _SNAPSHOT_NEVER
        self._next_try = -math.inf
        self.save_seconds = 0.0  # how long the last save took (encoding and upload)
        self.loading = False  # the saved state is being rebuilt (take_over pending)
        self._loading = 0
        self._plan_inputs: tuple[float, Callable[[str], float] | None] = (0.0, None)

    @property
    def active(self) -> bool:
        return self.term > 0

    # -- the lease -------------------------------------------------------------------------
    def lease_sure(self) -> bool:
        """Whether this worker surely holds the lease now: renewed less than a lease ago (a
        solve is started, and installed from its thread, only then: a successor cannot have
        taken the lease meanwhile)."""
        since = self.runtime.clock() - self.renewed_at
        return self.active and not self.loading and since < self.config.redis_solver_lease

    def lease_ms(self) -> int:
        return int(self.config.redis_solver_lease * 1000)

    def try_acquire(self, now: float) -> bool:
        """Runs on the Redis thread: take the lease if free (checked every third of it)."""
        if now < self._next_try:
            return False
        self._next_try = now + self.config.redis_solver_lease / 3
        term = self.scheduler.store.acquire_solver(self.scheduler.token, self.lease_ms())
        if not term:
            return False
        self.term = term
        return True

    def begin_loading(self) -> int:
        """The lease was just taken: the saved state is read and rebuilt off the reactor
        (:meth:`load`), seconds for millions of links, while the round trips only renew the
        lease. Returns the ticket :meth:`take_over` checks."""
        self._loading += 1
        self.loading = True
        # What the first plan of the loaded state spends and may ask of each host, as of now.
        politeness = self.runtime.politeness
        self._plan_inputs = (
            self.runtime.plan_budget(),
            politeness.capacity if politeness is not None else None,
        )
        return self._loading

    def load(self, loaded: tuple[bytes | list[bytes], str] | None, ticket: int) -> Loaded:
        """On any thread: the saved state ``loaded`` rebuilt apart from the runtime, and its
        first plan made (:func:`.planner_loading.rebuild`)."""
        budget, capacity = self._plan_inputs
        return rebuild(
            loaded, ticket, self.config, self.scheduler.decode, self.runtime.clock, budget, capacity
        )

    def take_over(self, loaded: Loaded) -> None:
        """In the reactor, once :meth:`load` is done: the saved state, or a fresh one."""
        if not (self.loading and loaded.ticket == self._loading and self.active):
            return  # the lease was lost meanwhile
        self.loading = False
        if loaded.newer is not None:
            # A rolling upgrade: a newer worker planned last. Planning from scratch here would
            # throw its state away; leave the lease to a worker that reads it.
            self.scheduler.inc_stat("echo/redis/planner_newer_state")
            logger.error("ECHO state in Redis: %s; this worker leaves planning to one that "
                         "reads it (upgrade it)", loaded.newer)  # fmt: skip
            self.give_up_lease("its saved state is a newer build's")
            return
        if loaded.error is not None:
            self.scheduler.count_rejected("snapshot")
            aside = self.scheduler.set_aside_state()
            logger.error("ECHO state in Redis unreadable (%s); kept as %s, starting from the "
                         "sources", loaded.error, aside)  # fmt: skip
        if loaded.refused:
            self.scheduler.count_rejected("snapshot_request", loaded.refused)
        if loaded.dedup_error is not None:
            self.scheduler.count_rejected("snapshot_event_numbers", message=loaded.dedup_error)
        self.last_event, self.dedup = loaded.last_event, loaded.dedup
        self.pushed = PushedApplied()
        feeds = loaded.feeds if isinstance(loaded.feeds, dict) else {}
        # (A fresh state has counted no click: every feed from the top.)
        self.runtime.restore_feeds(feeds if loaded.state is not None else {})
        # A fresh policy: it must hold no caches of another state.
        policy = loaded.policy if loaded.state is not None else None
        self.runtime.core.reset(
            loaded.state, policy or make_policy(self.config.policy), loaded.hosts
        )
        fresh = self.runtime.state
        before = (len(fresh.sources), fresh.retired_sources)
        spider = self.scheduler.spider
        self.runtime.core.add_sources(
            self.config.sources + read_sources(getattr(spider, "echo_sources", ()))
        )
        self.runtime.holds_state = True
        self.outstanding.clear()
        self.queued_pages.clear()
        self._requeue.clear()
        self.pushes_seen = 0
        self._saved_at = _SNAPSHOT_NEVER
        self.renewed_at = self.runtime.clock()
        logger.info(
            "ECHO planner term %d on this worker: %d sources, %d waiting pages%s",
            self.term,
            len(fresh.sources),
            len(fresh.frontier),
            ", from the saved state" if loaded.state is not None else "",
        )
        self._solves_logged = self.runtime.solves
        if loaded.plan is not None and (len(fresh.sources), fresh.retired_sources) == before:
            self.runtime.core.solves += 1  # (made on the loading thread, for this state)
            self.runtime.replanned(loaded.plan, loaded.budget)
        else:  # (sources added or revived since: a plan that knows them)
            self.runtime.replan()

    def regained(self, term: int) -> None:
        """Redis lost its data (restarted without persistence, or evicted keys) and this
        planner took the lease back as ``term``: its state is the only copy. It is saved at
        once, and what the lost queue held is queued again: the pages not reported fetched,
        and the sources' crawls (chosen again as the policy sees fit)."""
        logger.warning(
            "ECHO: Redis lost the crawl's keys (restarted without persistence, or evicted); "
            "planner term %d keeps its state as term %d, saves it and queues again %d pages",
            self.term,
            term,
            len(self.queued_pages),
        )
        self.term = term
        self._queue_again()

    def went_back(self, pushes: int) -> None:
        """Redis came back from an older copy of its data (a snapshot taken before a
        restart, a replica promoted before it caught up): it still knows this planner's
        term, but counts ``pushes`` fewer than it answered before. The queue lost what came
        after that copy: queued again, as in :meth:`regained` (what the queue still holds is
        not queued twice: a push skips a request queued, leased or done)."""
        logger.warning(
            "ECHO: Redis went back to an older copy of its data (%d planner pushes counted, "
            "%d before); planner term %d saves its state and queues again %d pages",
            pushes,
            self.pushes_seen,
            self.term,
            len(self.queued_pages),
        )
        self._queue_again()

    def _queue_again(self) -> None:
        """Save the state at once; queue again the pages not reported fetched, and let the
        policy choose the sources' crawls again."""
        self._saved_at = _SNAPSHOT_NEVER
        self.outstanding.clear()
        self._requeue += [request for _, request in self.queued_pages.values()]
        self.queued_pages.clear()

    def set_aside(self, rids: list[str], now: float) -> None:
        """Requests the queue refused: set aside in ``dead`` after crashing every worker that
        took them. A source's crawl counts as failed (its next try backs off, and enough in
        a row retire it), rather than going round the fleet again; a page is let go."""
        sources = [rid for rid in rids if kind_of(rid) == "source"]
        state = self.runtime.state
        urls = {source_id(status.url): status.url for status in state.sources} if sources else {}
        for rid in rids:
            self.outstanding.pop(rid, None)
            self.queued_pages.pop(rid, None)
        for rid in sources:
            if rid in urls:
                self.scheduler.inc_stat("echo/planner/set_aside/source")
                self.runtime.apply(SourceFailed(urls[rid], now, "set aside in dead"))
        refetched = {rid for rid in rids if kind_of(rid) == "refresh"}
        if refetched:  # the page leaves the lane: its id stays refused while in dead
            pages = [p for p, t in state.refresh.pages.items() if refresh_id(t.url) in refetched]
            self.runtime.core.stop_refreshing(pages)
            if pages:
                self.scheduler.inc_stat("echo/planner/set_aside/refresh", len(pages))
        self.scheduler.inc_stat("echo/planner/set_aside", len(rids))

    def give_up_lease(self, why: str) -> None:
        """Step down and release the lease at once, for another worker to take; this one
        waits ten leases before trying again (the same failure would come back)."""
        self.step_down(why)
        self._next_try = self.runtime.clock() + _RETRY_AFTER_LEASES * self.config.redis_solver_lease
        self.scheduler.release_lease()

    def step_down(self, why: str) -> None:
        if self.active:
            logger.warning("ECHO planner term %d ends on this worker: %s", self.term, why)
        self.term = 0
        self.loading = False
        self.runtime.holds_state = False
        self.runtime.core.reset(None, make_policy(self.config.policy))

    # -- one round -------------------------------------------------------------------------
    def apply(
        self, events: list[tuple[str, bytes]], sources: list[tuple[str, bytes]], now: float
    ) -> None:
        """Fold in what the workers saw, and the sources users pushed (id, URL)."""
        for event_id, raw in events:
            self.last_event = event_id
            try:
                data = json.loads(raw)
                if self.dedup.seen_event(data):
                    self.scheduler.inc_stat("echo/planner/duplicate_events")
                    continue
                event = from_json(data)
            except (ValueError, UnicodeDecodeError, RecursionError) as exc:
                kind = exc.kind if isinstance(exc, InvalidEvent) else "event_not_json"
                self.scheduler.count_rejected(kind, message=f"event {event_id}: {exc}")
                continue
            event = self._dated(event, now)
            if isinstance(event, SourceFetched) and event.next_page is not None:
                event = self._read_hub_page(event)
            if isinstance(event, SourceFetched | PageFetched | SourceNotModified | SourceFailed):
                self.runtime.throughput.add(now)
            if isinstance(event, SourceFetched | SourceNotModified | SourceFailed):
                self.outstanding.pop(source_id(event.url), None)
            elif isinstance(event, PageFetched | PageFailed):
                refresh = isinstance(event, PageFetched) and event.refresh
                rid = refresh_id(event.url) if refresh else page_id(event.url)
                for attempt in range(self.config.page_max_tries + 1):  # (see _queued_id)
                    self.queued_pages.pop(rid if not attempt else f"{rid}~{attempt}", None)
            try:
                pages = self.runtime.apply(event)
            except Exception as exc:  # well formed, yet the state cannot take it: skip it
                self.scheduler.count_rejected("event_failed", message=f"{event_id}: {exc!r}")
                continue
            self.runtime.found(pages)
        pushed = []
        for source_entry, raw in sources:
            self.pushed = replace(self.pushed, source=source_entry)
            try:
                (url,) = read_sources([raw.decode()])
            except Exception as exc:  # NotConfigured, UnicodeDecodeError
                self.scheduler.count_rejected("bad_source", message=f"pushed source: {exc}")
                continue
            pushed.append(url)
        self.runtime.core.add_sources(pushed)  # (a retired or removed one comes back)

    def _read_hub_page(self, event: SourceFetched) -> SourceFetched:
        """A hub page a worker read without the crawl state: its links up to one the hub
        showed before this crawl, and, if the crawl reads on (the core's rule, as the spider
        middleware asks it where the state is), the next page's request queued."""
        state, core = self.runtime.state, self.runtime.core
        source = state.source_ids.get(self.config.identity.key(event.url))
        if source is None:  # (a source removed meanwhile: its crawl is not read on)
            return replace(event, next_page=None)
        page, links = event.hub_page, list(event.links)
        urls = [url for url, _ in links]
        known = state.links_seen(urls)
        boundary = core.next_page_boundary(source, page, urls, known)
        if boundary is not None:
            links, urls, known = links[: boundary + 1], urls[: boundary + 1], known[: boundary + 1]
            treated = event.treated[: boundary + 1] if event.treated else ()
            event = replace(event, links=tuple(links), treated=treated)
        verdict = core.reads_on(
            source, page, urls, known, boundary, most=self.config.max_next_pages
        )
        if verdict == "cut":
            self.scheduler.inc_stat("echo/sources/next_pages_cut")
        elif verdict == "next" and event.next_page is not None:
            self.scheduler.inc_stat("echo/sources/next_pages")
            self._next_pages.append(
                self.scheduler.next_page_request(source, event.next_page, page + 1)
            )
        return replace(event, next_page=None)

    def _dated(self, event: Event, now: float) -> Event:
        """``event`` with a time from the future (past :data:`.clock.MAX_AHEAD`) set to
        ``now``: a source fetched "later" would make every honest fetch after it a span of
        zero, and a page "appearing" later would wait for ever (counted, logged once)."""
        t = getattr(event, "t", None)
        if t is None or t <= now + MAX_AHEAD:
            return event
        self.scheduler.count_rejected("clock_ahead", message=f"an event {t - now:.0f} s ahead")
        if isinstance(event, PageFetched):
            return replace(event, t=now, appeared=min(event.appeared, now))
        return replace(event, t=now)  # type: ignore[arg-type]

    def take_signals(self, entries: list[tuple[str, dict[bytes, bytes]]]) -> None:
        """The signals users added to the ``signals`` stream (id, fields ``url`` and ``ts``),
        checked and counted as every signal is (:mod:`scrapy_echo.inputs.signalfeed`)."""
        if not entries:
            return
        self.pushed = replace(self.pushed, signal=entries[-1][0])
        rows: list[dict[str, object]] = []
        for _, fields in entries:
            try:
                rows.append({key.decode(): value.decode() for key, value in fields.items()})
            except (UnicodeDecodeError, AttributeError):
                rows.append({})  # counted as missing its fields
        self.runtime.signal_intake.push(rows)

    def choose(self, depth: int, now: float) -> list[Queued]:
        """Requests to queue so that about ``ECHO_REDIS_QUEUE_AHEAD`` seconds of the budget
        wait in Redis: fresh enough to follow the policy, enough that no worker idles."""
        target = max(2, math.ceil(self.runtime.crawl_rate() * self.config.redis_queue_ahead))
        chosen: list[Queued] = []
        stale = now - 2 * self.config.redis_lease_timeout
        for rid in [rid for rid, queued in self.outstanding.items() if queued < stale]:
            del self.outstanding[rid]  # its report never came (a refused or lost request)
        forgotten = now - _PAGES_KEPT_LEASES * self.config.redis_lease_timeout
        for rid in [rid for rid, (queued, _) in self.queued_pages.items() if queued < forgotten]:
            del self.queued_pages[rid]  # failed (no report), or long fetched and reported
        for next_page in self._next_pages:  # (more of crawls already counted: no budget check)
            # Before new pages: the rest of a burst the crawl is reading.
            entry = self._entry(
                request_id(next_page), next_page, now * 1000 - 2 * _PAGE_HEAD_START_MS
            )
            if entry is not None:
                chosen.append(entry)
        self._next_pages = []
        requeue, self._requeue = self._requeue, []
        # What waits for a held host is not leased before its hold ends: it does not fill
        # the queue, or one host's Retry-After would stop every other's requests.
        depth -= self._queued_for_held_hosts()
        for _ in range(max(target - depth, len(requeue))):
            dispatched = not requeue  # (else one chosen before, to queue again)
            request = requeue.pop() if requeue else self._next_request(now)
            if request is None:
                break
            rid = self._queued_id(request)
            if rid in self.outstanding:
                # The best the policy has is already on its way: wait for news, the source
                # as due as it was (its dispatch just now undone).
                if dispatched:
                    self.scheduler.put_back_last()
                break
            kind = kind_of(rid)
            if kind == "source":
                self.outstanding[rid] = now
            else:
                self.queued_pages[rid] = (now, request)
            # Queue order is decision order, except that a new page goes before every source
            # crawl and refetch already queued: new pages first, as on one machine.
            entry = self._entry(
                rid, request, now * 1000 - (_PAGE_HEAD_START_MS if kind == "page" else 0.0)
            )
            if entry is None:
                continue
            self.scheduler.inc_stat(f"echo/planner/queued/{kind}")
            self.queued_slots[rid] = entry[3]
            chosen.append(entry)
        return chosen

    def _entry(self, rid: str, request: Request, score: float) -> Queued | None:
        """``request`` as a queue entry under ``rid`` at ``score`` (ties kept in decision
        order), taking its slot's next turn; ``None`` (counted) if it cannot be stored."""
        try:
            payload = self.scheduler.encode(request)
        except ValueError as exc:
            self.scheduler.count_rejected("unencodable", message=str(exc))
            return None
        self._seq += 1
        slot = self.scheduler.queued_slot(request)
        return rid, score + self._seq % 1000 / 1000, payload, slot

    def _queued_id(self, request: Request) -> str:
        """The request's id in Redis; a page tried again after a failed fetch gets one of
        its own per try, since Redis remembers the failed try's id as done."""
        rid = request_id(request)
        if kind_of(rid) == "page":
            tries = self.runtime.state.page_tries(request.url)
            if tries:
                return f"{rid}~{tries}"
        return rid

    def _queued_for_held_hosts(self) -> int:
        """How many of the requests this planner queued, not yet reported, are for slots
        whose hosts asked to be left alone."""
        held = 0
        for rid, slot in list(self.queued_slots.items()):
            if rid not in self.outstanding and rid not in self.queued_pages:
                del self.queued_slots[rid]
            else:
                held += self.scheduler.slot_held(slot)
        return held

    def _next_request(self, now: float) -> Request | None:
        """A refetch the refresh lane has due (within its share of the budget), else the
        policy's choice, as on one machine."""
        refetch = self.scheduler.next_refresh_request(now)
        return refetch or self.scheduler.next_echo_request(now, count=False)

    def new_solves(self, now: float) -> list[str]:
        """``"<term> <ms>"`` for each re-solve since the last call."""
        count = self.runtime.solves - self._solves_logged
        self._solves_logged = self.runtime.solves
        return [f"{self.term} {int(now * 1000)}"] * count if self.active else []

    def snapshot_due(self, now: float) -> bool:
        # A save keeps a thread encoding for seconds with a large state, and the Redis thread
        # uploading (its round trips wait): saves are spaced to take at most a tenth of the
        # time.
        gap = max(self.config.redis_snapshot_interval, _SAVE_SHARE_INVERSE * self.save_seconds)
        return now - self._saved_at >= gap

    def snapshot(self, now: float) -> tuple[snapshots.Captured, str, PushedApplied]:
        """The state captured now (cheap), to encode and save off the reactor, the last event
        it includes and the last pushed source and signal. (The planner keeps no plain lane:
        its waiting pages are data.)"""
        self._saved_at = now
        mine = {"events_applied": self.dedup.to_data(), "feeds": self.runtime.feed_state()}
        core, clock = self.runtime.core, self.runtime.clock
        captured = snapshots.capture(core, clock(), self.scheduler.encode, extra=mine)
        return captured, self.last_event, self.pushed
