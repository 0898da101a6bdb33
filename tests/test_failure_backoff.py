"""A failing source backs off on its own scale: its planned interval, doubling, at most
``ECHO_FAILURE_BACKOFF`` at first and ``ECHO_FAILURE_BACKOFF_MAX`` in all, and never less
than the ``Retry-After`` its host gave."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scrapy_echo.core import CrawlCore
from scrapy_echo.core.events import InvalidEvent, SourceFailed, from_json, to_json
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.intervals.plan import Plan
from scrapy_echo.sim.engine import SimSettings

HUB = "http://a.test/"


def _core_planned_every(interval: float) -> CrawlCore:
    core = CrawlCore(
        SimSettings(crawl_rate=1.0, failure_backoff=60.0, failure_backoff_max=600.0),
        make_policy("echo-newpages"),
    )
    source = core.state.add_source(HUB)
    plan = core.policy.plan
    core.policy.plan = Plan(plan.estimates, np.full(source + 1, interval), 1.0, np.ones(1, bool))
    return core


def _waits(core: CrawlCore, failures: int, retry_after: float | None = None) -> list[float]:
    waits = []
    now = 1000.0
    for _ in range(failures):
        core.apply(SourceFailed(HUB, now, "HTTP 503", retry_after))
        waits.append(float(core.state.last_crawl[0]) - now)
        now += 1.0
    return waits


def test_a_source_planned_every_few_seconds_is_tried_again_within_a_few() -> None:
    assert _waits(_core_planned_every(2.0), 4) == [2.0, 4.0, 8.0, 16.0]


def test_the_first_wait_is_at_most_failure_backoff_and_all_at_most_the_maximum() -> None:
    assert _waits(_core_planned_every(3600.0), 6) == [60.0, 120.0, 240.0, 480.0, 600.0, 600.0]
    # A source the plan does not recrawl waits as before: failure_backoff, doubling.
    assert _waits(_core_planned_every(math.inf), 2) == [60.0, 120.0]


def test_a_retry_after_is_a_floor_under_the_wait() -> None:
    assert _waits(_core_planned_every(2.0), 3, retry_after=5.0) == [5.0, 5.0, 8.0]


def test_retry_after_goes_through_the_journal_and_bad_values_are_refused() -> None:
    event = SourceFailed(HUB, 10.0, "HTTP 429", 5.0)
    assert from_json(to_json(event)) == event
    assert from_json(to_json(SourceFailed(HUB, 10.0, "HTTP 503"))).retry_after is None
    with pytest.raises(InvalidEvent, match="ra must be"):
        from_json({"e": "fail", "url": HUB, "t": 10.0, "why": None, "ra": -1.0})
