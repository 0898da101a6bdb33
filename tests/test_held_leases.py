"""The leases a worker holds: what it hands its engine while a host holds the crawl off."""

from __future__ import annotations

import math
from collections import Counter

from scrapy import Request

from scrapy_echo.distributed.leases import LEASE_KEY, HeldLeases
from scrapy_echo.distributed.store_messages import Reply


def _held(*urls: str) -> tuple[HeldLeases, Counter[str]]:
    counts: Counter[str] = Counter()
    held = HeldLeases(lambda key, n: counts.update({key: n}))
    leased = [(f"p:{i}|{i}", url.encode()) for i, url in enumerate(urls)]
    held.take(Reply(leased=leased), lambda payload: Request(payload.decode()), "dead")
    return held, counts


def _waits(**holds: float):  # host -> s it asked to be left alone
    return lambda request: holds.get(request.url.split("/")[2], 0.0)


def test_a_held_hosts_request_waits_and_another_hosts_goes_first() -> None:
    held, counts = _held("http://slow.test/1", "http://fast.test/1")
    request, soonest = held.next(100.0, _waits(**{"slow.test": 2.0}), longest=30.0)
    assert request is not None and request.url == "http://fast.test/1"
    assert held.in_flight == {"p:1|1": 100.0}
    assert soonest == 2.0  # (the held one met before it)
    request, soonest = held.next(101.0, _waits(**{"slow.test": 2.0}), longest=30.0)
    assert request is None and soonest == 2.0  # still renewed meanwhile
    assert set(held.members()) == {"p:0|0", "p:1|1"}
    request, _ = held.next(103.0, _waits(), longest=30.0)
    assert request is not None and request.meta[LEASE_KEY] == "p:0|0"
    assert not counts


def test_a_request_that_would_wait_past_its_lease_is_given_back_unacked() -> None:
    held, counts = _held("http://slow.test/1")
    request, soonest = held.next(100.0, _waits(**{"slow.test": 3600.0}), longest=30.0)
    assert request is None and math.isinf(soonest)
    assert held.members() == [] and len(held) == 0  # not renewed: its lease runs out
    assert counts["echo/redis/given_back"] == 1
    # A retry of one under way, given back likewise: nothing to ack when it is done.
    held, counts = _held("http://a.test/1")
    request, _ = held.next(100.0, _waits(), longest=30.0)
    assert request is not None
    retry = request.replace(dont_filter=True)
    assert held.give_back(retry)
    assert held.finish(retry) is None and held.members() == []
    assert not held.give_back(Request("http://b.test/"))  # (not one of ours)
