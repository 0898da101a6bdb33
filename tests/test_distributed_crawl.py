"""Distributed mode end to end: real ``scrapy crawl`` workers on one real redis-server, against
the local news site: Redis losing its data, cut off, hostile queue entries, another crawl's
keys. (Workers killed again and again, with every other fault at once: ``test_chaos.py``.)"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.crawling import crawl, start_crawl
from tests.local_site import LocalNewsSite, Section

pytestmark = pytest.mark.slow

RATE = 8.0
FAST = {
    "ECHO_RESOLVE_INTERVAL": 1,
    "ECHO_CLICK_PUSH_PERIOD": 1,
    "ECHO_CLICK_BIN": 0.5,
    "ECHO_CLICK_BINS": 40,
    "ECHO_CRAWL_RATE": RATE,
    "ECHO_REDIS_LEASE_TIMEOUT": 3,
    "ECHO_REDIS_SOLVER_LEASE": 1.5,
    "ECHO_REDIS_SNAPSHOT_INTERVAL": 1,
    "ECHO_REDIS_PREFETCH": 2,
    "LOG_LEVEL": "INFO",
}
# Twelve sections publishing 5.3 stories/s between them, under a budget of 8 requests/s:
# enough work that no worker idles, and hubs long enough that no story leaves a hub before it
# is recrawled. Then every story published is one the budget allows: each one missing is lost.
PERIODS = [0.5, 1, 1.5, 2, 3, 4, 6, 8, 10, 12, 16, 20]
SECTIONS = {f"s{i}": Section(period=p, hub_items=500) for i, p in enumerate(PERIODS)}


class Workers:
    """``scrapy crawl monitor`` processes sharing one Redis."""

    def __init__(self, tmp_path: Path, settings: dict[str, Any]) -> None:
        self.tmp_path = tmp_path
        self.settings = settings
        self.procs: list[subprocess.Popen[bytes]] = []
        self.killed = 0
        self._logs: list[Any] = []

    def start(self) -> subprocess.Popen[bytes]:
        n = len(self.procs)
        log = open(self.tmp_path / f"worker-{n}.log", "wb")  # noqa: SIM115 (closed in stop)
        self._logs.append(log)
        proc = start_crawl(self.tmp_path / f"stats-{n}.json", self.settings, stderr=log)
        self.procs.append(proc)
        return proc

    def live(self) -> list[subprocess.Popen[bytes]]:
        return [proc for proc in self.procs if proc.poll() is None]

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        self.killed += 1

    def stop(self) -> list[int]:
        """Stop the live workers as a user does (Ctrl-C) and wait for a clean exit."""
        live = self.live()
        for proc in live:
            proc.send_signal(signal.SIGINT)
        codes = [proc.wait(timeout=60) for proc in live]
        for log in self._logs:
            log.close()
        return codes

    def stats(self) -> list[dict[str, Any]]:
        files = sorted(self.tmp_path.glob("stats-*.json"))
        return [json.loads(path.read_text()) for path in files]

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.tmp_path.glob("worker-*.log"))


@pytest.fixture
def site() -> Iterator[LocalNewsSite]:
    site = LocalNewsSite(SECTIONS).start()
    yield site
    site.stop()


def settings_for(site: LocalNewsSite, url: str) -> dict[str, Any]:
    return {
        **FAST,
        "REDIS_URL": url,
        "ECHO_REDIS_KEY_PREFIX": f"t{uuid.uuid4().hex[:8]}",
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in SECTIONS),
    }


def lost_stories(site: LocalNewsSite, url: str, prefix: str, until: float) -> list[str]:
    """Stories that were on their hub at a crawl of it (after its first crawl, which only
    records what is there, and before ``until``) and were neither fetched nor are still
    known to Redis: queued, in the planner's saved state, or in a hub crawl reported after
    that state was saved (the next planner applies it)."""
    client = redis.Redis.from_url(url)
    queued = b"".join(client.hvals(f"{{{prefix}:monitor}}:req"))
    queued += client.get(f"{{{prefix}:monitor}}:state") or b""
    queued += b"".join(fields[b"d"] for _, fields in client.xrange(f"{{{prefix}:monitor}}:events"))
    lost = []
    for name in SECTIONS:
        crawls = [t for t, path in site.hit_log if path == f"/s/{name}/" and t < until]
        for index in range(site.published(name, crawls[0]), site.published(name, crawls[-1])):
            path = f"/a/{name}/{index}.html"
            if path not in site.first_fetch and (site.url + path).encode() not in queued:
                lost.append(path)
    return lost


def request_rate(site: LocalNewsSite, start: float, end: float) -> float:
    return sum(1 for t, _ in site.hit_log if start <= t < end) / (end - start)


def planner_pid(url: str, prefix: str) -> int | None:
    token = redis.Redis.from_url(url).get(f"{{{prefix}:monitor}}:solver")
    return int(token.decode().split(":")[1]) if token else None


def test_redis_losing_its_data_and_a_clock_ahead_lose_no_story(tmp_path, site, redis_server):
    settings = settings_for(site, redis_server.url)
    prefix = settings["ECHO_REDIS_KEY_PREFIX"]
    keys = f"{{{prefix}:monitor}}"
    client = redis.Redis.from_url(redis_server.url)
    workers = Workers(tmp_path, settings)
    workers.start()
    workers.start()
    time.sleep(6)
    # A worker whose clock runs an hour ahead reports the busiest hub: it must not be put off.
    ahead = {"e": "304", "url": site.hub_url("s0"), "t": time.time() + 3600}
    client.xadd(f"{keys}:events", {"d": json.dumps(ahead)})
    time.sleep(3)
    client.flushall()  # Redis restarted without persistence: the queue, the saved state, all
    time.sleep(12)
    until = time.time()
    assert workers.stop() == [0, 0], workers.logs()[-3000:]
    stats = workers.stats()
    assert sum(s.get("echo/redis/planner_regained", 0) for s in stats) >= 1
    assert sum(s.get("echo/redis/rejected/clock_ahead", 0) for s in stats) >= 1
    log = [line.split() for line in client.lrange(f"{keys}:solver_log", 0, -1)]
    # The planner took its term back. (The other worker may have taken the emptied lease
    # first, as term 1, or take the one it gives up as both stop: terms beside it.)
    assert any(entry[-1] == b"regained" for entry in log), log
    lost = lost_stories(site, redis_server.url, prefix, until)
    assert lost == [], f"{len(lost)} stories lost ({len(site.first_fetch)} fetched)"


def test_redis_outage_makes_workers_wait_not_crash_or_lose(tmp_path, site, redis_server):
    settings = settings_for(site, redis_server.url)
    prefix = settings["ECHO_REDIS_KEY_PREFIX"]
    workers = Workers(tmp_path, settings)
    workers.start()
    workers.start()
    time.sleep(6)
    redis_server.pause()
    time.sleep(10)
    assert len(workers.live()) == 2, workers.logs()[-3000:]
    redis_server.resume()
    resumed = time.time()
    time.sleep(10)
    until = time.time()
    assert workers.stop() == [0, 0], workers.logs()[-3000:]
    assert request_rate(site, resumed + 3, until) > 0.5 * RATE  # crawling again
    assert sum(s.get("echo/redis/errors", 0) for s in workers.stats()) > 0  # it was noticed
    assert "Redis is back" in workers.logs()
    lost = lost_stories(site, redis_server.url, prefix, until)
    assert lost == [], f"{len(lost)} stories lost"

    # The planner's state in Redis is what `scrapy echo-report` reads for a distributed crawl.
    report = subprocess.run(
        [sys.executable, "-m", "scrapy", "echo-report", "--redis", redis_server.url,
         "--spider", "monitor", "--prefix", prefix, "--out", str(tmp_path / "report")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-3000:]
    assert f"ECHO report: {len(SECTIONS)} sources" in report.stdout
    assert (tmp_path / "report" / "report.html").exists()


class RunsCode:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self) -> Any:
        return (os.system, (f"touch {self.marker}",))


def test_hostile_and_malformed_queue_entries_are_refused_and_counted(tmp_path, site, redis_url):
    settings = {**settings_for(site, redis_url), "CLOSESPIDER_TIMEOUT": 6}
    keys = f"{{{settings['ECHO_REDIS_KEY_PREFIX']}:monitor}}"
    marker = tmp_path / "pickle-ran"
    client = redis.Redis.from_url(redis_url)
    planted = {
        "p:pickle": b"e|1|" + pickle.dumps(RunsCode(str(marker))),
        "p:garbage": b"e|2|{not json",
        "p:callback": b'e|3|{"url": "http://127.0.0.1:1/", "callback": "no_such_method"}',
        "p:class": b'e|4|{"url": "http://127.0.0.1:1/", "_class": "subprocess.Popen"}',
        # Requests for the cloud's metadata service, in two spellings, and for a host the
        # crawl's sources are not on; one for a source's host that names another in Host.
        "p:metadata": b'e|5|{"url": "http://169.254.169.254/latest/meta-data/"}',
        "p:metadata2": b'e|6|{"url": "http://2852039166/latest/meta-data/"}',
        "p:private": b'e|7|{"url": "http://10.0.0.5/"}',
        "p:host": b"e|8|"
        + json.dumps(
            {"url": site.hub_url("world"), "headers": {"Host": ["admin.internal"]}}
        ).encode(),
    }
    for score, (rid, entry) in enumerate(planted.items()):
        client.hset(f"{keys}:req", rid, entry)
        client.zadd(f"{keys}:queue", {rid: score})
    client.xadd(f"{keys}:events", {"d": b"\x80\x04garbage"})
    client.xadd(f"{keys}:events", {"d": json.dumps({"e": "crawl", "url": "ftp://x/", "t": 1})})
    client.xadd(f"{keys}:events", {"d": json.dumps({"e": "rm -rf"})})
    client.rpush(f"{keys}:sources", "javascript:alert(1)", site.hub_url("world"))
    hostile = pickle.dumps({})  # a "saved state" that is a pickle: refused, never loaded
    client.set(f"{keys}:state", hostile)
    client.hset(f"{keys}:snapshot", mapping={"size": len(hostile), "event": "0-0"})

    run = crawl(tmp_path, settings)
    assert run.returncode == 0, run.log[-3000:]
    stats = run.stats
    rejected = {k: v for k, v in stats.items() if k.startswith("echo/redis/rejected/")}
    for kind in ("pickle", "not_json", "bad_callback", "bad_class", "event_not_json",
                 "bad_url", "unknown_event", "bad_source", "snapshot",
                 "header_refused"):  # fmt: skip
        assert rejected.get(f"echo/redis/rejected/{kind}", 0) >= 1, (kind, rejected)
    assert rejected.get("echo/redis/rejected/address_refused", 0) >= 3, rejected
    assert run.log.count("ECHO refused address_refused from Redis") == 1  # then counted
    assert not marker.exists()  # the pickle was never loaded
    assert client.hmget(f"{keys}:req", list(planted)) == [None] * len(planted)  # removed
    assert stats["echo/pages/crawled"] > 5  # and the crawl went on


def test_a_worker_refuses_keys_that_hold_another_crawl(tmp_path, site, redis_url):
    settings = {**settings_for(site, redis_url), "CLOSESPIDER_TIMEOUT": 20}
    keys = f"{{{settings['ECHO_REDIS_KEY_PREFIX']}:monitor}}"
    client = redis.Redis.from_url(redis_url)
    client.hset(f"{keys}:crawl", mapping={"who": "shop/shop.spiders.Monitor", "created": 1})
    started = time.time()
    run = crawl(tmp_path, settings)
    assert time.time() - started < 15  # it stopped at once, not at the timeout
    assert run.stats["finish_reason"] == "echo_redis_refused", run.log[-3000:]
    assert run.stats["echo/redis/refused"] == 1
    assert "hold another crawl ('shop/shop.spiders.Monitor'" in run.log
    assert client.xlen(f"{keys}:events") == 0  # it sent nothing to the other crawl's keys
    assert client.hget(f"{keys}:crawl", "who") == b"shop/shop.spiders.Monitor"
