"""Bounded state at scale: reactor stalls while a JOBDIR checkpoint is saved, and memory per
remembered link, with 10 M seen links and 100 k sources.

A real Twisted reactor runs a 2 ms heartbeat; the longest gap between two beats is the longest
stall. Measured, in one run:

- idle: the heartbeat alone (the machine's own noise);
- save: ``Checkpointer.save`` as a crawl runs it (captured on the reactor, written on a thread);
- merge: the seen links' periodic merge and expiry, on a thread as a crawl runs it;
- baseline: the same checkpoint taken and written on the reactor (``save_now``, what every save
  did before; a crawl now does it only at close).

Memory: what the 10 M fingerprints take in the expiring set, against a plain Python set of
the same fingerprints (what the crawl held before).

Run: python benchmarks/bench_state.py [--links 10000000] [--sources 100000] [--saves 3]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import scrapy
from scrapy.utils.test import get_crawler
from twisted.internet import defer, reactor, task
from twisted.internet.threads import deferToThread

from scrapy_echo.core.pages import NewPage
from scrapy_echo.core.seen import FingerprintSet
from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.scheduler import EchoScheduler

DAY = 86400.0
TTL = 30 * DAY
NOW = 1.8e9


class Spider(scrapy.Spider):
    name = "bench"

    def parse(self, response: Any) -> Any:
        return []


def rss() -> int:
    """Resident memory of this process, bytes."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096


def fingerprints(count: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**63, count, dtype=np.uint64)


def filled_set(marks: np.ndarray) -> FingerprintSet:
    """Links seen over the last ``TTL`` (evenly), as a month-old crawl holds them: the last
    period's in the young set, the rest in the arrays."""
    seen_at = np.linspace(NOW - TTL, NOW, marks.size)
    out = FingerprintSet(TTL)
    young = seen_at >= NOW - out.period
    out = FingerprintSet.restore(TTL, marks[~young], seen_at[~young], NOW)
    recent = marks[young].tolist()
    for at in range(0, len(recent), 2000):  # as source crawls show them
        out.add_new(recent[at : at + 2000], NOW)
    return out


