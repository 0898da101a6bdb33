"""The yield predictor: new links per crawl regressed on recent yield, age and the clock
(model.estimation.yield_predictor)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.estimation.yield_predictor import (
    MIN_EXAMPLES,
    RETRAIN_EVERY,
    WINDOW,
    YieldPredictor,
)

H = 3600.0


def enough(plan: list[tuple[int, int]], hours: int) -> list[tuple[int, int]]:
    """``plan`` repeated until ``hours`` of its crawls hold MIN_EXAMPLES examples in the
    window (copies of a source change no fit: the same examples, weighted alike)."""
    per_copy = sum(min(hours, 168) // every - 2 for every, _ in plan)
    return plan * max(1, -(-MIN_EXAMPLES // per_copy))


def crawl(p: YieldPredictor, plan: list[tuple[int, int]], hours: int, start: int = 0) -> None:
    """Per source ``(every, links)``: crawled every ``every`` hours, finding ``links``."""
    for h in range(start, start + hours):
        for source, (every, links) in enumerate(plan):
            if h % every == 0:
                p.observe(source, h * H, links)


def test_steady_sources_get_their_links_per_second_and_are_told_apart() -> None:
    p = YieldPredictor()
    plan = enough([(1, k) for k in (2, 5, 10, 20)], 150)
    crawl(p, plan, 150)
    rates = p.rates(150 * H)
    assert rates is not None
    assert np.allclose(rates * H, [2, 5, 10, 20] * (len(plan) // 4), rtol=0.2)
    rates = rates[:4]
    assert np.all(np.diff(rates) > 0) and 7 < rates[3] / rates[0] < 13
    # Asked at the age they are crawled at, the same answer as by default.
    assert np.allclose(p.rates(150 * H, spans=np.full(len(plan), H))[:4], rates)


def test_the_rate_is_per_second_whatever_the_crawl_interval() -> None:
    """Crawled every 2 h finding 2k links is the same rate as hourly finding k."""
    p = YieldPredictor()
    plan = enough([(1, 4), (2, 8), (1, 1), (2, 2)], 150)
    crawl(p, plan, 150)
    rates = p.rates(150 * H)
    assert rates is not None
    rates = rates[:4]
    assert np.allclose(rates * H, [4, 4, 1, 1], rtol=0.2)
    assert 0.8 < rates[1] / rates[0] < 1.2 and 0.8 < rates[3] / rates[2] < 1.2


def test_no_fit_before_min_examples_or_before_a_day_of_them() -> None:
    busy = YieldPredictor()  # plenty of examples, but 11 hours of them
    crawl(busy, [(1, 3)] * (MIN_EXAMPLES // 10), 12)
    assert busy.examples >= MIN_EXAMPLES and busy.rates(11 * H) is None
    slow = YieldPredictor()  # one source crawled over two days: one example short
    gap = 2 * 86400.0 / MIN_EXAMPLES
    for i in range(MIN_EXAMPLES + 1):  # (the first two crawls are no examples)
        slow.observe(0, i * gap, 3)
    assert slow.examples == MIN_EXAMPLES - 1 and slow.rates(MIN_EXAMPLES * gap) is None
    slow.observe(0, (MIN_EXAMPLES + 1) * gap, 3)
    rates = slow.rates((MIN_EXAMPLES + 1) * gap)
    assert rates is not None and np.isclose(rates[0] * gap, 3.0, rtol=0.05)


def test_the_first_crawl_only_starts_the_clock() -> None:
    p = YieldPredictor()
    p.observe(0, 0.0, 1000)
    p.observe(0, H, 5)
    p.observe(1, H, 7)
    # The second crawl is no example either: no yield is counted behind its average yet.
    assert p.examples == 0
    p.observe(0, 2 * H, 6)
    assert p.examples == 1
    # What a first crawl found (what was there) is not a yield: it does not count in avg.
    q = YieldPredictor()
    plan = enough([(1, 5), (1, 5)], 100)
    for source in range(len(plan)):
        q.observe(source, 0.0, 1000 if source % 2 == 0 else 5)
    crawl(q, plan, 100, start=1)
    rates = q.rates(100 * H)
    assert rates is not None and rates[0] == rates[1]


def test_sources_without_two_crawls_in_the_window_get_nan() -> None:
    p = YieldPredictor()
    plan = enough([(1, 4), (1, 2)], 9 * 24)
    n = len(plan)
    for h in range(3):  # source n + 1: three crawls at the start, then none
        p.observe(n + 1, h * H, 4)
    crawl(p, plan, 9 * 24)
    p.observe(n, 9 * 24 * H, 4)  # source n: crawled once
    rates = p.rates(9 * 24 * H)
    assert rates is not None and rates.shape == (n + 2,)
    assert np.isfinite(rates[:n]).all() and np.isnan(rates[n:]).all()


def test_it_refits_only_every_retrain_every() -> None:
    p = YieldPredictor()
    plan = enough([(1, 3), (1, 6)], 40)
    crawl(p, plan, 40)
    now = 39 * H
    assert p.rates(now) is not None and p.trained_at == now and p.coef is not None
    coef = p.coef.copy()
    crawl(p, [(1, 10 * links) for _, links in plan], 2, start=40)  # yields jump tenfold
    assert p.rates(now + RETRAIN_EVERY - 1) is not None
    assert np.array_equal(p.coef, coef) and p.trained_at == now
    assert p.rates(now + RETRAIN_EVERY) is not None
    assert not np.array_equal(p.coef, coef) and p.trained_at == now + RETRAIN_EVERY


def test_crawls_older_than_the_window_drop_out_of_the_average() -> None:
    """Source 0 found 50 an hour on its first day and nothing since: once that day is out of
    the window it looks like source 2, which never found anything."""
    p = YieldPredictor()
    hours = (int(WINDOW / 86400) + 2) * 24
    copies = len(enough([(1, 0)] * 4, hours)) // 4
    for h in range(hours):
        for source, links in enumerate((50 if h < 24 else 0, 50, 0, 5) * copies):
            p.observe(source, h * H, links)
    rates = p.rates((hours - 1) * H)
    assert rates is not None
    assert np.isclose(rates[0], rates[2]) and rates[0] < rates[3] / 3 < rates[1] / 30


def test_only_the_windows_examples_are_fitted() -> None:
    """50 links a crawl on the first day, then 0, 1, 2, 3, 4 in turn: two windows later the
    fit saw no example of the first day's (avg and std of the window's crawls: 2 and √2)."""
    p = YieldPredictor()
    hours = 16 * 24
    for h in range(hours):
        crawl(p, enough([(1, 50 if h < 24 else h % 5)], hours), 1, start=h)
    assert p.rates((hours - 1) * H) is not None
    assert np.allclose(p.seen[1][:2], [2, np.sqrt(2)], rtol=0.05)


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    sources=st.integers(1, 8),
    days=st.floats(1.2, 6.5),
    top=st.integers(0, 100),
    later=st.floats(0.0, 1e6),
)
def test_rates_stay_finite_and_positive(
    seed: int, sources: int, days: float, top: int, later: float
) -> None:
    rng = np.random.default_rng(seed)
    p = YieldPredictor()
    crawls = MIN_EXAMPLES + 100
    gap = days * 86400.0 / crawls  # over a day, under a week: always enough for a fit
    time = 0.0
    for _ in range(crawls):
        time += gap * rng.uniform(0.9, 1.1)
        p.observe(int(rng.integers(sources)), time, int(rng.integers(0, top + 1)))
    first = p.rates(time)
    assert first is not None and not np.isnan(first).all()
    for now, spans in ((time, rng.uniform(1.0, 1e6, sources)), (time + later, None)):
        rates = p.rates(now, spans)
        assert rates is not None
        known = rates[~np.isnan(rates)]
        assert np.all(np.isfinite(known)) and np.all(known > 0)


def test_an_unseen_weekday_does_not_blow_up_predictions() -> None:
    """1.2 days of steady yields (Thursday, then Friday's first hours): through the next two
    days (Saturday never seen) the rates stay near the truth and do not swing with the hour
    (a regression: a clock level seen on a sliver of the data made predictions run away)."""
    p = YieldPredictor()
    true = np.arange(4.0, 24.0, 2.0)
    plan = enough([(1, int(k)) for k in true], 30)
    crawl(p, plan, 30)
    rates = np.array([p.rates((29 + h) * H) for h in range(1, 49, 2)])[:, : true.size] * H
    assert np.all(rates > 0.5 * true) and np.all(rates < 2.5 * true)
    assert np.all(rates.max(axis=0) < 1.05 * rates.min(axis=0))


def test_after_two_days_the_hour_of_day_counts() -> None:
    p = YieldPredictor()
    sources = len(enough([(1, 0)], 72))
    crawl(p, [(1, 0)] * sources, 1)
    for h in range(1, 72):  # 12 links an hour in the day, 2 at night
        crawl(p, [(1, 12 if 8 <= h % 24 < 20 else 2)] * sources, 1, start=h)
    night, noon = p.rates(75 * H), p.rates(84 * H)
    assert night is not None and noon is not None
    assert np.allclose(night * H, 2, rtol=0.1) and np.allclose(noon * H, 12, rtol=0.1)


T = 100  # hours of crawls in fitted()


def fitted() -> YieldPredictor:
    p = YieldPredictor()
    plan = enough([(1, 3), (2, 8), (3, 1), (1, 6)], T)
    crawl(p, plan, T)
    p.observe(len(plan) + 1, T * H, 9)  # crawled once; the one before never (last crawl NaN)
    assert p.rates(T * H) is not None
    return p


def test_the_saved_data_round_trips_through_json() -> None:
    p = fitted()
    q = YieldPredictor.from_data(json.loads(json.dumps(p.to_data())))
    assert q.examples == p.examples
    for now in (T * H, T * H + RETRAIN_EVERY):  # the restored fit, then a refit
        assert np.array_equal(q.rates(now), p.rates(now), equal_nan=True)
    for r in (p, q):  # and both go on alike
        crawl(r, [(1, 30), (1, 5)], 10, start=T + 1)
    now = (T + 10) * H + 2 * RETRAIN_EVERY
    assert np.array_equal(q.rates(now), p.rates(now), equal_nan=True)


def test_a_capture_is_the_windows_when_taken_and_the_next_one_has_what_changed() -> None:
    p = YieldPredictor()
    for source in range(3):
        p.observe(source, 0.0, 0)
        p.observe(source, 3600.0, source)
    first = p.captured()
    p.observe(1, 7200.0, 9)  # one window grows; another loses its first crawl to age
    late = WINDOW + 7200.0
    p.observe(0, late, 4)
    second = p.captured()
    assert first()["crawls"] == [[[3600.0, 0]], [[3600.0, 1]], [[3600.0, 2]]]
    assert second()["crawls"] == [[[late, 4]], [[3600.0, 1], [7200.0, 9]], [[3600.0, 2]]]
    back = YieldPredictor.from_data(json.loads(json.dumps(second())))
    assert back.captured()()["crawls"] == second()["crawls"]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("coef", [0.0] * 35),
        ("label", []),
        ("stamp", [0.0]),
        ("last", [0.0]),
        ("raw", [[0.0] * 4]),
        ("seen", [[0.0, 0.0], [1.0, 1.0]]),
    ],
)
def test_inconsistent_data_is_refused(key: str, value: object) -> None:
    data = fitted().to_data()
    YieldPredictor.from_data(data)  # as saved: fine
    with pytest.raises(ValueError):
        YieldPredictor.from_data({**data, key: value})


def test_a_restored_ring_overwrites_its_oldest_example_first() -> None:
    """Past MAX_EXAMPLES the ring wraps; saved and restored, it must go on dropping the
    oldest examples, not the newest."""
    from scrapy_echo.model.estimation.yield_predictor import MAX_EXAMPLES

    p = YieldPredictor()
    for i in range(MAX_EXAMPLES + 12):
        p.observe(0, float(i), 1)
    q = YieldPredictor.from_data(json.loads(json.dumps(p.to_data())))
    for predictor in (p, q):
        predictor.observe(0, 1e6, 1)
    assert sorted(q._stamp.tolist()) == sorted(p._stamp.tolist())
    assert q._stamp.min() == p._stamp.min() > 2.0
