"""What users push to Redis for the planner (sources on the ``sources`` list, signals on the
``signals`` stream) is removed only by the save of a state that applied it: a planner killed
between taking it and its next save loses none of it, and its successor applies each entry
exactly once (against a real redis-server, with real planners)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest_twisted

from scrapy_echo.distributed.scheduler import DistributedScheduler
from tests.test_redis_faults import open_worker, wait_for

SOURCE = "http://a.test/"


def planner_only(redis_url: str, prefix: str) -> DistributedScheduler:
    """A worker whose planner's rounds the test runs itself (no round trips of its own), and
    that saves only when told (its first round after taking the lease, as every planner)."""
    worker = open_worker(redis_url, prefix, ECHO_SOURCES=SOURCE, ECHO_REDIS_SNAPSHOT_INTERVAL=3600)
    worker._closing = True
    if worker._round_call is not None and worker._round_call.active():
        worker._round_call.cancel()
    return worker


async def planner_round(worker: DistributedScheduler) -> None:
    """One planner round, as a worker's round trip runs it: the Redis part on the Redis
    thread, then the rest on the reactor; then any save it began."""
    what, detail = await worker.io.run(worker.planner_round.trip, time.time(), [])
    handled: Any = worker.planner_round.handle(what, detail)
    if handled is not None:
        await handled
    await wait_for(lambda: not worker.planner_round._saving)


async def take_over(worker: DistributedScheduler) -> None:
    await planner_round(worker)
    planner = worker.planner
    await wait_for(lambda: planner.active and not planner.loading and worker.runtime.holds_state)


def push(worker: DistributedScheduler, source: str) -> None:
    client, keys = worker.store.client, worker.store.keys
    client.rpush(keys["sources"], source)
    client.xadd(keys["signals"], {"url": SOURCE, "ts": str(time.time() - 5)})


def applied(worker: DistributedScheduler) -> tuple[set[str], int]:
    """The sources the worker's planner holds, and the signals it ever received."""
    state = worker.runtime.state
    return {status.url for status in state.sources}, state.signals.received


@pytest_twisted.ensureDeferred
async def test_a_planner_killed_before_its_save_loses_nothing_users_pushed(redis_url) -> None:
    prefix = f"t{uuid.uuid4().hex[:8]}"
    first = planner_only(redis_url, prefix)
    running = [first]
    try:
        await take_over(first)
        push(first, "http://b.test/")
        await planner_round(first)  # applied, and saved (its first save)
        push(first, "http://c.test/")
        await planner_round(first)  # applied, not saved
        assert applied(first) == ({SOURCE, "http://b.test/", "http://c.test/"}, 2)
        # Killed (kill -9): no last round trip, no save; its lease runs out.
        running.remove(first)
        first.io.stop()
        first.store.client.delete(first.store.keys["solver"])

        second = planner_only(redis_url, prefix)
        running.append(second)
        store = second.store
        # Redis holds exactly what the saved state did not apply: the second of each.
        assert store.client.xlen(store.keys["signals"]) == 1
        assert [f[b"url"] for _, f in store.client.xrange(store.keys["sources_taken"])] == [
            b"http://c.test/"
        ]
        await take_over(second)
        await planner_round(second)
        assert applied(second) == ({SOURCE, "http://b.test/", "http://c.test/"}, 2)
        await planner_round(second)  # read on, not again
        assert applied(second)[1] == 2
    finally:
        for worker in running:
            worker.io.stop()


def test_clicks_and_signals_pushed_on_the_planners_worker_travel_as_events(redis_url) -> None:
    # Reproduced in the code of 2026-11-29: rows pushed from Python on the planner's own
    # worker went into its state at once, and nowhere else: a planner killed before its next
    # save lost them. As events they are in the stream until a saved state has them.
    import json

    from scrapy_echo import push_clicks, push_signals
    from scrapy_echo.core.events import ClicksArrived, SignalsArrived, from_json
    from tests.test_redis_faults import planning_worker

    worker = planning_worker(redis_url, ECHO_SOURCES=SOURCE)
    try:
        assert worker.runtime.holds_state  # (the planner's worker)
        worker.outbox.events.clear()
        caught = worker.runtime.state.learner.clicks_caught
        now = worker.runtime.clock()
        assert push_clicks(worker.crawler, [{"url": SOURCE + "1", "ts": now, "clicks": 2}]) == 1
        assert push_signals(worker.crawler, [{"url": SOURCE, "ts": now}]) == 1
        sent = [from_json(json.loads(event)) for event in worker.outbox.events]
        assert [type(event) for event in sent] == [ClicksArrived, SignalsArrived]
        assert worker.runtime.state.learner.clicks_caught == caught  # not applied twice
        assert not worker.runtime.state.signals.received
    finally:
        worker.io.stop()
