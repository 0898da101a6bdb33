"""Parity, third driver: the Redis planner decides as the live scheduler and the simulator.

The trace of ``test_parity.py`` is replayed slot by slot through a worker holding the planner
lease on a real redis-server: at each slot the planner is asked for one request (the queue
holds the rest of its target), queues it, a second worker leases it and answers with what the
trace's web shows then, and its report reaches the planner as every worker's does (the events
stream). The planner drives the same :class:`~scrapy_echo.core.crawl.CrawlCore` as the other
two drivers, so it must fetch the same things in the same order.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import pytest

from scrapy_echo.core.events import PageFetched, SourceFetched
from scrapy_echo.distributed.scheduler import DistributedScheduler
from scrapy_echo.distributed.store_messages import Exchange
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings, TraceWeb, simulate
from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.trace import Trace
from tests.test_parity import RATE, Clock, SlotInputs
from tests.test_redis_faults import open_worker


@pytest.fixture(scope="module")
def parity_trace() -> Trace:
    return synthesize(SynthParams(sources=40, days=1.5, warmup_days=0.5, seed=3))  # (test_parity's)


def _exchange(worker: DistributedScheduler, want: int = 0, acks: tuple[str, ...] = ()) -> Any:
    """One round trip of ``worker``'s: its events out, ``acks``, a lease of ``want`` (the
    budget is the planner's here: the slots are the test's clock, not Redis's)."""
    batch, worker.outbox = worker.outbox, Exchange()
    batch.want, batch.acks = want, list(acks)
    return worker.store.exchange(batch, **{**worker._exchange_options(), "rate": 0.0})


def _planner_reads(worker: DistributedScheduler, now: float) -> None:
    """The planner's part of a round: the events since its last, applied."""
    planner = worker.planner
    polled = worker.store.poll(
        worker.token, planner.term, planner.lease_ms(), planner.last_event, 10_000,
        pushed=planner.pushed,
    )  # fmt: skip
    planner.apply(polled.events, polled.sources, now)


def redis_decisions(trace: Trace, policy: str, redis_url: str) -> list[tuple[float, str, str]]:
    web = TraceWeb(trace)
    settings = {
        "ECHO_SOURCES": ",".join(web.source_urls),
        "ECHO_CRAWL_RATE": RATE,
        "ECHO_POLICY": policy,
        "ECHO_POLITENESS": False,
    }
    prefix = f"t{uuid.uuid4().hex[:8]}"
    planner_worker = open_worker(redis_url, prefix, **settings)
    planner_worker._closing = True  # its round trips are the test's too
    clock = Clock()
    runtime = planner_worker.runtime
    runtime.clock = clock  # (before it takes over: its state is dated by the trace's clock)
    planner = planner_worker.planner
    planner.term = 1
    planner.take_over(planner.load(None, planner.begin_loading()))
    planner_worker.store.acquire_solver(planner_worker.token, 60_000)
    fetcher = open_worker(redis_url, prefix, **settings)
    fetcher._closing = True
    config = runtime.config
    slots = SlotInputs(trace, web, runtime)
    decisions: list[tuple[float, str, str]] = []
    target = max(2, math.ceil(RATE * config.redis_queue_ahead))
    try:
        _exchange(planner_worker)  # the sources it was started with, as events
        _planner_reads(planner_worker, 0.0)
        runtime.replan()  # (the first re-solve with the sources, at 0, as the others')
        for k in range(math.floor(trace.duration * RATE)):
            clock.now = now = k / RATE
            slots.tick(now)
            chosen = planner.choose(target - 1, now)  # one request: the rest of the target waits
            if not chosen:
                continue
            added, _, _ = planner_worker.store.push_checked(planner_worker.token, chosen)
            assert added == len(chosen) == 1, chosen
            reply = _exchange(fetcher, want=1)
            ((member, payload),) = reply.leased
            request = fetcher.decode(payload)
            echo = request.meta["echo"]
            kind = echo["kind"]
            if kind == "source":
                source = echo["source"]
                decisions.append((now, kind, echo["url"]))
                before = runtime.state.sources[source].last_fetched
                shown = web.shown(source, before, now)
                fetcher._send_event(SourceFetched(echo["url"], now, shown))
            else:
                page = web.page_ids[request.url]
                decisions.append((now, kind, request.url))
                digest = web.digest(page, now) if runtime.core.refreshing else None
                fetcher._send_event(
                    PageFetched(request.url, echo["source_url"], float(echo["appeared"]), now,
                                digest=digest, refresh=kind == "refresh")
                )  # fmt: skip
            _exchange(fetcher, acks=(member,))
            _planner_reads(planner_worker, now)
    finally:
        planner_worker.io.stop()
        fetcher.io.stop()
    return decisions


@pytest.mark.parametrize("policy", ["echo-newpages", "echo-paper"])
def test_the_redis_planner_decides_as_the_simulator(
    parity_trace: Trace, policy: str, redis_url: str
) -> None:
    trace = parity_trace
    replayed: list[tuple[float, str, str]] = []
    replay = simulate(trace, make_policy(policy), SimSettings(crawl_rate=RATE), decisions=replayed)
    planned = redis_decisions(trace, policy, redis_url)
    kinds = {kind for _, kind, _ in replayed}
    assert {"source", "page"} <= kinds
    assert replay.page_crawls > 50
    if policy == "echo-newpages":
        assert "refresh" in kinds
    first_difference = next(
        (i for i, (a, b) in enumerate(zip(planned, replayed, strict=False)) if a != b), None
    )
    assert first_difference is None, (
        first_difference,
        planned[first_difference],
        replayed[first_difference],
    )
    assert len(planned) == len(replayed)
