"""The keys that only grow keep a bounded number of entries (``Kept``), against a real
redis-server: requests set aside in ``dead`` (the oldest dropped and counted), the re-solves
in ``solves`` and the planner terms in ``solver_log``, whose capping must not make a stalled
planner mistake a take-over for a Redis that lost its data."""

from __future__ import annotations

import time
import uuid

import pytest
import redis

from scrapy_echo.distributed.store import RedisStore
from scrapy_echo.distributed.store_messages import Exchange, Kept

OPTIONS = {"lease_ms": 60_000, "rate": 0.0, "burst": 1.0, "plain_share": 0.5,
           "done_ttl_ms": 60_000, "max_attempts": 0}  # fmt: skip


@pytest.fixture
def store(redis_url: str) -> RedisStore:
    client = redis.Redis.from_url(redis_url)
    return RedisStore(client, f"test:{uuid.uuid4().hex}", kept=Kept(dead=2, solves=3, solver_log=3))


def test_dead_keeps_the_latest_requests_set_aside_and_counts_those_dropped(store):
    store.acquire_solver("A", 60_000)
    for n in range(4):
        store.push("A", [(f"p:{n}", float(n), "{}")])
        # (max_attempts 0: its first lease sets it aside)
        reply = store.exchange(Exchange(want=1), **OPTIONS)  # type: ignore[arg-type]
        assert reply.dead == [f"p:{n}"]
        time.sleep(0.002)  # set aside a millisecond apart: an order to keep
    assert sorted(store.client.hkeys(store.keys["dead"])) == [b"p:2", b"p:3"]
    counters = store.counters()
    assert (counters["dead"], counters["dead_dropped"]) == (4, 2)
    assert store.client.zcard(store.keys["dead_since"]) == 2


def test_the_logs_keep_their_last_lines(store):
    for term in range(1, 6):
        assert store.acquire_solver(f"W{term}", 60_000) == term
        store.poll(f"W{term}", term, 60_000, "0-0", 10, [f"{term} {n}" for n in range(2)])
        store.client.delete(store.keys["solver"])  # its lease runs out
    log = store.client.lrange(store.keys["solver_log"], 0, -1)
    assert [line.split()[:2] for line in log] == [[b"3", b"W3"], [b"4", b"W4"], [b"5", b"W5"]]
    assert store.client.lrange(store.keys["solves"], 0, -1) == [b"4 1", b"5 0", b"5 1"]


def test_a_planner_whose_term_left_the_capped_log_steps_down(store):
    """Its line was dropped because later terms came (a take-over): it must not take the lease
    back as if Redis had lost its data."""
    assert store.acquire_solver("A", 60_000) == 1
    for term, token in enumerate("BCDE", start=2):  # A stalls; four terms come and go
        store.client.delete(store.keys["solver"])
        assert store.acquire_solver(token, 60_000) == term
    assert store.poll("A", 1, 60_000, "0-0", 10).held == 0
    assert store.client.get(store.keys["solver"]) == b"E"
    # E's own line is in the log: a worker taking its lease is a take-over for E too.
    store.client.delete(store.keys["solver"])
    assert store.acquire_solver("F", 60_000) == 6
    assert store.poll("E", 5, 60_000, "0-0", 10).held == 0


def test_a_planner_still_takes_its_lease_back_when_redis_lost_its_data(store):
    assert store.acquire_solver("A", 60_000) == 1
    for token in "BCD":
        store.client.delete(store.keys["solver"])
        store.acquire_solver(token, 60_000)
    store.client.delete(*store.keys.values())  # a restart without persistence
    assert store.acquire_solver("B", 60_000) == 1  # a worker with nothing but the sources
    assert store.poll("D", 4, 60_000, "0-0", 10).held == 5
