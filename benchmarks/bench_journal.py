"""The JOBDIR journal's cost: what it adds to each event on the reactor, what its syncs cost on
the writer's thread, how large it grows, and the reactor's longest stall while it writes.

A real Twisted reactor applies made-up crawl events at a steady rate: 50 hubs listing their
latest 40 articles, three new ones per crawl, each then fetched (a source crawl and three
pages fetched: four events). At each rate, in one run, the same events go through the core:

- without a journal (the baseline), and with one (each event also listed for the writer,
  written, flushed and synced every ``ECHO_JOURNAL_INTERVAL``, 0.5 s, on a thread);
- reactor: the time applying an event takes on the reactor, and journaling it (its JSON
  line encoded and listed), and the ratio of the two together to applying alone;
- writer: syncs per second, the time a batch takes on its thread (encoding, write, fsync)
  and fsync's own share, the writer's share of a core;
- size: bytes per event, and the journal's size after a checkpoint period (60 s) at that rate;
- stall: the longest gap of a 2 ms heartbeat, with the journal and without;
- replay: what a restart takes to apply the journal again, an event and a whole period.

Run: python benchmarks/bench_journal.py [--rates 10,100,1000] [--seconds 5] [--dir DIR]
(``--dir``: where the journal is written, the disk a JOBDIR would be on; a temporary
directory by default.)
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twisted.internet import defer, reactor, task

from scrapy_echo.core import CrawlCore
from scrapy_echo.core.events import Event, PageFetched, SourceFetched
from scrapy_echo.crawler.journal import Journal, segment_name
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings

HUBS, LISTED, NEW = 50, 40, 3
INTERVAL = 0.5  # ECHO_JOURNAL_INTERVAL's default
PERIOD = 60.0  # ECHO_CHECKPOINT_INTERVAL's default


def crawl_events(start: float) -> Iterator[Event]:
    """Endless events: hubs crawled in turn, each showing its latest articles, three new."""
    published = [LISTED] * HUBS
    t = start
    while True:
        for hub in range(HUBS):
            url = f"https://news{hub % 10}.example/section/{hub}/"
            published[hub] += NEW
            latest = range(published[hub] - 1, published[hub] - 1 - LISTED, -1)
            links = tuple((f"{url}{i}.html", t - 10.0) for i in latest)
            t += 0.01
            yield SourceFetched(url, t, links, f'"{hub}-{published[hub]}"')
            for i in latest[:NEW]:
                t += 0.01
                yield PageFetched(f"{url}{i}.html", url, t - 10.0, t)


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


class Timed:
    """Total time and calls of a function, wrapped."""

    def __init__(self, function: Any) -> None:
        self.function = function
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.function(*args)
        finally:
            self.seconds += time.perf_counter() - started
            self.calls += 1


async def crawl_for(
    rate: float, seconds: float, journal: Journal | None
) -> tuple[float, int, float]:
    """Apply events at ``rate`` for ``seconds``: reactor seconds spent applying them, how many,
    the longest heartbeat gap."""
    core = CrawlCore(SimSettings(crawl_rate=1.0, backlog="skip"), make_policy("echo-newpages"))
    events = crawl_events(time.time())
    spent, applied, owed = 0.0, 0, 0.0

    def tick() -> None:
        nonlocal spent, applied, owed
        owed += rate * 0.01
        started = time.perf_counter()
        while owed >= 1.0:
            event = next(events)
            for page in core.apply(event):
                core.queue(page)
            if journal is not None:
                journal.record(event)
            applied += 1
            owed -= 1.0
        spent += time.perf_counter() - started

    for _ in range(HUBS):  # the hubs' first crawls: recorded only, not timed
        core.apply(next(events))
    beat = Heartbeat()
    feed = task.LoopingCall(tick)
    feed.start(0.01)
    flush = task.LoopingCall(journal.flush) if journal is not None else None
    if flush is not None:
        flush.start(INTERVAL, now=False)
    await task.deferLater(reactor, seconds, lambda: None)
    feed.stop()
    if flush is not None:
        flush.stop()
        await task.deferLater(reactor, 0.1, lambda: None)  # (its last batch)
    beat.loop.stop()
    return spent, applied, beat.longest


async def run(args: argparse.Namespace) -> None:
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-journal-"))
    base.mkdir(parents=True, exist_ok=True)
    print(f"journal written to {base}; heartbeat 2 ms")
    for rate in (float(r) for r in args.rates.split(",")):
        spent, applied, stall = await crawl_for(rate, args.seconds, None)
        without = spent / applied * 1e6
        directory = base / f"rate-{rate:g}"
        journal = Journal(directory)
        writes = Timed(journal._write)
        journal._write = writes  # type: ignore[method-assign]
        records = Timed(journal.record)
        journal.record = records  # type: ignore[method-assign]
        fsync = os.fsync
        syncs = Timed(fsync)
        os.fsync = syncs
        try:
            spent, applied, stall_with = await crawl_for(rate, args.seconds, journal)
        finally:
            os.fsync = fsync
        journal.close()
        recording = records.seconds / records.calls * 1e6
        # A restart replays what was written, on a state without it (the first crawls aside).
        fresh = CrawlCore(SimSettings(crawl_rate=1.0, backlog="skip"), make_policy("echo-newpages"))
        events = crawl_events(time.time())
        for _ in range(HUBS):
            fresh.apply(next(events))
        started = time.perf_counter()
        replayed = Journal(directory).replay(fresh, 0).events
        replay_us = (time.perf_counter() - started) / replayed * 1e6
        size = (directory / segment_name(0)).stat().st_size
        per_event = size / journal.records
        batch_ms = writes.seconds / max(1, writes.calls) * 1000
        sync_ms = syncs.seconds / max(1, syncs.calls) * 1000
        print(
            f"{rate:g} events/s, {args.seconds:g} s ({applied} events): on the reactor "
            f"{without:.1f} us applying an event, {recording:.1f} us journaling it "
            f"(ratio {(without + recording) / without:.3f}); "
            f"writer: {journal.syncs / args.seconds:.1f} syncs/s, "
            f"{batch_ms:.2f} ms a batch of which fsync {sync_ms:.2f} ms, "
            f"{writes.seconds / args.seconds * 100:.2f}% of a core; {per_event:.0f} B an event, "
            f"{per_event * rate * PERIOD / 2**20:.1f} MiB after a {PERIOD:g} s checkpoint "
            f"period; longest stall {stall * 1000:.1f} ms without, {stall_with * 1000:.1f} ms "
            f"with; replayed at a restart in {replay_us:.0f} us an event, "
            f"{replay_us * rate * PERIOD / 1e6:.1f} s for a whole period"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="10,100,1000", help="events per second")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--dir", default=None, help="where to write (a JOBDIR's disk)")
    args = parser.parse_args()
    task.react(lambda _: defer.ensureDeferred(run(args)))


if __name__ == "__main__":
    main()
