"""A hub crawl's value per request of a saturated host (model.intervals.host_requests)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.model.intervals.host_requests import hub_value_per_request

positive = st.floats(min_value=1e-4, max_value=50.0)


def _value(elapsed: float, rate: float, profit: float, decay: float, delay: float) -> float:
    return float(
        hub_value_per_request(
            np.array([elapsed]),
            rate=np.array([rate]),
            profit=np.array([profit]),
            decay=np.array([decay]),
            delay=np.array([delay]),
            most=10,
        )[0]
    )


@given(positive, positive, positive, positive, st.floats(min_value=0.0, max_value=60.0))
def test_it_grows_with_the_time_since_the_last_crawl_and_stays_under_a_pages_worth(
    elapsed: float, rate: float, profit: float, decay: float, delay: float
) -> None:
    now = _value(elapsed, rate, profit, decay, delay)
    later = _value(2 * elapsed, rate, profit, decay, delay)
    assert 0.0 <= now <= later * (1 + 1e-9) + 1e-12
    assert later < profit  # (m pages of at most P each, over m + 1 requests)


@given(positive, positive, positive, st.floats(min_value=0.0, max_value=60.0))
def test_nothing_to_find_right_after_a_crawl(
    rate: float, profit: float, decay: float, delay: float
) -> None:
    assert _value(0.0, rate, profit, decay, delay) == 0.0


def test_a_long_wait_on_a_busy_hub_tends_to_its_freshest_pages_worth() -> None:
    # Every page there, none decayed, no delay: m new pages over m + 1 requests, m = 10.
    assert math.isclose(_value(1e6, 1e6, 3.0, 1e-9, 0.0), 3.0 * 10 / 11, rel_tol=1e-3)


def test_a_slower_host_makes_each_crawl_worth_less_per_request() -> None:
    fast = _value(20.0, 0.5, 10.0, 0.02, 0.5)
    slow = _value(20.0, 0.5, 10.0, 0.02, 5.0)
    assert slow < fast
