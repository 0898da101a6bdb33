"""Distributed mode's saved state at scale: 10 M seen links and 100 k sources, saved to and
restored from a real redis-server (started here on a free port).

A real Twisted reactor runs a 2 ms heartbeat; the longest gap between two beats is the longest
stall. Measured, in one run:

- save: what the planner does: the state captured on the reactor, then encoded off it and
  uploaded a block at a time (``RedisStore.save_snapshot``), here both on one thread;
- baseline: the earlier build's write, the whole state in one ``HSET`` from the same thread,
  with the workers' socket timeout (5 s): its time, or how it failed;
- take-over: what a new planner does (a Redis-mode worker's own): the state read a block at a
  time on the Redis thread, parsed a frame at a time, rebuilt and planned on a thread
  (``Planner.load``), then installed on the reactor (``Planner.take_over``: the sources added,
  the plan taken); and one more re-solve, for comparison.

Run: python benchmarks/bench_redis_state.py [--links 10000000] [--sources 100000] [--saves 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis
from twisted.internet import defer, task
from twisted.internet.threads import deferToThread

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_state import (  # noqa: E402
    Heartbeat,
    arguments,
    fingerprints,
    scheduler_with_state,
)
from scrapy_echo.core import snapshot as snapshots  # noqa: E402
from scrapy_echo.distributed.iothread import RedisThread  # noqa: E402
from scrapy_echo.distributed.store import RedisStore, key_base  # noqa: E402
from tests.conftest import RedisServer  # noqa: E402
from tests.test_redis_faults import open_worker  # noqa: E402

SOCKET_TIMEOUT = 5.0  # the workers' default (distributed/scheduler.py)


def sleep(seconds: float) -> Any:
    from twisted.internet import reactor

    return task.deferLater(reactor, seconds, lambda: None)


def upload(store: RedisStore, captured: snapshots.Captured) -> tuple[bool, int]:
    blocks = captured.to_blocks()
    return store.save_snapshot("bench", blocks, "1-0"), sum(len(block) for block in blocks)


def whole(client: redis.Redis, key: str, data: bytes) -> str:
    started = time.perf_counter()
    try:
        client.hset(key, mapping={"state": data, "event": "1-0"})
    except redis.RedisError as exc:
        return f"failed after {time.perf_counter() - started:.1f} s ({type(exc).__name__})"
    return f"{time.perf_counter() - started:.2f} s"


async def run(args: argparse.Namespace, server: RedisServer) -> None:
    client = redis.Redis(port=server.port, socket_timeout=SOCKET_TIMEOUT)
    store = RedisStore(client, key_base("bench", "state"))
    store.acquire_solver("bench", 3_600_000)
    io = RedisThread()
    io.start()
    links = fingerprints(args.links, seed=1)
    with tempfile.TemporaryDirectory() as jobdir:
        scheduler = scheduler_with_state(jobdir, links, args.sources)
        runtime = scheduler.runtime
        print(f"state: {args.sources} sources, {len(runtime.state.seen)} seen links")
        beat = Heartbeat()
        saves: list[float] = []
        stalls: list[float] = []
        size = 0
        for _ in range(args.saves):
            await sleep(0.3)
            beat.reset()
            started = time.perf_counter()
            captured = snapshots.capture(runtime.core, runtime.clock(), scheduler.encode)
            saved, size = await io.run(upload, store, captured)
            assert saved, "the save was refused"
            saves.append(time.perf_counter() - started)
            await sleep(0.01)
            stalls.append(beat.longest)
        data = captured.to_bytes()
        baseline = [await io.run(whole, client, f"{store.prefix}:whole", data)]

        taken = await take_over(server, data, beat)
        beat.loop.stop()
    io.stop()
    worst = max(stalls) * 1000
    print(f"saved state: {size / 2**20:.0f} MiB in blocks of 4 MiB")
    print(f"save (capture on the reactor, encode and upload off it): median "
          f"{statistics.median(saves):.2f} s of {args.saves}; longest reactor stall median "
          f"{statistics.median(stalls) * 1000:.1f} ms, worst {worst:.1f} ms "
          f"({'under' if worst < 100 else 'OVER'} 100 ms)")  # fmt: skip
    print(f"baseline (the whole state in one HSET, socket timeout {SOCKET_TIMEOUT:g} s): "
          f"{baseline[0]}")  # fmt: skip
    loading, loading_stall, installing, replan = taken
    print(f"take-over by a worker's planner: read and rebuilt in {loading:.2f} s (Redis "
          f"thread, then a thread), longest reactor stall {loading_stall * 1000:.0f} ms "
          f"({'under' if loading_stall < 0.1 else 'OVER'} 100 ms); then on the reactor "
          f"take_over {installing * 1000:.0f} ms, its first plan made while loading (a re-solve "
          f"after it: {replan * 1000:.0f} ms)")  # fmt: skip


async def take_over(
    server: RedisServer, data: bytes, beat: Heartbeat
) -> tuple[float, float, float, float]:
    """A Redis-mode worker taking the planner's lease over the saved ``data``: the time to
    read and rebuild it (off the reactor) and the longest reactor stall meanwhile, then the
    time of ``take_over`` on the reactor (the state installed with the plan made while
    loading it)."""
    worker = open_worker(server.url, "takeover", ECHO_SOURCES="https://h0.example/section/0/")
    worker._closing = True  # no round trips of its own: this drives its planner
    if worker._round_call is not None and worker._round_call.active():
        worker._round_call.cancel()
    store, planner = worker.store, worker.planner
    try:
        planner.term = await worker.io.run(store.acquire_solver, worker.token, 3_600_000)
        assert await worker.io.run(store.save_snapshot, worker.token, data, "1-0")
        await sleep(0.3)
        beat.reset()
        started = time.perf_counter()
        loaded = await worker.io.run(store.load_blocks)
        rebuilt = await deferToThread(planner.load, loaded, planner.begin_loading())
        assert rebuilt.state is not None, rebuilt.error
        loading = time.perf_counter() - started
        await sleep(0.01)
        loading_stall = beat.longest
        started = time.perf_counter()
        planner.take_over(rebuilt)  # on the reactor: all of it a stall
        installing = time.perf_counter() - started
        assert planner.active and worker.runtime.holds_state
        started = time.perf_counter()
        worker.runtime.replan()
        replan = time.perf_counter() - started
        return loading, loading_stall, installing, replan
    finally:
        worker.io.stop()


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    with tempfile.TemporaryDirectory() as workdir:
        server = RedisServer(Path(workdir))
        try:
            task.react(lambda _: defer.ensureDeferred(run(args, server)))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
