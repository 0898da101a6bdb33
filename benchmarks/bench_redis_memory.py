"""Distributed mode's memory in Redis: bytes per item of each thing a crawl keeps there.

Starts its own redis-server on a free port, fills one crawl's keys through the store's own
round trips at two scales each, and reads ``MEMORY USAGE`` (every element counted,
``SAMPLES 0``) of the keys that hold it; the difference between the scales over the
difference in items is the cost of one more item (what the key costs empty drops out).
``INFO memory`` checks the sum. Measured:

- a request queued (``queue`` and ``req``: a new page's request as the planner queues it,
  with its ECHO meta), and one leased (``leases``, ``attempts``, ``req``);
- a page done (``done``: its id, kept ``ECHO_REDIS_DUPEFILTER_TTL``);
- an event waiting in ``events`` for the planner's next save (a page fetched; a source
  fetched with 20 links);
- the saved state (``state``) per source, per remembered link (a fifth of them fetched
  pages, as in ``bench_state.py``) and per waiting page;
- a download slot in ``owners``, ``host_next`` and ``host_delay``;
- the capped keys full: ``dead`` (10,000 requests), ``solves`` and ``solver_log`` (10,000
  lines each).

Then prints the formula (docs/distributed.rst, "Redis memory").

Run: python benchmarks/bench_redis_memory.py [--scale 20000]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import redis
import scrapy

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_state import fingerprints, scheduler_with_state  # noqa: E402
from scrapy_echo.core import snapshot as snapshots  # noqa: E402
from scrapy_echo.core.events import PageFetched, SourceFetched, to_json  # noqa: E402
from scrapy_echo.distributed.dedup import stamp  # noqa: E402
from scrapy_echo.distributed.request_ids import page_id  # noqa: E402
from scrapy_echo.distributed.store import RedisStore  # noqa: E402
from scrapy_echo.distributed.store_messages import Exchange, FleetRules, Kept  # noqa: E402
from scrapy_echo.distributed.wire import encode_request  # noqa: E402
from tests.conftest import RedisServer  # noqa: E402

NOW = 1.8e9
OPTIONS = {"lease_ms": 3_600_000, "rate": 0.0, "burst": 1.0, "plain_share": 0.5,
           "done_ttl_ms": 3_600_000_000, "max_attempts": 5}  # fmt: skip
BATCH = 1000


class Spider(scrapy.Spider):
    name = "bench"

    def parse(self, response: object) -> None:
        pass


SPIDER = Spider()


def page_url(i: int) -> str:
    return f"https://www.news{i % 500}.example/2026/11/25/world/story-{i}-a-headline-of-words.html"


def queued(n: int) -> list[tuple[str, float, str, str]]:
    """``n`` new pages as the planner queues them: id, score, JSON request, download slot."""
    out = []
    for i in range(n):
        url = page_url(i)
        source = f"https://www.news{i % 500}.example/world/"
        echo = {"kind": "page", "source": source, "appeared": NOW - 60,
                "window": [NOW - 120, NOW - 60], "discovered": NOW - 30}  # fmt: skip
        request = scrapy.Request(url, callback=SPIDER.parse, meta={"echo": echo})
        payload = encode_request(request, SPIDER, None)
        out.append((page_id(url), NOW * 1000 - 1e9 + i, payload, f"www.news{i % 500}.example"))
    return out


class Crawl:
    """One crawl's keys on the server, and what they take."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.store = RedisStore(client, f"{{bench:{uuid.uuid4().hex[:8]}}}")
        self.store.acquire_solver("planner", 3_600_000)

    def usage(self, *names: str) -> int:
        total = 0
        for name in names:
            used = self.client.memory_usage(self.store.keys[name], samples=0)
            total += int(used or 0)
        return total

    def clear(self) -> None:
        self.client.delete(*self.store.keys.values())
        self.store.acquire_solver("planner", 3_600_000)


