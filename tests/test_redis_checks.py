"""What a worker checks of Redis before it joins a crawl (preflight), the keys' hash tag, and
the fleet's clock: against a real redis-server."""

from __future__ import annotations

import uuid

import pytest
import redis
from redis.crc import key_slot

from scrapy_echo.core.events import InvalidEvent, from_json
from scrapy_echo.distributed import preflight
from scrapy_echo.distributed.clock import FleetClock
from scrapy_echo.distributed.store import RedisStore, key_base


def store_on(url: str) -> RedisStore:
    return RedisStore(redis.Redis.from_url(url), key_base("test", uuid.uuid4().hex))


def test_a_crawls_keys_share_one_cluster_slot(redis_url):
    keys = store_on(redis_url).keys.values()
    assert len({key_slot(key.encode()) for key in keys}) == 1


def test_a_worker_of_another_project_refuses_to_join(redis_url):
    store = store_on(redis_url)
    first = preflight.check(store, "news/monitor.Monitor", 0)
    assert not first.refused and not first.notes  # created now
    created = float(store.client.hget(store.keys["crawl"], "created"))
    again = preflight.check(store, "news/monitor.Monitor", created + 7.2e6)
    assert not again.refused and "started 2.0 h ago" in again.notes[0]
    other = preflight.check(store, "shop/monitor.Monitor", 0)
    assert other.refused and "another crawl ('news/monitor.Monitor'" in other.refused[0]


def test_eviction_of_any_key_is_refused_and_no_persistence_warned(redis_server):
    store = store_on(redis_server.url)
    verdict = preflight.check(store, "p/s.S", 0)  # the fixture's server persists nothing
    assert not verdict.refused
    assert any("persists nothing" in warning for warning in verdict.warnings)
    store.client.config_set("maxmemory-policy", "allkeys-lru")
    refused = preflight.check(store, "p/s.S", 0).refused
    assert refused and "allkeys-lru" in refused[0]
    store.client.config_set("maxmemory-policy", "noeviction")
    store.client.config_set("save", "3600 1")  # snapshots: a restart keeps the keys
    assert preflight.check(store, "p/s.S", 0).warnings == []
    store.client.config_set("save", "")


def test_the_fleet_clock_takes_the_offset_of_the_fastest_round_trip():
    clock = FleetClock()
    clock.sample(100.0, 160.5, 101.0)  # 1 s round trip: offset 60 ± 0.5
    clock.sample(200.0, 260.05, 200.1)  # 0.1 s: offset 60 ± 0.05, trusted more
    clock.sample(300.0, 390.0, 302.0)  # a slow trip (and an answer late in it) is outweighed
    assert clock.offset == pytest.approx(60.0)
    clock.sample(400.0, 0.0, 399.0)  # this worker's clock stepped back: ignored
    assert clock.offset == pytest.approx(60.0)


@pytest.mark.parametrize("t", [1e300, -1e12, float("inf"), True])
def test_absurd_event_times_are_refused(t):
    with pytest.raises(InvalidEvent) as caught:
        from_json({"e": "304", "url": "http://a.test/", "t": t})
    assert caught.value.kind == "bad_time"
