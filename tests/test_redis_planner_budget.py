"""What the planner takes from the plan and the fleet's budget gives back (against a real
redis-server): a source chosen again while its crawl is under way keeps its due time, and a
request robots.txt forbade gives its token back to the fleet's budget, not to a scheduler
nobody reads."""

from __future__ import annotations

from scrapy_echo.distributed.request_ids import source_id
from scrapy_echo.distributed.store_messages import Exchange
from tests.test_redis_faults import planning_worker


def test_a_source_chosen_again_while_under_way_keeps_its_due_time(redis_url) -> None:
    source = "http://a.test/"
    worker = planning_worker(redis_url, ECHO_SOURCES=source, ECHO_CRAWL_RATE=10.0)
    try:
        planner, state = worker.planner, worker.runtime.state
        first = planner.choose(0, 1000.0)
        assert [rid for rid, *_ in first] == [source_id(source)]
        assert state.last_crawl[0] == 1000.0  # dispatched: not due again while under way
        # The only source, chosen again before its crawl is reported: nothing is queued,
        # and its crawl time stays that of the crawl under way (it was moved to 1005).
        assert planner.choose(0, 1005.0) == []
        assert state.last_crawl[0] == 1000.0
    finally:
        worker.io.stop()


def test_a_refund_gives_the_fleet_budget_its_token_back(redis_url) -> None:
    rate = 2.0
    worker = planning_worker(redis_url, ECHO_CRAWL_RATE=rate)
    try:
        assert worker.runtime.refund == worker.refund  # (wired to the fleet's budget)
        store, options = worker.store, worker._exchange_options()
        store.push(worker.token, [(f"p:{i}", float(i), "{}", "") for i in range(20)])
        leased = len(store.exchange(Exchange(want=20), **options).leased)
        assert 1 <= leased <= options["burst"] + 1  # the burst, then one per 1/rate s
        assert store.exchange(Exchange(want=20), **options).leased == []
        worker.refund()  # robots.txt forbade one of them: never sent
        batch, worker.outbox = worker.outbox, Exchange(want=20)
        batch.want = 20
        again = store.exchange(batch, **options).leased
        # One token back (at most one more came with the time the round trips took).
        assert 1 <= len(again) <= 1 + round(rate * 0.2), again
        assert worker.crawler.stats.get_value("echo/scheduler/refunded") == 1
    finally:
        worker.io.stop()


def test_a_refund_that_did_not_reach_redis_is_sent_again() -> None:
    batch = Exchange(refunds=2)
    later = Exchange(refunds=1)
    later.put_back(batch)
    assert later.refunds == 3
