"""The Redis store's atomic scripts against a real redis-server: leases, acks, the global
budget, the planner's lease and its fenced writes."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis

from scrapy_echo.distributed.store import SNAPSHOT_BLOCK, RedisStore
from scrapy_echo.distributed.store_messages import Exchange, FleetRules, PushedApplied

OPTIONS = {"lease_ms": 300, "rate": 0.0, "burst": 1.0, "plain_share": 0.5, "done_ttl_ms": 60_000,
           "max_attempts": 5}  # fmt: skip


@pytest.fixture
def store(redis_url: str) -> RedisStore:
    return RedisStore(redis.Redis.from_url(redis_url), f"test:{uuid.uuid4().hex}")


def lease(store: RedisStore, want: int, **options: float) -> list[tuple[str, bytes]]:
    return store.exchange(Exchange(want=want), **{**OPTIONS, **options}).leased  # type: ignore[arg-type]


def test_leased_request_returns_when_its_lease_expires_and_an_old_ack_does_nothing(store):
    store.acquire_solver("A", 5000)
    assert store.push("A", [("p:1", 1.0, '{"n":1}'), ("p:2", 2.0, '{"n":2}')]) == 2
    first = lease(store, 1)
    assert [payload for _, payload in first] == [b'{"n":1}']  # queue order kept
    time.sleep(0.4)  # the lease (300 ms) runs out: the request is back, under a new lease
    again = lease(store, 2)
    assert sorted(payload for _, payload in again) == [b'{"n":1}', b'{"n":2}']
    assert store.counters()["reclaimed"] == 1
    # The first worker's late ack must not remove the request from its new holder.
    store.exchange(Exchange(acks=[first[0][0]]), **OPTIONS)  # type: ignore[arg-type]
    assert store.client.zcard(store.keys["leases"]) == 2
    store.exchange(Exchange(acks=[m for m, _ in again]), **OPTIONS)  # type: ignore[arg-type]
    assert store.client.zcard(store.keys["leases"]) == 0
    assert store.client.hlen(store.keys["req"]) == 0
    # Done pages are remembered: the planner cannot queue them again.
    assert store.push("A", [("p:1", 3.0, "{}")]) == 0


def test_renewed_lease_is_not_reclaimed(store):
    store.acquire_solver("A", 5000)
    store.push("A", [("s:1", 1.0, "{}")])
    ((member, _),) = lease(store, 1)
    for _ in range(4):
        time.sleep(0.15)
        store.exchange(Exchange(renew=[member]), **OPTIONS)  # type: ignore[arg-type]
    assert lease(store, 1) == []  # 600 ms after the lease, still held: nothing to lease
    assert store.counters().get("reclaimed", 0) == 0


def test_global_budget_grants_at_the_rate_whoever_asks(store, redis_url):
    store.acquire_solver("A", 5000)
    store.push("A", [(f"p:{i}", float(i), "{}") for i in range(400)])
    # Three workers, each with its own connection, asking as fast as they can.
    clients = [RedisStore(redis.Redis.from_url(redis_url), store.prefix) for _ in range(3)]
    granted, started = 0, time.monotonic()
    while time.monotonic() - started < 2.0:
        for client in clients:
            granted += len(lease(client, 10, rate=50.0, burst=5.0))
        time.sleep(0.01)
    elapsed = time.monotonic() - started
    assert 0.85 * 50 * elapsed <= granted <= 50 * elapsed + 5 + 1, granted


def test_plain_requests_get_their_share_and_are_deduplicated(store):
    store.acquire_solver("A", 5000)
    store.push("A", [(f"p:{i}", float(i), "{}") for i in range(10)])
    plain = [(f"r:{i % 5}", float(i), '{"plain":true}') for i in range(10)]  # 5 distinct
    store.exchange(Exchange(plain=plain), **OPTIONS)  # type: ignore[arg-type]
    assert store.client.zcard(store.keys["plainq"]) == 5
    got = lease(store, 8, plain_share=0.25)
    assert sum(payload == b'{"plain":true}' for _, payload in got) == 2  # a quarter of 8


def test_planner_lease_is_exclusive_and_writes_are_fenced(store):
    assert store.acquire_solver("A", 300) == 1
    assert store.acquire_solver("B", 300) == 0
    assert store.push("B", [("p:1", 1.0, "{}")]) == -1
    assert not store.save_snapshot("B", b"state", "0-0")
    time.sleep(0.4)  # A stalls past its lease: B takes over with a new term
    assert store.acquire_solver("B", 300) == 2
    assert store.push("A", [("p:1", 1.0, "{}")]) == -1
    held = store.poll("A", 1, 300, "0-0", 10).held
    assert not held
    assert store.save_snapshot("B", b"state", "0-0")
    assert store.load_snapshot() == (b"state", "0-0")


def test_a_large_state_is_saved_a_block_at_a_time_and_only_by_the_lease_holder(store):
    state = bytes(range(256)) * (9 * SNAPSHOT_BLOCK // 256 // 4)  # 2.25 blocks
    assert store.acquire_solver("A", 5000) == 1
    assert store.save_snapshot("A", state, "5-0")
    assert store.load_snapshot() == (state, "5-0")
    assert store.client.ttl(store.keys["state"]) == -1  # kept for good, not staged
    assert not store.save_snapshot("B", b"other", "9-0")  # not the lease holder
    assert store.load_snapshot() == (state, "5-0")
    assert store.client.keys(f"{store.keys['state']}:staged:*") == []


def test_a_state_in_blocks_of_any_size_is_saved_as_their_bytes_and_read_back_whole(store):
    blocks = [b"a" * 10, b"b" * (SNAPSHOT_BLOCK + 7), b"", b"c" * (SNAPSHOT_BLOCK - 3)]
    assert store.acquire_solver("A", 5000) == 1
    assert store.save_snapshot("A", blocks, "5-0")
    assert store.load_snapshot() == (b"".join(blocks), "5-0")
    cut = SNAPSHOT_BLOCK + 5
    store.client.setrange(store.keys["state"], 0, b"x")  # (still the size it says)
    store.client.set(store.keys["state"], store.client.getrange(store.keys["state"], 0, cut))
    assert store.load_snapshot() == (b"", "5-0")  # cut: nothing half read


def test_a_state_saved_over_while_it_is_read_is_never_read_mixed(redis_url):
    # Saves of one size and one event, each its own bytes: only the count of saves tells
    # them apart while the reader's block reads run between them.
    prefix = f"test:{uuid.uuid4().hex}"
    reader = RedisStore(redis.Redis.from_url(redis_url), prefix)
    planner = RedisStore(redis.Redis.from_url(redis_url), prefix)
    assert planner.acquire_solver("A", 60_000) == 1
    size = 2 * SNAPSHOT_BLOCK + 1
    assert planner.save_snapshot("A", b"\x00" * size, "5-0")
    saved = threading.Event()

    def save_over() -> None:
        for k in range(1, 40):
            assert planner.save_snapshot("A", bytes([k]) * size, "5-0")
        saved.set()

    saver = threading.Thread(target=save_over)
    saver.start()
    reads = []
    while not saved.is_set():
        data, event = reader.load_snapshot()
        reads.append(data)
        assert event == "5-0"
    saver.join()
    for data in reads:  # one save's bytes, or nothing (saved over at every try)
        assert data == b"" or data == data[:1] * size
    assert any(reads)


def test_a_planner_takes_its_lease_back_when_redis_lost_its_data(store):
    assert store.acquire_solver("A", 5000) == 1
    assert store.acquire_solver("B", 5000) == 0
    store.client.delete(*store.keys.values())  # a restart without persistence: keys gone
    assert store.acquire_solver("B", 5000) == 1  # B takes a lease with nothing but sources
    held, *_ = store.poll("A", 1, 5000, "0-0", 10)
    assert held == 2  # A holds the only state: it takes the lease back, under a new term
    held, *_ = store.poll("B", 1, 5000, "0-0", 10)
    assert held == 0  # and B steps down
    log = [line.split() for line in store.client.lrange(store.keys["solver_log"], 0, -1)]
    assert [(term, token) for term, token, *_ in log] == [(b"1", b"B"), (b"2", b"A")]
    assert log[-1][-1] == b"regained"
    assert store.acquire_solver("C", 5000) == 0


def test_events_are_read_after_the_snapshot_and_trimmed_up_to_it(store):
    store.acquire_solver("A", 5000)
    events = [f'{{"n":{i}}}' for i in range(5)]
    store.exchange(Exchange(events=events), **OPTIONS)  # type: ignore[arg-type]
    read = store.poll("A", 1, 5000, "0-0", 3).events
    assert [raw for _, raw in read] == [b'{"n":0}', b'{"n":1}', b'{"n":2}']
    assert store.save_snapshot("A", b"s", read[-1][0])
    rest = store.poll("A", 1, 5000, read[-1][0], 10).events
    assert [raw for _, raw in rest] == [b'{"n":3}', b'{"n":4}']
    assert store.client.xlen(store.keys["events"]) <= 3  # trimmed to the snapshot's event


def test_signals_users_add_are_read_on_and_removed_by_the_save_that_applied_them(store):
    store.acquire_solver("A", 5000)
    key = store.keys["signals"]
    store.client.xadd(key, {"url": "http://news.test/", "ts": "150"})
    store.client.xadd(key, {"ts": "151"})  # no url: the intake counts it
    taken = store.poll("A", 1, 5000, "0-0", 10).signals
    assert [fields for _, fields in taken] == [
        {b"url": b"http://news.test/", b"ts": b"150"},
        {b"ts": b"151"},
    ]
    first = PushedApplied(signal=taken[0][0])
    again = store.poll("A", 1, 5000, "0-0", 10, pushed=first).signals
    assert [fields for _, fields in again] == [{b"ts": b"151"}]  # read on from there
    assert store.client.xlen(key) == 2  # read, not deleted
    assert store.save_snapshot("A", b"s", "0-0", first)
    assert [fields for _, fields in store.client.xrange(key)] == [{b"ts": b"151"}]


def test_what_users_push_is_taken_only_by_the_lease_holder(store):
    """A worker whose lease ran out reads no pushed source or signal (it steps down); the
    holder reads them all, once."""
    assert store.acquire_solver("A", 300) == 1
    time.sleep(0.4)  # A stalls past its lease: B takes over
    assert store.acquire_solver("B", 300) == 2
    store.client.rpush(store.keys["sources"], "http://a.test/", "http://b.test/")
    store.client.xadd(store.keys["signals"], {"url": "http://a.test/", "ts": "150"})
    held, _, sources, _, signals, _ = store.poll("A", 1, 300, "0-0", 10)
    assert (held, sources, signals) == (0, [], [])
    assert store.client.llen(store.keys["sources"]) == 2
    held, _, sources, _, signals, _ = store.poll("B", 2, 300, "0-0", 10)
    assert held == 2 and [url for _, url in sources] == [b"http://a.test/", b"http://b.test/"]
    assert [fields for _, fields in signals] == [{b"url": b"http://a.test/", b"ts": b"150"}]
    pushed = PushedApplied(source=sources[-1][0], signal=signals[-1][0])
    held, _, sources, _, signals, _ = store.poll("B", 2, 300, "0-0", 10, pushed=pushed)
    assert (sources, signals) == ([], [])


def test_the_planner_checks_and_applies_the_signals_it_takes():
    from types import SimpleNamespace

    from scrapy_echo.core.events import SourceFetched
    from scrapy_echo.distributed.planner import Planner
    from tests.test_middlewares import setup

    crawler, runtime, clock = setup()
    runtime.observe(SourceFetched("http://news.test/", 100.0, ()))
    clock.now = 200.0
    planner = Planner(SimpleNamespace(runtime=runtime))  # type: ignore[arg-type]
    planner.take_signals(
        [
            ("1-0", {b"url": b"http://news.test/", b"ts": b"150"}),
            ("2-0", {b"ts": b"1"}),
            ("3-0", {b"\xff": b"x"}),
        ]
    )
    get = crawler.stats.get_value
    assert get("echo/signalfeed/source") == 1
    assert get("echo/signalfeed/invalid/missing_field") == 2
    assert runtime.state.signals.received == 1


def test_a_redis_that_forgot_its_scripts_runs_them_again_once(store):
    """Scripts go by their digest alone (no ``SCRIPT EXISTS`` round trip): after a restart
    forgot them, each script of the round trip is loaded and run once, after the rest."""
    store.acquire_solver("A", 5000)
    store.push("A", [("p:1", 1.0, "{}"), ("p:2", 2.0, "{}")])
    ((member, _),) = lease(store, 1)
    store.client.script_flush()
    batch = Exchange(events=["e1"], acks=[member], want=1)
    reply = store.exchange(batch, **OPTIONS)  # type: ignore[arg-type]
    assert reply.errors == [] and [payload for _, payload in reply.leased] == [b"{}"]
    assert store.client.xlen(store.keys["events"]) == 1  # sent once
    assert store.counters()["acked"] == 1 and store.client.zcard(store.keys["queue"]) == 0
    store.client.script_flush()
    assert store.poll("A", 1, 5000, "0-0", 10).held == 1


def test_a_hosts_retry_after_holds_its_requests_for_every_worker(store):
    """A worker that got Retry-After from a host tells the fleet: no worker is leased that
    host's requests until the hold is over; other hosts' go on."""
    from scrapy_echo.distributed.store_messages import FleetRules

    store.acquire_solver("A", 5000)
    store.push("A", [("p:1", 1.0, '{"n":1}', "held.test"), ("p:2", 2.0, '{"n":2}', "free.test")])
    LONG = {**OPTIONS, "lease_ms": 10_000}  # (leases outlast the test: none comes back)
    one = FleetRules(token="w1", default_delay_ms=0, horizon_ms=100)
    other = FleetRules(token="w2", default_delay_ms=0, horizon_ms=100)
    hold = Exchange(holds={"held.test": 1.5})
    store.exchange(hold, fleet=one, **LONG)  # type: ignore[arg-type]
    got = store.exchange(Exchange(want=2), fleet=other, **LONG).leased  # type: ignore[arg-type]
    assert [payload for _, payload in got] == [b'{"n":2}']
    time.sleep(0.3)  # 1.5 s held, leased up to the 0.1 s horizon early: still held
    assert store.exchange(Exchange(want=1), fleet=other, **LONG).leased == []  # type: ignore[arg-type]
    time.sleep(1.5)
    got = store.exchange(Exchange(want=1), fleet=other, **LONG).leased  # type: ignore[arg-type]
    assert [payload for _, payload in got] == [b'{"n":1}']
    # A shorter hold after a longer one does not shorten it; a bad one is ignored.
    store.exchange(Exchange(holds={"held.test": 60.0}), fleet=one, **LONG)  # type: ignore[arg-type]
    turn = float(store.client.hget(store.keys["host_next"], "held.test"))
    store.exchange(Exchange(holds={"held.test": 1.0, "x": float("nan")}), fleet=one, **LONG)  # type: ignore[arg-type]
    assert float(store.client.hget(store.keys["host_next"], "held.test")) == turn
    assert store.client.hget(store.keys["host_next"], "x") is None


def test_a_slow_hosts_many_plain_requests_do_not_hold_up_another_hosts(store):
    # Reproduced on the build of 2026-11-29: 1,500 of the spider's requests for a host with
    # a 10 s delay queued ahead of 10 for a fast host; the lease scans 1,000 entries a lane,
    # so 20 rounds leased one request, none of the fast host's.
    fleet = FleetRules("W", default_delay_ms=0, horizon_ms=150)
    slow = [(f"r:s{i}", float(i), '{"host":"slow"}', "slow.test") for i in range(1500)]
    fast = [(f"r:f{i}", 2000.0 + i, '{"host":"fast"}', "fast.test") for i in range(10)]
    store.exchange(Exchange(plain=slow + fast, delays={"slow.test": 10.0}), **OPTIONS)  # type: ignore[arg-type]
    got: list[bytes] = []
    for _ in range(20):
        reply = store.exchange(Exchange(want=4), **OPTIONS, fleet=fleet)  # type: ignore[arg-type]
        got += [payload for _, payload in reply.leased]
        store.exchange(Exchange(acks=[m for m, _ in reply.leased]), **OPTIONS, fleet=fleet)  # type: ignore[arg-type]
    assert got.count(b'{"host":"fast"}') == 10
    assert got.count(b'{"host":"slow"}') == 1  # one per 10 s
    # The slow host's requests wait in the plain lane, none lost, in their order.
    left = store.client.zrange(store.keys["plainq"], 0, -1)
    assert left == [f"r:s{i}".encode() for i in range(1, 1500)]
