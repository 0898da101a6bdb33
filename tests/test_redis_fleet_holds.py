"""A host's hold heard by one worker holds the fleet, and only that host: the planner reads
every worker's holds, queues none of the held host's requests, and does not count those it
queued before toward its queue target (against a real redis-server)."""

from __future__ import annotations

import time
from typing import Any

import pytest_twisted
from twisted.internet import defer

from scrapy_echo.core.events import PageFetched, SourceFetched
from scrapy_echo.distributed.scheduler import DistributedScheduler
from scrapy_echo.distributed.store_messages import Exchange
from tests.test_redis_faults import open_worker, planning_worker

HELD, FREE = "127.0.0.2", "127.0.0.3"
PAGES = 30  # new pages per host's hub
ROUNDS = 40
# Rate and queue ahead as in the review's reproduction: a queue target of 10 requests.
SETTINGS: dict[str, Any] = {
    "ECHO_CRAWL_RATE": 20.0,
    "ECHO_REDIS_QUEUE_AHEAD": 0.5,
    "ECHO_BACKLOG": "crawl",
}


def _hub(host: str) -> str:
    return f"http://{host}:8/hub/"


def _found(host: str, t: float) -> SourceFetched:
    links = tuple((f"http://{host}:8/a/{i}.html", None) for i in range(PAGES))
    return SourceFetched(_hub(host), t, links)


async def _leased_per_host(redis_url: str, *, hold: float) -> dict[str, int]:
    """Pages of each host a second worker leased in ``ROUNDS`` round trips in which it heard
    the HELD host ask for ``hold`` s at the second (0: no hold); "held after" counts the HELD
    host's leased from that round on."""
    sources = f"{_hub(HELD)},{_hub(FREE)}"
    planner = planning_worker(redis_url, ECHO_SOURCES=sources, **SETTINGS)
    prefix = planner.crawler.settings["ECHO_REDIS_KEY_PREFIX"]
    other = open_worker(redis_url, prefix, ECHO_SOURCES=sources, **SETTINGS)
    other._closing = True  # its round trips are the test's
    leased = {HELD: 0, FREE: 0, "held after": 0}
    try:
        now = time.time()
        for host in (HELD, FREE):  # the hubs' crawls, reported as a worker reports them
            other._send_event(_found(host, now))
        acks: list[str] = []
        for round_ in range(ROUNDS):
            if round_ == 1 and hold:  # (after the planner queued its first requests)
                # Sent on its own: a script Redis has not run yet runs after the rest of
                # its transaction (ScriptBatch), here after this round's lease.
                other.store.exchange(Exchange(holds={HELD: hold}), **other._exchange_options())
            batch, other.outbox = other.outbox, Exchange()
            batch.acks, batch.want = acks, 4
            reply = other.store.exchange(batch, **other._exchange_options())
            acks = []
            for member, payload in reply.leased:
                request = other.decode(payload)
                acks.append(member)
                if "/a/" in request.url:
                    host = request.url.split("/")[2].split(":")[0]
                    leased[host] += 1
                    leased["held after"] += host == HELD and round_ >= 1
                    source = _hub(host)
                    other._send_event(PageFetched(request.url, source, now, time.time()))
            await _planner_round(planner)
            await _sleep(0.05)
    finally:
        planner.io.stop()
        other.io.stop()
    return leased


async def _planner_round(worker: DistributedScheduler) -> None:
    """The planner's part of a round trip, as the worker's own round runs it."""
    trip = worker.planner_round.trip
    what, detail = await worker.io.run(trip, time.time(), [])
    done = worker.planner_round.handle(what, detail)
    if done is not None:
        await done


async def _sleep(seconds: float) -> None:
    from twisted.internet import reactor

    await defer.Deferred(lambda d: None).addTimeout(seconds, reactor).addErrback(lambda _: None)


@pytest_twisted.ensureDeferred
async def test_a_hold_another_worker_heard_leaves_the_other_hosts_pace(redis_url) -> None:
    # Reproduced on the build of 2026-11-29: with a hold of 6 h reported by a worker that is
    # not the planner, the queue filled with the held host's pages and nothing left.
    free_run = await _leased_per_host(redis_url, hold=0.0)
    held_run = await _leased_per_host(redis_url, hold=21_600.0)
    assert free_run[FREE] >= 10 and free_run[HELD] >= 10, free_run  # (both hosts served)
    assert held_run[FREE] >= 0.9 * free_run[FREE], (held_run, free_run)
    assert held_run["held after"] == 0, held_run
