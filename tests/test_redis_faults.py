"""Distributed mode under faults, against a real redis-server: leases held as long as a
worker holds the request (waiting in its buffer too), requests that never finish set aside,
malformed stored entries removed without upsetting a batch, a failed command that does not
make a worker send again what Redis already has, events sent twice applied once."""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

import pytest
import pytest_twisted
import redis
import scrapy
from scrapy import Request
from scrapy.utils.test import get_crawler
from twisted.internet import defer, reactor
from twisted.python.failure import Failure

from scrapy_echo.core.events import (
    SourceAdded,
    SourceFetched,
    SourceRemoved,
    to_json,
)
from scrapy_echo.distributed.dedup import EventDedup, stamp
from scrapy_echo.distributed.scheduler import DistributedScheduler
from scrapy_echo.distributed.store import RedisStore, key_base
from scrapy_echo.distributed.store_messages import Exchange, Reply
from scrapy_echo.distributed.wire import encode_request

OPTIONS: dict[str, Any] = {"lease_ms": 300, "rate": 0.0, "burst": 1.0, "plain_share": 0.5,
                           "done_ttl_ms": 60_000, "max_attempts": 5}  # fmt: skip


@pytest.fixture
def store(redis_url: str) -> RedisStore:
    store = RedisStore(redis.Redis.from_url(redis_url), f"test:{uuid.uuid4().hex}")
    store.acquire_solver("A", 60_000)
    return store


def exchange(store: RedisStore, batch: Exchange, **options: Any) -> Reply:
    return store.exchange(batch, **{**OPTIONS, **options})


# -- the store's scripts ---------------------------------------------------------------------
def test_a_renewal_names_the_leases_no_longer_held(store):
    store.push("A", [("p:1", 1.0, '{"n":1}'), ("p:2", 2.0, '{"n":2}')])
    (first, _), (second, _) = exchange(store, Exchange(want=2)).leased
    time.sleep(0.2)
    exchange(store, Exchange(renew=[second]))  # the second is renewed, the first is not
    time.sleep(0.2)
    # The first lease ran out and its request went to another worker.
    (again, payload), *_ = exchange(store, Exchange(want=1)).leased
    assert payload == b'{"n":1}' and again != first
    reply = exchange(store, Exchange(renew=[first, second]))
    assert reply.lost == [first]


def test_a_request_leased_more_than_the_limit_is_set_aside_as_dead(store):
    store.push("A", [("p:crash", 1.0, '{"n":1}'), ("p:fine", 2.0, '{"n":2}')])
    for _ in range(2):  # two workers take it and die: the leases run out
        (member, _), *_ = exchange(store, Exchange(want=1), max_attempts=2).leased
        assert member.startswith("p:crash|")
        time.sleep(0.35)
    reply = exchange(store, Exchange(want=2), max_attempts=2)
    assert reply.dead == ["p:crash"]
    assert [payload for _, payload in reply.leased] == [b'{"n":2}']  # the next one instead
    assert store.client.hget(store.keys["dead"], "p:crash") == b'E|1.0||{"n":1}'
    assert not store.client.hexists(store.keys["req"], "p:crash")
    assert not store.client.hexists(store.keys["attempts"], "p:crash")
    assert store.counters()["dead"] == 1
    time.sleep(0.35)
    assert exchange(store, Exchange(want=2), max_attempts=2).leased[0][1] == b'{"n":2}'


def test_an_ack_clears_the_attempt_count(store):
    store.push("A", [("p:1", 1.0, "{}")])
    ((member, _),) = exchange(store, Exchange(want=1)).leased
    assert store.client.hget(store.keys["attempts"], "p:1") == b"1"
    exchange(store, Exchange(acks=[member]))
    assert store.client.hlen(store.keys["attempts"]) == 0


def plant(store: RedisStore, entries: dict[str, bytes]) -> None:
    for score, (rid, entry) in enumerate(entries.items()):
        store.client.hset(store.keys["req"], rid, entry)
        store.client.zadd(store.keys["queue"], {rid: score})


