"""Requests Redis set aside in ``dead`` after they crashed every worker that took them: what
the planner makes of them (against a real redis-server)."""

from __future__ import annotations

from scrapy_echo.core.events import PageFetched
from scrapy_echo.distributed.request_ids import refresh_id, source_id
from tests.test_redis_faults import planning_worker


def test_a_source_set_aside_in_dead_is_not_queued_again_but_counts_as_failed(redis_url) -> None:
    source = "http://a.test/"
    worker = planning_worker(redis_url, ECHO_SOURCES=source)
    try:
        planner, store = worker.planner, worker.store
        rid = source_id(source)
        store.client.hset(store.keys["dead"], rid, b"e|1|{}")  # it crashed every worker
        added, dead, _ = store.push_checked(worker.token, [(rid, 1.0, "{}"), ("p:1", 2.0, "{}")])
        assert (added, dead) == (1, [rid])
        assert store.client.hexists(store.keys["req"], rid) == 0  # not queued again
        planner.set_aside(dead, 1000.0)
        assert worker.runtime.state.sources[0].failures == 1  # it backs off, then retires
        assert worker.crawler.stats.get_value("echo/planner/set_aside/source") == 1
    finally:
        worker.io.stop()


def test_a_page_whose_refetch_is_set_aside_in_dead_leaves_the_refresh_lane(redis_url) -> None:
    # A refetch's id is the same for every refetch of its page, and Redis refuses it while it
    # is in dead: the page leaves the lane rather than spend a refresh slot at every due time.
    source, page = "http://a.test/", "http://a.test/1"
    worker = planning_worker(redis_url, ECHO_SOURCES=source, ECHO_REFRESH_SHARE=0.5)
    try:
        planner, store = worker.planner, worker.store
        worker.runtime.apply(PageFetched(page, source, 900.0, 1000.0, (), "aaaa", False))
        lane = worker.runtime.state.refresh
        (key,) = lane.pages
        lane.pages[key].interval = 10.0
        lane._push(key, lane.pages[key], 2000.0)
        rid = refresh_id(page)
        chosen = [entry for entry in planner.choose(0, 2000.0) if entry[0] == rid]
        assert chosen, "the due refetch was queued"
        store.client.hset(store.keys["dead"], rid, b"e|1|{}")  # it crashed every worker
        added, dead, _ = store.push_checked(worker.token, chosen)
        assert (added, dead) == (0, [rid])
        planner.set_aside(dead, 2000.0)
        assert key not in lane.pages
        assert worker.crawler.stats.get_value("echo/planner/set_aside/refresh") == 1
        assert not [e for e in planner.choose(0, 9000.0) if e[0] == rid]
    finally:
        worker.io.stop()