def scheduler_with_state(
    jobdir: str, links: np.ndarray, sources: int, *, pages: int = 10_000
) -> EchoScheduler:
    crawler = get_crawler(Spider, {"ADDONS": {"scrapy_echo.Addon": 0}, "JOBDIR": jobdir})
    crawler.spider = crawler._create_spider()
    runtime = EchoRuntime.of(crawler)
    runtime.clock = lambda: NOW
    scheduler = EchoScheduler.from_crawler(crawler)
    scheduler.attach(crawler.spider)
    state = runtime.state
    for i in range(sources):
        state.add_source(f"https://h{i % 2000}.example/section/{i}/")
    for crawl in range(7):  # a full crawl history per source
        for i in range(sources):
            state.learner.record_crawl(i, NOW - (7 - crawl) * 600.0, crawl % 3)
    state.seen = filled_set(links)
    state.fetched = filled_set(links[: links.size // 5])
    for i in range(pages):  # pages waiting
        url = f"https://h.example/a/{i}"
        source = i % sources
        page = NewPage(url, source, state.sources[source].url, NOW - 60, (NOW - 120, NOW - 60),
                       NOW - 30)  # fmt: skip
        state.frontier.push(source, page, appeared=NOW - 60, discovered=NOW - 30)
    for k in range(20):  # report samples
        state.record(NOW - k * 1800.0, budget=1.0, omega=1.0, kept=sources, dropped=0)
    return scheduler


class Heartbeat:
    """The longest gap between beats of a 2 ms loop on the reactor."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.longest = 0.0
        self.loop = task.LoopingCall(self.beat)
        self.loop.start(0.002)

    def beat(self) -> None:
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.last)
        self.last = now

    def reset(self) -> None:
        self.last, self.longest = time.perf_counter(), 0.0


async def measure(scheduler: EchoScheduler, saves: int) -> dict[str, list[float]]:
    from twisted.internet.defer import Deferred

    def sleep(seconds: float) -> Deferred[None]:
        return task.deferLater(reactor, seconds, lambda: None)

    beat = Heartbeat()
    out: dict[str, list[float]] = {"idle": [], "save": [], "save_s": [], "merge": [], "base": []}
    checkpointer, state = scheduler.checkpointer, scheduler.runtime.state
    for _ in range(saves):
        await sleep(0.2)
        beat.reset()
        await sleep(1.0)
        out["idle"].append(beat.longest)

        beat.reset()
        started = time.perf_counter()
        await checkpointer.save()
        out["save_s"].append(time.perf_counter() - started)
        await sleep(0.01)
        out["save"].append(beat.longest)

        # A merge after a period: the young links join the arrays, the oldest expire.
        state.seen._young_since -= state.seen.period
        jobs = state.housekeeping(NOW + state.seen.period)
        beat.reset()
        for job in jobs:
            job.done(await deferToThread(job.work))
        await sleep(0.01)
        out["merge"].append(beat.longest)

        await sleep(0.2)
        beat.reset()
        await sleep(0.005)
        checkpointer.save_now()
        await sleep(0.01)
        out["base"].append(beat.longest)
    beat.loop.stop()
    return out


def memory(links: np.ndarray) -> tuple[float, float]:
    """Bytes per link: the expiring set, and a plain Python set of the same fingerprints."""
    gc.collect()
    before = rss()
    held = filled_set(links)
    ours = (rss() - before) / links.size
    del held
    gc.collect()
    before = rss()
    plain = set(links.tolist())
    theirs = (rss() - before) / links.size
    del plain
    return ours, theirs


async def run(args: argparse.Namespace) -> None:
    links = fingerprints(args.links, seed=1)
    ours, plain = memory(links)
    print(f"memory per remembered link: {ours:.1f} B (expiring set) vs {plain:.1f} B "
          f"(Python set), ratio {ours / plain:.2f}")  # fmt: skip
    with tempfile.TemporaryDirectory() as jobdir:
        started = time.perf_counter()
        scheduler = scheduler_with_state(jobdir, links, args.sources)
        print(f"state built in {time.perf_counter() - started:.1f} s: {args.sources} sources, "
              f"{len(scheduler.runtime.state.seen)} seen links")  # fmt: skip
        # The garbage collector's full pass stalls whatever thread triggers it, for a time
        # set by the heap's objects, saved or not: measured, and done before the heartbeat.
        started = time.perf_counter()
        gc.collect()
        pause = (time.perf_counter() - started) * 1000
        print(f"a full garbage collection of this heap: {pause:.0f} ms")
        result = await measure(scheduler, args.saves)
        size = Path(str(scheduler.checkpointer.path)).stat().st_size
    med = {k: statistics.median(v) * 1000 for k, v in result.items()}
    print(f"checkpoint file: {size / 2**20:.0f} MiB; async save took {med['save_s'] / 1000:.2f} s")
    print(f"longest reactor stall, median of {args.saves} (ms): idle {med['idle']:.1f}, "
          f"during save {med['save']:.1f}, during merge {med['merge']:.1f}; "
          f"baseline (save on the reactor) {med['base']:.0f}")  # fmt: skip
    worst = max(result["save"] + result["merge"]) * 1000
    print(f"stall ratio save / baseline: {med['save'] / med['base']:.3f}; worst stall in a save "
          f"or merge {worst:.1f} ms ({'under' if worst < 100 else 'OVER'} 100 ms)")  # fmt: skip


def arguments(description: str) -> argparse.Namespace:
    """The state's size and how many saves to measure (this benchmark's and Redis's)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--links", type=int, default=10_000_000)
    parser.add_argument("--sources", type=int, default=100_000)
    parser.add_argument("--saves", type=int, default=3)
    return parser.parse_args()


def main() -> None:
    args = arguments(__doc__.splitlines()[0])
    task.react(lambda _: defer.ensureDeferred(run(args)))


if __name__ == "__main__":
    main()
