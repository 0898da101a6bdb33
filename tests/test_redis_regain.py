"""A planner whose Redis lost its data while another worker took the emptied lease: it keeps its
state and takes the lease back (against a real redis-server)."""

from __future__ import annotations

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
        added, _ = store.push_checked(worker.token, [("p:1", 1.0, "{}")])
        assert added < 0
        worker.planner_round._pushed((added, []))
        assert planner.active and worker.runtime.holds_state  # (it stepped down here before)
        assert stats.get_value("echo/redis/refused_not_holder") == 1
        # Its renewal finds its term gone from the log: Redis lost its data, not a take-over.
        polled = store.poll(worker.token, planner.term, planner.lease_ms(), "0-0", 10)
        worker.planner_round.handle("poll", (polled, None))
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
        worker.planner_round._pushed((-1, []))
        assert planner.active  # until its renewal says whose lease it is
        polled = store.poll(worker.token, planner.term, planner.lease_ms(), "0-0", 10)
        worker.planner_round.handle("poll", (polled, None))
        assert not planner.active and not worker.runtime.holds_state
        assert store.client.get(store.keys["solver"]) == b"another-worker"
    finally:
        worker.io.stop()
