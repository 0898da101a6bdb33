"""A planner whose Redis lost its data while another worker took the emptied lease: it keeps its
state and takes the lease back (against a real redis-server)."""

from __future__ import annotations

import time
from typing import Any

from scrapy_echo.core.events import SourceFetched
from scrapy_echo.distributed.store_messages import Pushed
from tests.test_redis_faults import planning_worker


def test_a_push_refused_by_a_worker_holding_the_emptied_lease_does_not_lose_the_state(
    redis_url,
) -> None:
    worker = planning_worker(redis_url, ECHO_SOURCES="http://a.test/")
    try:
        planner, store, stats = worker.planner, worker.store, worker.crawler.stats
        assert store.client.get(store.keys["solver"]) == worker.token.encode()
        # Redis restarted without its data, and another worker took the empty lease at once.
        store.client.delete(*store.client.keys(f"*{store.prefix}*"))
        assert store.acquire_solver("another-worker", 60_000) == 1
        # The planner's next queueing is refused: it is not the lease holder.
        added = store.push_checked(worker.token, [("p:1", 1.0, "{}")]).added
        assert added < 0
        worker.planner_round._pushed(Pushed(added, [], 0))
        assert planner.active and worker.runtime.holds_state  # (it stepped down here before)
        assert stats.get_value("echo/redis/refused_not_holder") == 1
        # Its renewal finds its term gone from the log: Redis lost its data, not a take-over.
        polled = store.poll(worker.token, planner.term, planner.lease_ms(), "0-0", 10)
        worker.planner_round.handle("poll", (polled, None, {}))
        assert planner.term == 2
        assert stats.get_value("echo/redis/planner_regained") == 1
        assert store.client.get(store.keys["solver"]) == worker.token.encode()
    finally:
        worker.io.stop()


def test_a_push_refused_after_a_real_take_over_ends_the_term_at_the_renewal(redis_url) -> None:
    worker = planning_worker(redis_url, ECHO_SOURCES="http://a.test/")
    try:
        planner, store = worker.planner, worker.store
        # The lease ran out (the worker stalled) and another worker took it, as term 2.
        store.client.delete(store.keys["solver"])
        assert store.acquire_solver("another-worker", 60_000) == 2
        worker.planner_round._pushed(Pushed(-1, [], 0))
        assert planner.active  # until its renewal says whose lease it is
        polled = store.poll(worker.token, planner.term, planner.lease_ms(), "0-0", 10)
        worker.planner_round.handle("poll", (polled, None, {}))
        assert not planner.active and not worker.runtime.holds_state
        assert store.client.get(store.keys["solver"]) == b"another-worker"
    finally:
        worker.io.stop()


def test_a_redis_back_from_an_older_copy_gets_the_pages_it_lost_queued_again(redis_url) -> None:
    """Redis restarted from a snapshot older than the planner's last pushes (or a replica
    was promoted before it caught up): it still knows the planner's term, so only the
    planner's push count, lower than Redis last answered, tells it the queue lost pages."""
    source = "http://a.test/"
    worker = planning_worker(redis_url, ECHO_SOURCES=source, ECHO_CRAWL_RATE=10)
    try:
        planner, store, runtime = worker.planner, worker.store, worker.runtime
        client, now = store.client, runtime.clock()
        runtime.apply(SourceFetched(source, now - 60, ()))  # the first crawl: what is there
        links = tuple((f"{source}story/{i}", None) for i in range(6))

        def push(chosen: list[Any]) -> None:
            worker.planner_round._pushed(store.push_checked(worker.token, chosen))

        runtime.found(runtime.apply(SourceFetched(source, now, links[:3])))
        push([entry for entry in planner.choose(0, now) if entry[0].startswith("p:")])
        older = {key: client.dump(key) for key in client.keys(f"{store.prefix}:*")}
        runtime.found(runtime.apply(SourceFetched(source, now + 1, links[3:])))
        push([entry for entry in planner.choose(0, now + 1) if entry[0].startswith("p:")])
        queued = set(planner.queued_pages)
        assert len(queued) == 6
        # Redis comes back from the older copy: the last three pages are gone from it.
        client.delete(*client.keys(f"{store.prefix}:*"))
        for key, value in older.items():
            client.restore(key, 0, value)
        assert len({rid.decode() for rid in client.hkeys(store.keys["req"])}) == 3
        polled = store.poll(worker.token, planner.term, planner.lease_ms(), "0-0", 10)
        worker.planner_round.handle("poll", (polled, None, {}))
        assert worker.crawler.stats.get_value("echo/redis/went_back") == 1
        assert planner.term == 1  # the same term: Redis knew it

        # That round queued them again (its push runs on the worker's Redis thread).
        def stored() -> set[str]:
            return {rid.decode() for rid in client.hkeys(store.keys["req"])}

        deadline = time.monotonic() + 10
        while not queued <= stored() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert queued <= stored()
        assert client.zcard(store.keys["queue"]) == len(stored())  # each once
        # The next rounds see the count grow again: nothing more is queued twice.
        polled = store.poll(worker.token, planner.term, planner.lease_ms(), "0-0", 10)
        worker.planner_round.handle("poll", (polled, None, {}))
        assert worker.crawler.stats.get_value("echo/redis/went_back") == 1
    finally:
        worker.io.stop()