def test_malformed_stored_entries_are_removed_and_never_shift_the_reply(store):
    plant(store, {
        "p:bare": b'{"url": "http://a.test/"}',  # no "<lane>|<score>|" in front
        "p:ok": b'e|1|{"ok":1}',
        "p:score": b"e|soon|{}",
        "p:lane": b"x|1|{}",
        "p:nan": b"e|nan|{}",
        "p:ok2": b'e|2|{"ok":2}',
    })  # fmt: skip
    events = ['{"e":"source","url":"http://a.test/"}']
    reply = exchange(store, Exchange(events=events, want=10))
    assert [(m.split("|")[0], p) for m, p in reply.leased] == [
        ("p:ok", b'e|1|{"ok":1}'.split(b"|", 2)[2]),
        ("p:ok2", b'{"ok":2}'),
    ]
    assert reply.malformed == 4 and reply.errors == []
    assert store.counters()["malformed"] == 4
    assert set(store.client.hkeys(store.keys["req"])) == {b"p:ok", b"p:ok2"}
    assert store.client.xlen(store.keys["events"]) == 1


def test_an_entry_spoiled_while_leased_is_removed_when_its_lease_runs_out(store):
    store.push("A", [("p:1", 1.0, "{}")])
    exchange(store, Exchange(want=1))
    store.client.hset(store.keys["req"], "p:1", b"garbage")
    time.sleep(0.35)
    reply = exchange(store, Exchange(want=1))
    assert (reply.leased, reply.malformed) == ([], 1)
    assert store.client.hlen(store.keys["req"]) == 0
    assert store.client.zcard(store.keys["queue"]) == 0


def test_stored_numbers_that_are_not_numbers_do_not_break_the_scripts(store):
    store.push("A", [("p:1", 1.0, "{}"), ("p:2", 2.0, "{}")])
    store.client.hset(store.keys["counters"], mapping={"lease_seq": "x", "acked": "1.5"})
    store.client.hset(store.keys["budget"], mapping={"tokens": "nan", "ts": "inf"})
    store.client.hset(store.keys["served"], mapping={"e": "lots", "p": "-inf"})
    reply = exchange(store, Exchange(want=2), rate=100.0, burst=5.0)
    assert reply.errors == [] and len(reply.leased) == 2
    reply = exchange(store, Exchange(acks=[m for m, _ in reply.leased]))
    assert reply.errors == [] and store.client.hlen(store.keys["req"]) == 0


def test_a_failed_command_sends_again_only_what_it_carried(store):
    """A command failing inside the transaction (here: the events key of the wrong type)
    does not undo the others: the worker must send again its events, not its acks."""
    store.push("A", [("p:1", 1.0, "{}"), ("p:2", 2.0, "{}")])
    ((member, _),) = exchange(store, Exchange(want=1)).leased
    store.client.set(store.keys["events"], "not a stream")
    batch = Exchange(events=["e1", "e2"], acks=[member], rejected=["not_json"], want=1)
    reply = exchange(store, batch)
    assert len(reply.errors) == 2  # one per event
    assert reply.unsent.events == ["e1", "e2"]
    assert (reply.unsent.acks, reply.unsent.rejected, reply.unsent.plain) == ([], [], [])
    assert [payload for _, payload in reply.leased] == [b"{}"]  # the lease went through
    assert not store.client.hexists(store.keys["req"], "p:1")  # so did the ack
    assert store.counters()["rejected:not_json"] == 1


# -- events numbered per worker ------------------------------------------------------------
def test_dedup_drops_what_it_applied_and_survives_a_save() -> None:
    dedup = EventDedup(max_workers=2)
    assert [dedup.seen("a", n) for n in (1, 2, 3, 2, 3, 4)] == [False] * 3 + [True] * 2 + [False]
    assert not dedup.seen("b", 1)
    assert not dedup.seen_event({"e": "source", "url": "http://a.test/"})  # no stamp: apply
    assert not dedup.seen_event({"w": "a", "q": True}) and not dedup.seen_event([1])
    back = EventDedup.from_data(json.loads(json.dumps(dedup.to_data())), max_workers=2)
    assert back.seen_event({"w": "a", "q": 4}) and not back.seen_event({"w": "a", "q": 5})
    back.seen("c", 1)  # a third worker: the one heard from least recently is forgotten
    assert len(back) == 2 and not back.seen("b", 1)
    for bad in (None, {"workers": {}}, {"workers": [["a"]]}, {"workers": [["a", "1"]]}):
        with pytest.raises(ValueError, match="event numbers"):
            EventDedup.from_data(bad)


class Spider(scrapy.Spider):
    name = "faults"

    def parse(self, response: Any) -> Any:
        return []


