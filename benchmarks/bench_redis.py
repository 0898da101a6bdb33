"""Distributed mode: our Redis queue against scrapy-redis's, and a 3-worker crawl.

1. Push + pop throughput on the same requests and the same fresh redis-server (started here on
   a free port): scrapy-redis's ``PriorityQueue`` (one round trip per push and per pop,
   pickled requests) against ours with leases and acks on (JSON requests, the planner's
   pushes and the workers' leases batched as the scheduler batches them, every lease acked).
   Also ours with batches of one, the worst case. Ours keeps fleet politeness on, as a
   worker does by default (each request carries its download slot, 50 hosts; the slot's
   owner and turn are checked and kept at every lease and ack; no download delay, so the
   hosts do not hold the queue back). Throughput is requests pushed and popped per second
   (median of ``--rounds``); the ratio is ours / scrapy-redis in each round (target >= 1),
   its median over the rounds.
2. Three ``scrapy crawl`` workers on that server against a local news site, with a global
   budget of ``--rate`` requests/s: the rate they achieve together.

Run: python benchmarks/bench_redis.py [--requests 5000] [--rounds 3] [--rate 20] [--seconds 20]
[--no-crawl]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import redis
import scrapy
from scrapy.utils.httpobj import urlparse_cached
from scrapy_redis.queue import PriorityQueue

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scrapy_echo.distributed.store import RedisStore  # noqa: E402
from scrapy_echo.distributed.store_messages import Exchange, FleetRules  # noqa: E402
from scrapy_echo.distributed.wire import decode_request, encode_request  # noqa: E402
from tests.conftest import RedisServer  # noqa: E402


class Spider(scrapy.Spider):
    name = "bench"

    def parse(self, response: object) -> None:
        pass


SPIDER = Spider()


def source_callback(response: object) -> None:
    pass


def page_requests(n: int) -> list[scrapy.Request]:
    return [
        scrapy.Request(
            f"http://news{i % 50}.test/story/{i}.html",
            callback=SPIDER.parse,
            meta={
                "echo": {
                    "kind": "page",
                    "source": i % 50,
                    "appeared": 1e9 + i,
                    "window": [1e9, 1e9 + i],
                    "discovered": 1e9 + i,
                }
            },
        )
        for i in range(n)
    ]


def scrapy_redis_round(client: redis.Redis, requests: list[scrapy.Request]) -> float:
    queue = PriorityQueue(client, SPIDER, f"bench:{uuid.uuid4().hex}:%(spider)s")
    started = time.perf_counter()
    for request in requests:
        queue.push(request)
    popped = 0
    while queue.pop() is not None:
        popped += 1
    elapsed = time.perf_counter() - started
    assert popped == len(requests)
    return 2 * len(requests) / elapsed


def echo_round(
    client: redis.Redis, requests: list[scrapy.Request], push_batch: int, lease_batch: int
) -> float:
    store = RedisStore(client, f"bench:{uuid.uuid4().hex}")
    store.acquire_solver("bench", 600_000)
    fleet = FleetRules("bench", default_delay_ms=0, horizon_ms=150)  # as a worker's
    options = {"lease_ms": 60_000, "rate": 0.0, "burst": 1.0, "plain_share": 0.5,
               "done_ttl_ms": 3_600_000, "max_attempts": 5, "fleet": fleet}  # fmt: skip
    started = time.perf_counter()
    for start in range(0, len(requests), push_batch):
        chunk = requests[start : start + push_batch]
        store.push(
            "bench",
            [(f"p:{start + i}", float(start + i),
              encode_request(r, SPIDER, source_callback), urlparse_cached(r).hostname or "")
             for i, r in enumerate(chunk)],
        )  # fmt: skip
    popped, acks = 0, []
    while True:
        leased = store.exchange(Exchange(acks=acks, want=lease_batch), **options).leased  # type: ignore[arg-type]
        if not leased:
            break
        for _, payload in leased:
            decode_request(payload, SPIDER, source_callback)
        popped += len(leased)
        acks = [member for member, _ in leased]
    elapsed = time.perf_counter() - started
    assert popped == len(requests)
    assert store.exchange(Exchange(acks=acks), **options).leased == []  # type: ignore[arg-type]
    assert client.zcard(store.keys["leases"]) == 0  # every lease acked
    return 2 * len(requests) / elapsed


def crawl_rate(url: str, rate: float, seconds: float, workdir: Path) -> float:
    from tests.local_site import LocalNewsSite, Section
    from tests.test_distributed_crawl import Workers

    sections = {f"s{i}": Section(period=0.5 + i * 0.5, hub_items=200) for i in range(30)}
    site = LocalNewsSite(sections).start()
    try:
        settings = {
            "REDIS_URL": url,
            "ECHO_REDIS_KEY_PREFIX": f"bench{uuid.uuid4().hex[:6]}",
            "ECHO_SOURCES": ",".join(site.hub_url(name) for name in sections),
            "ECHO_CRAWL_RATE": rate,
            "ECHO_RESOLVE_INTERVAL": 2,
            "LOG_LEVEL": "INFO",
        }
        workers = Workers(workdir, settings)
        for _ in range(3):
            workers.start()
        time.sleep(6)  # start-up
        start = time.time()
        time.sleep(seconds)
        end = time.time()
        codes = workers.stop()
        assert codes == [0, 0, 0], workers.logs()[-2000:]
        return sum(1 for t, _ in site.hit_log if start <= t < end) / (end - start)
    finally:
        site.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--no-crawl", action="store_true", help="the queue's throughput only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp))
        try:
            client = redis.Redis.from_url(server.url)
            requests = page_requests(args.requests)
            theirs, ours, ours_single = [], [], []
            for _ in range(args.rounds):
                theirs.append(scrapy_redis_round(client, requests))
                ours.append(echo_round(client, requests, push_batch=16, lease_batch=4))
                ours_single.append(echo_round(client, requests, push_batch=1, lease_batch=1))
            a, b, c = (statistics.median(x) for x in (theirs, ours, ours_single))
            # Each round's ratio, of runs seconds apart: the machine's load drifts less
            # within a round than across rounds.
            batched = statistics.median(o / t for o, t in zip(ours, theirs, strict=True))
            single = statistics.median(o / t for o, t in zip(ours_single, theirs, strict=True))
            print(f"scrapy-redis PriorityQueue: {a:,.0f} requests/s pushed+popped "
                  f"(median of {args.rounds}, {args.requests:,} requests)")  # fmt: skip
            print(f"ECHO queue, leases+acks, batches as the scheduler makes them (push 16, "
                  f"lease 4): {b:,.0f} requests/s")  # fmt: skip
            print(f"ECHO queue, leases+acks, batches of one: {c:,.0f} requests/s")
            print(f"throughput ratio ECHO / scrapy-redis, median of the rounds' ratios: "
                  f"{batched:.2f} (batches of one: {single:.2f}; target >= 1)")  # fmt: skip
            if args.no_crawl:
                return
            achieved = crawl_rate(server.url, args.rate, args.seconds, Path(tmp))
            print(f"3 workers, global budget {args.rate:g} requests/s: achieved "
                  f"{achieved:.2f} requests/s over {args.seconds:g} s "
                  f"({achieved / args.rate:.1%} of the budget)")  # fmt: skip
        finally:
            server.stop()


if __name__ == "__main__":
    main()
