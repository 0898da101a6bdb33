"""The quality metric on cases with exact answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.model.metric import (
    dynamic_profit,
    fraction_of_bound,
    overall_profit_rate,
    page_profit,
)


def test_a_page_earns_the_clicks_at_or_after_its_crawl() -> None:
    # page 0: clicks at 5 (1), 10 (2), 20 (3); crawled at 10 -> 2 + 3
    # page 1: never crawled -> 0; page 2: crawled before all its clicks -> all 7
    profit = page_profit(
        [10.0, np.nan, 0.0], [0, 0, 0, 1, 2], [5.0, 10.0, 20.0, 1.0, 3.0], [1, 2, 3, 9, 7]
    )
    assert profit.tolist() == [5.0, 0.0, 7.0]


@given(
    st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), min_size=1, max_size=10),
    st.lists(st.tuples(st.integers(0, 9), st.floats(0, 200), st.integers(1, 5)), max_size=40),
)
def test_the_upper_bound_beats_any_crawl_schedule(pages, clicks) -> None:
    created = np.array([p[0] for p in pages])
    crawled = created + np.array([p[1] for p in pages])  # never before it appeared
    rows = [c for c in clicks if c[0] < len(pages)]
    page = [r[0] for r in rows]
    ts = [r[1] for r in rows]
    count = [r[2] for r in rows]
    bound = page_profit(created, page, ts, count)
    caught = page_profit(crawled, page, ts, count)
    assert np.all(caught <= bound)


def test_dynamic_profit_window_includes_both_ends() -> None:
    crawled = [0.0, 10.0, 20.0, np.nan]
    profit = [1.0, 2.0, 4.0, 100.0]
    # Window [10, 20] holds the crawls at 10 and 20.
    assert dynamic_profit(crawled, profit, window=10.0, times=[20.0]).tolist() == [0.6]
    assert dynamic_profit(crawled, profit, window=10.0, times=[9.9, 30.0]).tolist() == [
        0.1,
        0.4,
    ]
    with pytest.raises(ValueError, match="window"):
        dynamic_profit(crawled, profit, window=0.0, times=[1.0])


def test_overall_profit_rate_counts_crawls_in_the_window() -> None:
    crawled = [5.0, 10.0, 15.0, np.nan]
    profit = [1.0, 2.0, 4.0, 8.0]
    assert overall_profit_rate(crawled, profit, start=5.0, end=15.0) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="end must be after start"):
        overall_profit_rate(crawled, profit, start=5.0, end=5.0)


def test_fraction_of_bound() -> None:
    assert fraction_of_bound(1.0, 4.0) == 0.25
    assert fraction_of_bound(0.0, 0.0) == 0.0
