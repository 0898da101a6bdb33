"""Distributed mode's saved state at scale: 10 M seen links and 100 k sources, saved to and
restored from a real redis-server (started here on a free port).

A real Twisted reactor runs a 2 ms heartbeat; the longest gap between two beats is the longest
stall. Measured, in one run:

- save: what the planner does: the state captured on the reactor, then encoded off it and
  uploaded a block at a time (``RedisStore.save_snapshot``), here both on one thread;
- baseline: the earlier build's write, the whole state in one ``HSET`` from the same thread,
  with the workers' socket timeout (5 s): its time, or how it failed;
- restore: what a new planner does: the state read a block at a time, then parsed and rebuilt
  on a thread (the reactor stalls only while the JSON parser holds the interpreter).

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

SOCKET_TIMEOUT = 5.0  # the workers' default (distributed/scheduler.py)


def sleep(seconds: float) -> Any:
    from twisted.internet import reactor

    return task.deferLater(reactor, seconds, lambda: None)


def upload(store: RedisStore, captured: snapshots.Captured) -> tuple[bool, int]:
    data = captured.to_bytes()
    return store.save_snapshot("bench", data, "1-0"), len(data)


def rebuild(runtime: Any, scheduler: Any, data: bytes) -> None:
    """What a planner taking over does off the reactor (``Planner.load``)."""
    snapshots.restore(runtime.config, snapshots.read(data), scheduler.decode)


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

        beat.reset()
        started = time.perf_counter()
        loaded = await io.run(store.load_snapshot)
        fetched = time.perf_counter() - started
        assert loaded is not None and loaded[0] == data
        parsed_at = time.perf_counter()
        await deferToThread(rebuild, runtime, scheduler, loaded[0])
        rebuilt = time.perf_counter() - parsed_at
        await sleep(0.01)
        restore_stall = beat.longest
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
    print(f"restore: read {fetched:.2f} s (blocks, on the Redis thread), parse and rebuild "
          f"{rebuilt:.2f} s (on a thread); longest reactor stall {restore_stall * 1000:.0f} ms "
          f"(once per change of planner)")  # fmt: skip


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