def per_item(
    client: redis.Redis, fill: Callable[[Crawl, int], None], names: tuple[str, ...], scale: int
) -> float:
    """Bytes one more item takes in ``names``: filled to ``scale`` and ``2 * scale``."""
    sizes = []
    for n in (scale, 2 * scale):
        crawl = Crawl(client)
        fill(crawl, n)
        sizes.append(crawl.usage(*names))
        crawl.clear()
    return (sizes[1] - sizes[0]) / scale


def fill_queued(crawl: Crawl, n: int) -> None:
    requests = queued(n)
    for at in range(0, n, BATCH):
        crawl.store.push("planner", requests[at : at + BATCH])


def fill_leased(crawl: Crawl, n: int) -> None:
    fill_queued(crawl, n)
    for _ in range(0, n, BATCH):
        crawl.store.exchange(Exchange(want=BATCH), **OPTIONS)  # type: ignore[arg-type]


def fill_done(crawl: Crawl, n: int) -> None:
    ids = [page_id(page_url(i)) for i in range(n)]
    for at in range(0, n, BATCH):
        # As an ack records it: the page's id, scored by when (ms).
        crawl.client.zadd(crawl.store.keys["done"], dict.fromkeys(ids[at : at + BATCH], NOW * 1000))


def events_of(kind: str, n: int) -> list[str]:
    out = []
    for i in range(n):
        if kind == "page":
            event: object = PageFetched(page_url(i), f"https://www.news{i % 500}.example/world/",
                                        NOW - 60, NOW, digest="3f2a9c0d1e4b5a6c")  # fmt: skip
        else:
            links = tuple((page_url(i * 20 + k), NOW - 300.0) for k in range(20))
            event = SourceFetched(f"https://www.news{i % 500}.example/world/", NOW, links)
        data = stamp(to_json(event), "worker-1a2b3c4d", i + 1)  # type: ignore[arg-type]
        out.append(json.dumps(data, separators=(",", ":"), allow_nan=False))
    return out


def fill_events(kind: str) -> Callable[[Crawl, int], None]:
    def fill(crawl: Crawl, n: int) -> None:
        events = events_of(kind, n)
        for at in range(0, n, BATCH):
            crawl.store.exchange(Exchange(events=events[at : at + BATCH]), **OPTIONS)  # type: ignore[arg-type]

    return fill


def fill_hosts(crawl: Crawl, n: int) -> None:
    """``n`` download slots, each leased once by a worker (owner and turn) and its delay
    reported."""
    requests = [(f"p:{i:016x}", float(i), "{}", f"www.host{i}.example") for i in range(n)]
    fleet = FleetRules("worker-1a2b3c4d", default_delay_ms=1000, horizon_ms=300)
    for at in range(0, n, BATCH):
        crawl.store.push("planner", requests[at : at + BATCH])
        delays = {slot: 1.5 for *_, slot in requests[at : at + BATCH]}
        batch = Exchange(delays=delays, want=BATCH)
        crawl.store.exchange(batch, fleet=fleet, **OPTIONS)  # type: ignore[arg-type]


def state_size(sources: int, links: int, pages: int) -> int:
    """Bytes of the planner's saved state (stored as one string, as is)."""
    with tempfile.TemporaryDirectory() as jobdir:
        scheduler = scheduler_with_state(jobdir, fingerprints(links, seed=1), sources, pages=pages)
        runtime = scheduler.runtime
        captured = snapshots.capture(runtime.core, runtime.clock(), scheduler.encode)
        return len(captured.to_bytes())


