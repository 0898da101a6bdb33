"""What a host says back, per download slot: Retry-After holds it, refusals raise its delay,
and accepted responses bring the delay back down slowly."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.crawler.pushback import (
    MIN_REFUSAL_DELAY,
    RECOVERY,
    HostPushback,
    retry_after_seconds,
)


def test_retry_after_in_seconds_or_as_an_http_date() -> None:
    assert retry_after_seconds(b" 120 ", now=0.0) == 120.0
    when = datetime(2026, 11, 28, 10, 0, 30, tzinfo=timezone.utc)
    now = datetime(2026, 11, 28, 10, 0, 0, tzinfo=timezone.utc).timestamp()
    assert retry_after_seconds(format_datetime(when, usegmt=True), now=now) == 30.0
    assert retry_after_seconds(format_datetime(when, usegmt=True), now=now + 60) == 0.0  # past
    for bad in (None, b"", b"-5", b"1.5", b"soon", b"Thu, 99 Foo 2026"):
        assert retry_after_seconds(bad, now=now) is None


def test_a_retry_after_holds_the_slot_and_nothing_else() -> None:
    pushback = HostPushback(max_wait=3600.0)
    assert pushback.refused("a", 100.0, 5.0, delay=0.25) == 5.0
    assert pushback.wait("a", 101.0) == pytest.approx(4.0)
    assert pushback.wait("b", 101.0) == 0.0
    assert pushback.wait("a", 105.0) == 0.0
    assert pushback.delay("a") == 0.5  # the refusal doubled its delay
    # A longer hold already set is kept; a host cannot hold the crawl past max_wait.
    pushback.refused("a", 106.0, 1e9, delay=0.5)
    assert pushback.wait("a", 106.0) == 3600.0


def test_refusals_double_the_delay_and_answers_bring_it_back_slowly() -> None:
    pushback = HostPushback(max_wait=60.0)
    hold = [pushback.refused("a", 0.0, None, delay=0.0) for _ in range(3)]
    assert hold == [MIN_REFUSAL_DELAY, 2 * MIN_REFUSAL_DELAY, 4 * MIN_REFUSAL_DELAY]
    assert pushback.delay("a") == pytest.approx(0.4)
    pushback.accepted("a", base_delay=0.25)
    assert pushback.delay("a") == pytest.approx(0.4 * RECOVERY)
    answers = 0
    while pushback.delay("a") > 0:
        pushback.accepted("a", base_delay=0.25)
        answers += 1
    # Back to the slot's own delay after ln(0.25/0.4)/ln(0.97) answers, not at once.
    assert answers == math.ceil(math.log(0.25 / (0.4 * RECOVERY)) / math.log(RECOVERY))


@given(st.lists(st.tuples(st.booleans(), st.floats(0.0, 100.0)), max_size=60))
def test_the_learned_delay_stays_within_bounds(events: list[tuple[bool, float]]) -> None:
    pushback = HostPushback(max_wait=30.0, max_delay=20.0)
    for refused, wait in events:
        if refused:
            pushback.refused("a", 0.0, wait, delay=0.25)
        else:
            pushback.accepted("a", base_delay=0.25)
        assert pushback.delay("a") == 0.0 or 0.25 < pushback.delay("a") <= 20.0
        assert pushback.wait("a", 0.0) <= 30.0


def test_a_503_holds_only_as_long_as_it_says_and_teaches_no_delay() -> None:
    """An outage is not a rate limit: a host back after one keeps its own delay."""
    pushback = HostPushback(max_wait=3600.0)
    assert pushback.refused("a", 0.0, None, delay=0.25, too_many=False) == 0.0
    assert pushback.delay("a") == 0.0 and pushback.wait("a", 0.0) == 0.0
    assert pushback.refused("a", 0.0, 7.0, delay=0.25, too_many=False) == 7.0
    assert pushback.delay("a") == 0.0 and pushback.wait("a", 1.0) == 6.0


def test_a_slot_refused_then_answered_comes_back_to_its_own_delay() -> None:
    """Through Politeness, with Scrapy's own download slot: a 429 with Retry-After holds the
    slot and doubles its delay; answers then bring the slot's delay back down to its own
    (DOWNLOAD_DELAY), not leave it doubled."""
    from scrapy import Request
    from scrapy.core.downloader import Slot
    from scrapy.http import Response
    from scrapy.utils.test import get_crawler

    from scrapy_echo.crawler.politeness import Politeness

    crawler = get_crawler(settings_dict={"DOWNLOAD_DELAY": 0.25})
    politeness = Politeness(crawler)
    slot = Slot(concurrency=1, delay=0.25, jitter=0.0)
    politeness._slots = lambda: {"a.test": slot}  # type: ignore[method-assign]
    request = Request("https://a.test/x", meta={"download_slot": "a.test"})
    refused = Response(request.url, status=429, headers={"Retry-After": "5"}, request=request)
    politeness._downloaded(refused, request)
    assert 4.9 < politeness.wait("a.test") <= 5.0
    assert slot.delay == 0.5 and politeness.capacity("a.test") == 2.0
    ok = Response(request.url, status=200, request=request)
    politeness._downloaded(ok, request)
    assert slot.delay == pytest.approx(0.5 * RECOVERY)
    for _ in range(40):
        politeness._downloaded(ok, request)
    assert slot.delay == 0.25 and politeness.pushback.delay("a.test") == 0.0
