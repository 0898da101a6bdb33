"""Distributed mode under every fault at once: real ``scrapy crawl`` workers on a real
redis-server (append-only file), against the local news site.

Three workers; a quarter of the articles answer slower than a lease lasts; one worker killed
with SIGKILL every 20 s (the planner every other time), and started again as a new host with
its own copy of the click feed (another path and inode); Redis restarted once; two malformed
entries planted in the queue. Then 30 s without faults. Nothing is lost; at most 1% of the
articles are fetched twice other than those under way at a killed worker (which are fetched
again by design); every click is counted once; planner terms only grow; the crawl goes on
after each fault.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from scrapy_echo.core import snapshot as snapshots
from scrapy_echo.distributed.store import RedisStore, key_base
from tests.conftest import RedisServer
from tests.local_site import LocalNewsSite, Section
from tests.test_distributed_crawl import (
    FAST,
    PERIODS,
    RATE,
    Workers,
    lost_stories,
    planner_pid,
    request_rate,
)

pytestmark = pytest.mark.slow

SECTIONS = {f"s{i}": Section(period=p, hub_items=500) for i, p in enumerate(PERIODS)}
LEASE = 3.0
SLOW = (0.25, LEASE + 1.0)  # every fourth article answers a second after a lease runs out
KILL_EVERY = 20.0
KILLS = 4


class FeedCopies:
    """The click feed as each host sees it: a copy per worker (its own path and inode), each
    appended the same bytes as the one the site writes."""

    def __init__(self, root: Path, master: Path) -> None:
        self.root = root
        self.master = master
        self.copies: list[Path] = []
        self._copied = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def new_host(self) -> Path:
        with self._lock:
            path = self.root / f"host-{len(self.copies)}" / "clicks.jsonl"
            path.parent.mkdir(parents=True)
            path.write_bytes(self.master.read_bytes()[: self._copied])
            self.copies.append(path)
            return path

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            with self._lock:
                data = self.master.read_bytes()
                end = data.rfind(b"\n") + 1  # whole rows only
                for path in self.copies:
                    with open(path, "ab") as handle:
                        handle.write(data[self._copied : end])
                self._copied = end

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    workdir = tmp_path / "redis"
    workdir.mkdir()
    server = RedisServer(workdir, appendonly=True)
    yield server
    server.stop()


def clicks_in_feed(path: Path, offset: int) -> float:
    rows = path.read_bytes()[:offset].decode().splitlines()
    return sum(json.loads(row)["clicks"] for row in rows if row.strip())


def test_every_fault_at_once_loses_nothing_and_counts_once(tmp_path, server) -> None:
    site = LocalNewsSite(SECTIONS, slow=SLOW).start()
    master = tmp_path / "clicks.jsonl"
    master.touch()
    site.write_clicks(master)
    feeds = FeedCopies(tmp_path / "hosts", master)
    prefix = f"t{uuid.uuid4().hex[:8]}"
    base = key_base(prefix, "monitor")
    settings: dict[str, Any] = {
        **FAST,
        "REDIS_URL": server.url,
        "ECHO_REDIS_KEY_PREFIX": prefix,
        "ECHO_REDIS_LEASE_TIMEOUT": LEASE,
        # The host's concurrency holds for the fleet: at 8 a quarter of the articles taking
        # 4.25 s allow about 7.5 requests/s, under the budget this test expects spent.
        "CONCURRENT_REQUESTS_PER_DOMAIN": 16,
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in SECTIONS),
    }
    workers = Workers(tmp_path / "workers", settings)
    workers.tmp_path.mkdir()

    def start() -> None:
        workers.settings = {**settings, "ECHO_CLICK_FEED": str(feeds.new_host())}
        workers.start()

    try:
        for _ in range(3):
            start()
        time.sleep(6)
        client = redis.Redis.from_url(server.url)
        client.hset(f"{base}:req", "p:noprefix", b"no lane, no score")
        client.zadd(f"{base}:queue", {"p:noprefix": 0})
        deep = b"e|0|" + b"[" * 100_000 + b"]" * 100_000
        client.hset(f"{base}:req", "p:deep", deep)
        client.zadd(f"{base}:queue", {"p:deep": 0})
        faults, kills = [], []
        for round_ in range(KILLS):
            time.sleep(KILL_EVERY)
            pid = planner_pid(server.url, prefix) if round_ % 2 == 0 else None
            victims = [p for p in workers.live() if p.pid == pid] or workers.live()[:1]
            workers.kill(victims[0])
            kills.append(time.time())
            start()
            faults.append(time.time())
            if round_ == 1:
                time.sleep(5)
                server.restart()  # the append-only file brings every key back
                faults.append(time.time())
        time.sleep(30)
        until = time.time()
        codes = workers.stop()
    finally:
        feeds.stop()
        site.stop()
    assert codes == [0, 0, 0], workers.logs()[-3000:]
    assert workers.killed == KILLS

    lost = lost_stories(site, server.url, prefix, until)
    articles = [path for path in site.first_fetch if path.startswith("/a/")]
    assert len(articles) > 300
    assert lost == [], f"{len(lost)} stories lost ({len(articles)} fetched)"
    # A page whose download was under way at the worker killed is fetched again by design:
    # its response died with the worker. Any other second fetch is a lease that ran out.
    twice = [path for path in articles if site.hits[path] > 1]
    when = {p: [t for t, q in site.hit_log if q == p] for p in twice}
    under_way = [p for p in twice if any(k - SLOW[1] - 1 <= when[p][0] <= k for k in kills)]
    others = [p for p in twice if p not in under_way]
    report = (f"{len(twice)} of {len(articles)} fetched twice, {len(under_way)} of them under "
              f"way at a killed worker")  # fmt: skip
    print(report)
    # When each other page was fetched, against the faults (kills, restarts): what a failure
    # needs to tell a lease lost to a fault from one lost to a stalled worker.
    marks = sorted(kills + faults)
    since_fault = {p: [round(t - max([m for m in marks if m <= t], default=0.0), 2)
                       for t in when[p]] for p in others}  # fmt: skip
    print("fetched twice, s since the last fault:", since_fault)
    assert len(others) <= 0.01 * len(articles), (report, since_fault)
    # A worker holds only a few downloads at once at this rate (2.7 a second for three).
    assert len(under_way) <= 5 * KILLS, report

    # The site is one host, leased to one worker at a time, whose downloader sends all of it,
    # on two cores shared with two more workers, Redis and the site. Seven runs of builds from
    # the last few days measured 5.1 to 7.4 requests/s without faults (the same build 6.1 to
    # 7.1; with the refresh lane off, 6.4): not yet explained (the worker holding the host
    # may be the planner, re-solving and saving every second here). So the bounds say the
    # crawl went on after each fault and spent most of one budget, never more than it.
    for at in faults:  # the crawl went on after each fault
        assert request_rate(site, at + 5, at + 15) > 0.2 * RATE, (at, faults)
    calm = request_rate(site, faults[-1] + 5, until)  # one budget for the fleet, most spent
    print(f"{calm:.2f} requests/s without faults, budget {RATE:g}")
    assert 0.6 * RATE <= calm <= 1.1 * RATE, calm

    client = redis.Redis.from_url(server.url)
    terms = [int(line.split()[0]) for line in client.lrange(f"{base}:solver_log", 0, -1)]
    assert terms == sorted(set(terms)) and len(terms) >= 3, terms
    solves = [int(line.split()[0]) for line in client.lrange(f"{base}:solves", 0, -1)]
    assert len(solves) > 10
    assert solves == sorted(solves), "a planner re-solved after its successor took over"

    store = RedisStore(client, base)
    loaded = store.load_snapshot()
    assert loaded is not None
    state = snapshots.read(loaded[0])
    ((path, position),) = [(p, s) for p, s in state["feeds"].items() if s.get("kind") == "click"]
    assert path in {str(copy) for copy in feeds.copies}
    received = state["learner"].received
    assert received > 0
    assert received == pytest.approx(clicks_in_feed(Path(path), position["offset"]))

    counters = store.counters()  # (a killed worker's own stats are lost with it)
    assert counters.get("malformed", 0) >= 1, counters
    assert counters.get("rejected:too_deep", 0) >= 1, counters
    assert client.hget(f"{base}:req", "p:noprefix") is None
    shutil.rmtree(tmp_path / "hosts", ignore_errors=True)