def open_worker(redis_url: str, prefix: str, **settings: Any) -> DistributedScheduler:
    crawler = get_crawler(Spider, {
        "ADDONS": {"scrapy_echo.Addon": 0},
        "REDIS_URL": redis_url,
        "ECHO_REDIS_KEY_PREFIX": prefix,
        "ECHO_REDIS_POLL_INTERVAL": 0.05,
        **settings,
    })  # fmt: skip
    crawler.spider = crawler._create_spider()
    scheduler = DistributedScheduler.from_crawler(crawler)
    scheduler.open(crawler.spider)
    return scheduler


def test_a_worker_numbers_its_events_and_sends_the_same_numbers_again(redis_url) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    worker = open_worker(redis_url, prefix)
    worker._closing = True  # no round trips of its own: this test makes them
    if worker._round_call is not None and worker._round_call.active():
        worker._round_call.cancel()
    try:
        worker._send_event(SourceAdded("http://a.test/"))
        worker._send_event(SourceRemoved("http://a.test/"))
        batch, worker.outbox = worker.outbox, Exchange()
        worker.store.exchange(batch, **worker._exchange_options())
        # The answer was lost on the way back: the worker sends the batch again.
        worker._failed(Failure(redis.ConnectionError("reset")), batch)
        worker._send_event(SourceAdded("http://b.test/"))
        worker.store.exchange(worker.outbox, **worker._exchange_options())
        stream = worker.store.client.xrange(worker.store.keys["events"])
        sent = [json.loads(fields[b"d"]) for _, fields in stream]
        assert [event["q"] for event in sent] == [1, 2, 1, 2, 3]
        assert {event["w"] for event in sent} == {worker.token}
        dedup = EventDedup()
        applied = [event["url"] for event in sent if not dedup.seen_event(event)]
        assert applied == ["http://a.test/", "http://a.test/", "http://b.test/"]
    finally:
        worker.io.stop()


# -- a worker's leases -----------------------------------------------------------------------
def later(seconds: float) -> defer.Deferred[None]:
    done: defer.Deferred[None] = defer.Deferred()
    reactor.callLater(seconds, done.callback, None)  # type: ignore[attr-defined]
    return done


async def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await later(0.05)


def planner_of(redis_url: str, prefix: str, count: int) -> RedisStore:
    """The test's own planner, holding the planner's lease (the worker is only a worker),
    with ``count`` requests queued."""
    planner = RedisStore(redis.Redis.from_url(redis_url), key_base(prefix, Spider.name))
    planner.acquire_solver("test-planner", 600_000)
    requests = [Request(f"http://a.test/{i}") for i in range(count)]
    payloads = [encode_request(request, Spider(), None) for request in requests]
    assert planner.push("test-planner", [(f"p:{i}", float(i), p) for i, p in enumerate(payloads)])
    return planner


@pytest_twisted.ensureDeferred
async def test_requests_waiting_in_a_worker_keep_their_leases(redis_url) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    planner = planner_of(redis_url, prefix, 3)
    worker = open_worker(redis_url, prefix, ECHO_REDIS_LEASE_TIMEOUT=1)
    try:
        await wait_for(lambda: len(worker.held.buffer) == 3)
        await later(3.0)  # three lease timeouts while the engine takes nothing
        assert len(worker.held.buffer) == 3
        assert planner.exchange(Exchange(want=10), **OPTIONS).leased == []  # still held
    finally:
        await worker.close("finished")
    assert worker.crawler.stats.get_value("echo/redis/leases_lost/buffered") is None


@pytest_twisted.ensureDeferred
async def test_a_request_whose_lease_was_lost_is_dropped_unfetched_or_counted(redis_url) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    planner = planner_of(redis_url, prefix, 3)
    worker = open_worker(redis_url, prefix, ECHO_REDIS_LEASE_TIMEOUT=1)
    stats = worker.crawler.stats
    try:
        await wait_for(lambda: len(worker.held.buffer) == 3)
        under_way = worker.next_request()
        assert under_way is not None
        # The worker stalled past its leases: they ran out and went to another worker.
        leases = planner.keys["leases"]
        members = [m.decode() for m in planner.client.zrange(leases, 0, -1)]
        planner.client.zrem(leases, *members)
        planner.client.zadd(leases, {m.split("|")[0] + "|other": 2e12 for m in members})
        await wait_for(lambda: stats.get_value("echo/redis/leases_lost/buffered") == 2)
        assert stats.get_value("echo/redis/leases_lost/in_flight") == 1
        assert worker.next_request() is None  # the waiting two are not fetched here
        assert worker.held.finish(under_way) is None  # nor acked: not this worker's now
    finally:
        await worker.close("finished")


