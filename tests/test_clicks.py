"""The incremental click histogram against a direct recomputation from all clicks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.model.estimation.clicks import ClickHistogram


def direct_table(sources, appeared, crawled, clicks, now, width, bins):
    """m[s, k] by definition: mean clicks at ages [k·width, (k+1)·width) over the pages whose
    bin k is finished and (unless some click came over a bin before its page's crawl) wholly
    after the crawl. A page's appearance is its estimate, moved back by whole bins to at or
    before its first click."""
    before = any(ts < crawled[p] - width for p, ts, _ in clicks)
    appeared = list(appeared)
    for p in range(len(appeared)):
        first = min((ts for q, ts, _ in clicks if q == p), default=math.inf)
        if first < appeared[p]:
            appeared[p] -= math.ceil((appeared[p] - first) / width) * width
    n_src = max(sources) + 1
    running = np.zeros((n_src, bins))
    total = np.zeros((n_src, bins))
    pages = np.zeros((n_src, bins), dtype=np.int64)
    for p, (s, a, c) in enumerate(zip(sources, appeared, crawled, strict=True)):
        for k in range(bins):
            if now - a >= (k + 1) * width and (before or k >= math.ceil((c - a) / width)):
                ages = [max(ts - a, 0) for q, ts, _ in clicks if q == p]
                counts = [n for q, _, n in clicks if q == p]
                total[s, k] += sum(
                    n for age, n in zip(ages, counts, strict=True)
                    if k * width <= age < (k + 1) * width
                )  # fmt: skip
                running[s, k] += sum(
                    n for age, n in zip(ages, counts, strict=True) if age < (k + 1) * width
                )
                pages[s, k] += 1
    mean = np.where(pages > 0, total / np.maximum(pages, 1), 0.0)
    cumulative = np.where(pages > 0, running / np.maximum(pages, 1), 0.0) if before else None
    return mean, pages, cumulative


@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(0, 3), min_size=n, max_size=n),
            st.lists(st.floats(0, 500), min_size=n, max_size=n),
            st.lists(st.floats(0, 300), min_size=n, max_size=n),
            st.lists(
                st.tuples(st.integers(0, n - 1), st.floats(0, 1000), st.integers(1, 5)),
                max_size=40,
            ),
        )
    ),
    st.floats(0, 1500),
    st.integers(0, 3),
    st.booleans(),
)
def test_matches_direct_recomputation(data, now, pushes, before_crawl) -> None:
    sources, appeared, delays, clicks = data
    crawled = [a + d for a, d in zip(appeared, delays, strict=True)]
    if not before_crawl:  # a search engine's log: clicks only from the crawl on
        clicks = [(p, max(ts, crawled[p]), n) for p, ts, n in clicks]
    hist = ClickHistogram(bin_width=60.0, bins=5, grace=1e9)  # grace: nothing folds
    for p, (s, a, c) in enumerate(zip(sources, appeared, crawled, strict=True)):
        hist.add_page(p, source=s, appeared=a, crawled=c)
    # Deliver the clicks in a few pushes, as the click feed does.
    for part in np.array_split(np.arange(len(clicks)), pushes + 1):
        rows = [clicks[i] for i in part]
        hist.add_clicks([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    table = hist.table(now)
    mean, pages, cumulative = direct_table(sources, appeared, crawled, clicks, now, 60.0, 5)
    assert hist.sees_before_crawl == any(ts < crawled[p] - 60.0 for p, ts, _ in clicks)
    assert np.array_equal(table.pages[: mean.shape[0]], pages)
    assert np.allclose(table.increments[: mean.shape[0]], mean)
    if cumulative is None:
        assert table.cumulative is None
    else:
        assert np.allclose(table.cumulative[: mean.shape[0]], cumulative)


def test_folding_old_pages_keeps_the_table() -> None:
    rng = np.random.default_rng(4)
    appeared = rng.uniform(0, 2000, 50)
    sources = rng.integers(0, 4, 50)
    click_page = rng.integers(0, 50, 400)
    click_ts = appeared[click_page] + rng.exponential(100, 400)
    kept = ClickHistogram(bin_width=60.0, bins=5, grace=1e9)
    folding = ClickHistogram(bin_width=60.0, bins=5, grace=0.0)
    for hist in (kept, folding):
        for p in range(50):
            a = float(appeared[p])
            hist.add_page(p, source=int(sources[p]), appeared=a, crawled=a + 70.0 * (p % 3))
        hist.add_clicks(
            click_page.tolist(),
            np.maximum(click_ts, appeared[click_page] + 140).tolist(),
            [1] * 400,
        )
    a, b = kept.table(3000.0), folding.table(3000.0)
    assert len(folding) < len(kept)  # old pages were folded away ...
    assert np.array_equal(a.pages, b.pages)  # ... and the table did not change
    assert np.allclose(a.increments, b.increments)
    assert (a.pages[:, 0] < a.pages[:, -1]).all()  # early bins before late crawls: unobserved


def test_unknown_and_folded_pages_are_reported() -> None:
    hist = ClickHistogram(bin_width=10.0, bins=2, grace=0.0)
    hist.add_page("a", source=0, appeared=0.0)
    assert hist.add_clicks(["a", "zzz"], [1.0, 1.0], [1, 1]) == [1]
    hist.table(now=100.0)  # "a" is past the horizon: folded
    assert hist.add_clicks(["a"], [30.0], [1]) == [0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"bin_width": 0}, "bin_width"), ({"bins": 0}, "bins"), ({"grace": -1}, "grace")],
)
def test_bad_parameters(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        ClickHistogram(**kwargs)


# Times no clock gives (the feeds refuse them first): centuries off, infinite, not a number.
far_times = st.one_of(st.floats(min_value=1e15), st.floats(max_value=-1e15), st.just(math.nan))


@given(
    bad=st.lists(st.tuples(far_times, st.floats(0, 10)), min_size=1),
    width=st.sampled_from([1200.0, 60.0, 0.5]),
)
def test_clicks_at_times_no_clock_gives_are_ignored_not_raised(bad, width) -> None:
    now = 1.7e9
    sane = ClickHistogram(bin_width=width, bins=5)
    tested = ClickHistogram(bin_width=width, bins=5)
    for hist in (sane, tested):
        hist.add_page("a", source=0, appeared=now, crawled=now)
        hist.add_clicks(["a"], [now + width / 2], [3.0])
    assert tested.add_clicks(["a"] * len(bad), [t for t, _ in bad], [n for _, n in bad]) == []
    for hist in (sane, tested):
        hist.add_clicks(["a"], [now + 1.5 * width], [2.0])
    kept, got = sane.table(now + 10 * width), tested.table(now + 10 * width)
    assert np.array_equal(got.increments, kept.increments)
    assert np.array_equal(got.pages, kept.pages)
    assert tested.caught == sane.caught == 5.0
    assert tested.sees_before_crawl == sane.sees_before_crawl


@given(ts=st.floats(allow_nan=True), clicks=st.floats(allow_nan=True))
def test_no_click_row_raises(ts, clicks) -> None:
    hist = ClickHistogram(bin_width=0.5, bins=5)
    hist.add_page("a", source=0, appeared=1.7e9)
    hist.add_clicks(["a", "a"], [ts, 1.7e9 + 0.1], [clicks, 1.0])
    table = hist.table(1.7e9 + 100)
    assert np.isfinite(table.increments).all() and math.isfinite(hist.caught)


def test_sources_added_one_at_a_time_give_the_table_and_data_of_all_at_once() -> None:
    width, bins, now = 100.0, 4, 5_000.0
    one_by_one, at_once = (ClickHistogram(bin_width=width, bins=bins, grace=0.0) for _ in "12")
    at_once.add_page("first", source=36, appeared=0.0)  # (room for all 37 at once)
    for source in range(37):  # the sums' room doubles: 16, 32, 64 rows
        for histogram in (one_by_one, at_once):
            histogram.add_page(f"p{source}", source=source, appeared=10.0 * source)
            histogram.add_clicks([f"p{source}"], [10.0 * source + 150], [source + 1.0])
    at_once.add_clicks(["first"], [50.0], [2.0])
    one_by_one.add_page("first", source=36, appeared=0.0)
    one_by_one.add_clicks(["first"], [50.0], [2.0])
    assert one_by_one.sources == at_once.sources == 37
    table, expected = one_by_one.table(now), at_once.table(now)  # (every page folded by now)
    np.testing.assert_array_equal(table.increments, expected.increments)
    np.testing.assert_array_equal(table.pages, expected.pages)
    assert table.pages.shape == (37, bins) and table.pages.sum() == 38 * bins
    data = one_by_one.to_data()
    assert data["mature_pages"].shape == (37, bins)
    restored = ClickHistogram.from_data(data)
    assert restored.sources == 37
    np.testing.assert_array_equal(restored.table(now).increments, expected.increments)
