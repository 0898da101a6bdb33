"""A planner taking over a saved state it cannot use, against a real redis-server: a state no
build can read is kept aside (never saved over), a newer build's state is left for a worker
that reads it, a take-over that fails gives the lease back; and a save cut short leaves
nothing behind for long."""

from __future__ import annotations

import time
import uuid

import pytest
import pytest_twisted
import redis
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from scrapy_echo.core import codec
from scrapy_echo.core import snapshot as snapshots
from scrapy_echo.distributed.store import ASIDE_KEPT, SNAPSHOT_BLOCK, RedisStore
from tests.test_redis_faults import open_worker


async def _redis_thread_done(worker) -> None:
    """Wait until what the worker queued on its Redis thread so far has run."""
    await worker.io.run(lambda: None)


def _taking_over(redis_url: str, saved: bytes | None):
    """A worker that just took the planner's lease over ``saved`` (None: nothing saved),
    and what it loaded."""
    worker = open_worker(redis_url, f"t{uuid.uuid4().hex[:8]}", ECHO_SOURCES="http://a.test/")
    worker._closing = True  # no round trips of its own: the test drives it
    store = worker.store
    try:
        assert store.acquire_solver(worker.token, 60_000) == 1
        assert saved is None or store.save_snapshot(worker.token, saved, "5-0")
    except BaseException:
        worker.io.stop()
        raise
    planner = worker.planner
    planner.term = 1
    loaded = planner.load(store.load_snapshot(), planner.begin_loading())
    return worker, store, planner, loaded


@pytest_twisted.ensureDeferred
async def test_a_state_no_build_reads_is_kept_aside_and_the_crawl_starts_from_its_sources(
    redis_url,
) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000  # the decoder recurses out of its depth
    worker, store, planner, loaded = _taking_over(redis_url, deep)
    try:
        assert loaded.error is not None and "Recursion" in loaded.error
        planner.take_over(loaded)
        await _redis_thread_done(worker)
        assert planner.active and worker.runtime.holds_state  # planning, from the sources
        assert len(worker.runtime.state.sources) == 1
        assert store.client.get(store.keys["state"]) is None  # nothing to save over
        (aside,) = store.client.keys(f"{store.keys['state']}:unreadable:*[0-9]")
        assert store.client.get(aside) == deep  # the only copy, kept for its owner
        assert store.client.hget(aside + b":snapshot", "event") == b"5-0"
        # Kept for its owner to look at, for a while: set aside again and again, unreadable
        # states would pile up in Redis for good.
        kept = ASIDE_KEPT * 1000
        assert 0.99 * kept < store.client.pttl(aside) <= kept
        assert 0.99 * kept < store.client.pttl(aside + b":snapshot") <= kept
        assert worker.crawler.stats.get_value("echo/redis/rejected/snapshot") == 1
        # The fresh state's first save goes where the unreadable one was.
        assert store.save_snapshot(worker.token, b"fresh", "6-0")
        assert store.client.get(aside) == deep
    finally:
        worker.io.stop()


@pytest_twisted.ensureDeferred
async def test_a_newer_builds_state_is_left_for_a_worker_that_reads_it(redis_url) -> None:
    newer = codec.dumps({"format": snapshots.FORMAT, "version": snapshots.VERSION + 1})
    worker, store, planner, loaded = _taking_over(redis_url, newer)
    try:
        assert loaded.newer is not None and loaded.error is None
        planner.take_over(loaded)
        await _redis_thread_done(worker)
        assert not planner.active and not worker.runtime.holds_state
        assert store.client.get(store.keys["solver"]) is None  # the lease given back at once
        assert store.load_snapshot() == (newer, "5-0")  # the state untouched
        assert not planner.try_acquire(worker.clock())  # and not taken again straight away
        assert worker.crawler.stats.get_value("echo/redis/planner_newer_state") == 1
    finally:
        worker.io.stop()


@pytest_twisted.ensureDeferred
async def test_a_take_over_that_fails_gives_the_lease_back(redis_url) -> None:
    worker, store, planner, loaded = _taking_over(redis_url, None)
    try:

        def failing_replan(*_: object) -> None:
            raise RuntimeError("a bug in the first re-solve")

        worker.runtime.replan = failing_replan  # type: ignore[method-assign]
        taking: Deferred[None] = Deferred()
        taking.addCallback(lambda _: planner.take_over(loaded))
        taking.addErrback(worker.planner_round._load_failed)
        reactor.callLater(0, taking.callback, None)  # type: ignore[attr-defined]
        await taking
        await _redis_thread_done(worker)
        assert not planner.active
        assert store.client.get(store.keys["solver"]) is None
        assert worker.crawler.stats.get_value("echo/redis/planner_take_over_failed") == 1
    finally:
        worker.io.stop()


def test_a_save_cut_short_expires_from_its_first_block(redis_url) -> None:
    store = RedisStore(redis.Redis.from_url(redis_url), f"test:{uuid.uuid4().hex}")
    store.acquire_solver("A", 60_000)
    staged = f"{store.keys['state']}:staged:A"

    class Cut(Exception):
        pass

    appended = []
    real_pipeline = store.client.pipeline

    def pipeline(*args, **kwargs):
        pipe = real_pipeline(*args, **kwargs)
        execute = pipe.execute

        def execute_then_die(*a, **k):
            result = execute(*a, **k)
            appended.append(time.time())
            if len(appended) == 2:
                raise Cut  # the planner dies mid-upload
            return result

        pipe.execute = execute_then_die
        return pipe

    store.client.pipeline = pipeline  # type: ignore[method-assign]
    with pytest.raises(Cut):
        store.save_snapshot("A", b"x" * (3 * SNAPSHOT_BLOCK), "1-0")
    ttl = store.client.pttl(staged)
    assert 0 < ttl <= 600_000, ttl  # the part uploaded goes away on its own
    assert store.client.strlen(staged) == 2 * SNAPSHOT_BLOCK