@pytest_twisted.ensureDeferred
async def test_a_worker_that_sees_a_request_set_aside_counts_and_logs_it(redis_url, caplog) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    planner = planner_of(redis_url, prefix, 2)
    planner.client.hset(planner.keys["attempts"], "p:0", 1)  # leased once, never done
    with caplog.at_level(logging.WARNING, logger="scrapy_echo.distributed.leases"):
        worker = open_worker(redis_url, prefix, ECHO_REDIS_MAX_ATTEMPTS=1)
        try:
            await wait_for(lambda: len(worker.held.buffer) == 1)
        finally:
            await worker.close("finished")
    assert worker.crawler.stats.get_value("echo/redis/dead") == 1
    assert [r.url for r in worker.held.buffer] == ["http://a.test/1"]
    assert "set ['p:0'] aside" in caplog.text
    assert planner.client.hexists(planner.keys["dead"], "p:0")


def test_the_planner_applies_an_event_sent_twice_once_even_after_a_take_over(redis_url) -> None:
    source = "http://a.test/"
    workers = [open_worker(redis_url, f"t{uuid.uuid4().hex[:8]}", ECHO_SOURCES=source)
               for _ in range(2)]  # fmt: skip
    try:
        first, second = (worker.planner for worker in workers)
        for worker in workers:
            worker._closing = True  # no round trips of their own
            worker.planner.term = 1
        first.take_over(first.load(None, first.begin_loading()))
        event = SourceFetched(source, 1000.0, (("http://a.test/1", None),))
        raw = json.dumps(stamp(to_json(event), "w1", 1)).encode()
        first.apply([("1-0", raw), ("2-0", raw)], [], 1000.0)  # sent again after a failure
        assert first.runtime.state.sources[0].crawls == 1
        captured, last, _ = first.snapshot(1000.0)
        saved = second.load((captured.to_bytes(), last), second.begin_loading())
        second.take_over(saved)  # the next planner replays the stream
        second.apply([("2-0", raw)], [], 1001.0)
        assert second.runtime.state.sources[0].crawls == 1
        stats = workers[1].crawler.stats
        assert stats.get_value("echo/planner/duplicate_events") == 1
    finally:
        for worker in workers:
            worker.io.stop()


def test_a_state_loaded_after_the_lease_was_lost_is_not_taken(redis_url) -> None:
    worker = open_worker(redis_url, f"t{uuid.uuid4().hex[:8]}", ECHO_SOURCES="http://a.test/")
    try:
        worker._closing = True  # no round trips of its own
        planner = worker.planner
        planner.term = 1
        loaded = planner.load(None, planner.begin_loading())  # (on a thread, in a crawl)
        planner.step_down("its lease expired while it loaded the saved state")
        planner.take_over(loaded)
        assert not worker.runtime.holds_state and not planner.loading
        planner.term = 2  # the lease again, a second load under way: only the newest counts
        stale = planner.load(None, planner.begin_loading())
        newest = planner.load(None, planner.begin_loading())
        planner.take_over(stale)
        assert not worker.runtime.holds_state
        planner.take_over(newest)
        assert worker.runtime.holds_state and len(worker.runtime.state.sources) == 1
    finally:
        worker.io.stop()


def planning_worker(redis_url: str, **settings: Any) -> DistributedScheduler:
    """A worker holding the planner's lease, with no round trips of its own."""
    worker = open_worker(redis_url, f"t{uuid.uuid4().hex[:8]}", **settings)
    worker._closing = True
    planner = worker.planner
    planner.term = 1
    planner.take_over(planner.load(None, planner.begin_loading()))
    worker.store.acquire_solver(worker.token, 60_000)
    return worker


@pytest_twisted.ensureDeferred
async def test_a_planner_closing_while_it_loads_keeps_the_saved_state(redis_url) -> None:
    worker = open_worker(redis_url, f"t{uuid.uuid4().hex[:8]}")
    store = worker.store
    assert store.acquire_solver(worker.token, 60_000) == 1
    assert store.save_snapshot(worker.token, b"the predecessor's state", "7-0")
    worker.planner.term = 1
    worker.planner.begin_loading()  # the worker is stopped before the state is rebuilt
    await worker.close("shutdown")
    assert store.load_snapshot() == (b"the predecessor's state", "7-0")
    assert store.client.get(store.keys["solver"]) is None  # its lease given back