def capped(client: redis.Redis) -> dict[str, int]:
    """What the capped keys take, full."""
    crawl = Crawl(client)
    kept = Kept()
    entries = queued(kept.dead)
    keys = crawl.store.keys
    for at in range(0, kept.dead, BATCH):
        chunk = entries[at : at + BATCH]
        client.hset(
            keys["dead"], mapping={rid: f"E|{score!r}|{slot}|{p}" for rid, score, p, slot in chunk}
        )
        client.zadd(keys["dead_since"], {rid: NOW * 1000 for rid, *_ in chunk})
    client.rpush(keys["solves"], *[f"{n} {int(NOW * 1000)}" for n in range(kept.solves)])
    client.rpush(keys["solver_log"], *[f"{n} worker-1a2b3c4d {int(NOW * 1000)}"
                                      for n in range(kept.solver_log)])  # fmt: skip
    out = {"dead": crawl.usage("dead", "dead_since"), "logs": crawl.usage("solves", "solver_log")}
    crawl.clear()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=20_000, help="items at the first scale")
    args = parser.parse_args()
    n = args.scale
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        try:
            client = redis.Redis.from_url(server.url)
            before = int(client.info("memory")["used_memory"])
            check = Crawl(client)
            fill_leased(check, n)
            fill_done(check, n)
            counted = check.usage("queue", "req", "leases", "attempts", "done")
            grown = int(client.info("memory")["used_memory"]) - before
            check.clear()
            queued_b = per_item(client, fill_queued, ("queue", "req"), n)
            leased_b = per_item(client, fill_leased, ("queue", "req", "leases", "attempts"), n)
            done_b = per_item(client, fill_done, ("done",), n)
            page_ev = per_item(client, fill_events("page"), ("events",), n)
            source_ev = per_item(client, fill_events("source"), ("events",), n // 4)
            host_b = per_item(client, fill_hosts, ("owners", "host_next", "host_delay"), n // 4)
            full = capped(client)
        finally:
            server.stop()
    base = state_size(1000, 200_000, 1000)
    per_link = (state_size(1000, 1_000_000, 1000) - base) / 800_000
    per_source = (state_size(11_000, 200_000, 1000) - base) / 10_000
    per_page = (state_size(1000, 200_000, 11_000) - base) / 10_000
    fixed = base - 1000 * per_source - 200_000 * per_link - 1000 * per_page

    print(f"checked: MEMORY USAGE {counted:,} bytes against INFO used_memory grown by {grown:,} "
          f"({n:,} requests leased, {n:,} pages done)")  # fmt: skip
    print(f"request queued (queue, req): {queued_b:.0f} bytes")
    print(f"request leased (leases, attempts, req): {leased_b:.0f} bytes")
    print(f"page done (done, the dupefilter): {done_b:.0f} bytes")
    print(f"event waiting for the next save: page fetched {page_ev:.0f} bytes, "
          f"source fetched with 20 links {source_ev:.0f} bytes")  # fmt: skip
    print(f"download slot (owners, host_next, host_delay): {host_b:.0f} bytes")
    print(f"saved state: {per_source:.0f} bytes per source, {per_link:.1f} per remembered link, "
          f"{per_page:.0f} per waiting page, {fixed / 1024:.0f} KiB fixed")  # fmt: skip
    print(f"capped keys full: dead {full['dead'] / 2**20:.1f} MiB, solves and solver_log "
          f"{full['logs'] / 2**20:.2f} MiB")  # fmt: skip
    capped_mib = (full["dead"] + full["logs"]) / 2**20
    print(
        f"formula: bytes ~ {done_b:.0f} x done pages (ECHO_REDIS_DUPEFILTER_TTL x pages/s) "
        f"+ 2 x state ({per_link:.0f} x links + {per_source:.0f} x sources + {per_page:.0f} x "
        f"waiting pages; two copies while a save replaces it) + {queued_b:.0f} x queued "
        f"+ {leased_b:.0f} x leased + {host_b:.0f} x download slots + events since the last "
        f"save ({page_ev:.0f} to {source_ev:.0f} each) + {capped_mib:.1f} MiB "
        f"of capped keys"
    )  # fmt: skip


if __name__ == "__main__":
    main()
