"""λ from crawl histories, P and μ from click histograms, and the cold start."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.model.estimation.clicks import ClickHistogram
from scrapy_echo.model.estimation.crawl_history import CrawlHistory
from scrapy_echo.model.estimation.estimators import DecayFit, fit_profit_decay
from scrapy_echo.model.estimation.priors import ColdStart, apply_cold_start

BIN = 1200.0
BINS = 72


# -- λ ------------------------------------------------------------------------------------
def test_first_crawl_is_ignored_and_one_crawl_is_unknown() -> None:
    h = CrawlHistory(2, history=7)
    h.record(0, 0.0, 40)  # first crawl: 40 links there, none of them new
    assert np.isnan(h.link_rate()).all()
    h.record(0, 100.0, 3)
    assert h.link_rate()[0] == pytest.approx(3 / 100)
    assert np.isnan(h.link_rate()[1])


def test_window_starts_at_the_crawl_before_it() -> None:
    h = CrawlHistory(1, history=3)
    times = [0, 10, 30, 60, 100, 150]
    counts = [99, 1, 2, 3, 4, 5]
    for t, n in zip(times, counts, strict=True):
        h.record(0, float(t), n)
    # Last 3 crawls (100... no: 60, 100, 150 found 3+4+5), starting at the crawl at 30.
    assert h.link_rate()[0] == pytest.approx((3 + 4 + 5) / (150 - 30))


def brute_force_rate(times: list[float], counts: list[int], history: int) -> float:
    if len(times) < 2:
        return math.nan
    window = list(range(max(1, len(times) - history), len(times)))
    start = times[window[0] - 1]
    span = times[-1] - start
    return sum(counts[i] for i in window) / span if span > 0 else math.nan


@given(
    st.integers(1, 9),
    st.lists(st.tuples(st.floats(0.1, 1e4), st.integers(0, 50)), max_size=25),
)
def test_ring_buffer_matches_brute_force(history: int, crawls) -> None:
    h = CrawlHistory(1, history=history)
    times, counts, now = [], [], 0.0
    for gap, n in crawls:
        now += gap
        h.record(0, now, n)
        times.append(now)
        counts.append(n)
    expected = brute_force_rate(times, counts, history)
    got = h.link_rate()[0]
    if math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(expected, rel=1e-12)
    back = CrawlHistory.from_dict(h.to_dict())
    assert np.array_equal(back.link_rate(), h.link_rate(), equal_nan=True)


def test_bad_crawls_are_rejected() -> None:
    h = CrawlHistory(1)
    h.record(0, 10.0, 1)
    with pytest.raises(ValueError, match="back in time"):
        h.record(0, 5.0, 1)
    with pytest.raises(ValueError, match="new_links"):
        h.record(0, 20.0, -1)


def test_long_run_rate_fades_old_crawls() -> None:
    day = 86400.0
    h = CrawlHistory(1, history=2, memory=day)
    h.record(0, 0.0, 0)
    h.record(0, day, 50)  # 50 links in the first day
    for k in range(2, 5):  # then three quiet days
        h.record(0, k * day, 0)
    links, span = h.long_run()
    # The busy day has faded by e^-3; the spans fade alike.
    assert links[0] == pytest.approx(50 * math.exp(-3))
    assert span[0] == pytest.approx(day * (math.exp(-3) + math.exp(-2) + math.exp(-1) + 1))
    assert h.link_rate()[0] == 0.0  # the 2-crawl window saw nothing


def test_window_is_shrunk_toward_the_sources_own_long_run_rate() -> None:
    h = CrawlHistory(2, history=2)
    for t in range(40):  # source 0: 1 link per 100 s for an hour, source 1: none
        h.record(0, 100.0 * t, 1 if t else 0)
        h.record(1, 100.0 * t, 0)
    h.record(0, 4000.0, 0)  # a quiet stretch: the window drops to 1 link per 200 s
    h.record(0, 4100.0, 0)
    fit = DecayFit(*(np.full(2, np.nan) for _ in range(4)), np.zeros(2, bool))
    cold = ColdStart(prior_links=4.0)
    links, span = h.window()
    window_only, _, _ = apply_cold_start(links, span, fit, cold)
    lam, _, _ = apply_cold_start(links, span, fit, cold, h.long_run())
    assert links[0] / span[0] < lam[0] < 0.01  # between the window and the long-run rate
    assert lam[0] > window_only[0]  # the pooled prior is far lower (source 1 found nothing)
    assert 0 < lam[1] < lam[0]


def test_long_run_survives_persistence_and_a_partial_record_is_refused() -> None:
    h = CrawlHistory(1, history=2)
    for t, n in [(0.0, 0), (100.0, 5), (300.0, 1)]:
        h.record(0, t, n)
    back = CrawlHistory.from_dict(h.to_dict())
    assert [a.tolist() for a in back.long_run()] == [a.tolist() for a in h.long_run()]
    assert back.window()[0].tolist() == h.window()[0].tolist()
    back.record(0, 400.0, 2)
    h.record(0, 400.0, 2)
    assert [a.tolist() for a in back.long_run()] == [a.tolist() for a in h.long_run()]
    # An earlier build's record (no long-run rate) is not read: a clear error, not a guess.
    old = h.to_dict()
    del old["long_links"]
    with pytest.raises(KeyError):
        CrawlHistory.from_dict(old)


# -- P and μ --------------------------------------------------------------------------------
def synthetic_pages(rng, profit, decay, pages, first, last):
    """Pages appearing uniformly in [first, last]; Poisson clicks at Exp(μ) delays."""
    appeared = rng.uniform(first, last, pages)
    totals = rng.poisson(profit, pages)
    page = np.repeat(np.arange(pages), totals)
    ts = appeared[page] + rng.exponential(1 / decay, page.size)
    return appeared, page, ts


def fill(hist, source, appeared, page, ts, offset, now):
    for j, a in enumerate(appeared):
        hist.add_page(offset + j, source=source, appeared=float(a))
    seen = ts <= now
    hist.add_clicks((offset + page[seen]).tolist(), ts[seen].tolist(), [1] * int(seen.sum()))


def test_fit_recovers_profit_and_decay_within_five_percent() -> None:
    rng = np.random.default_rng(12)
    profits = rng.uniform(5, 50, 20)
    decays = np.exp(rng.uniform(math.log(5e-5), math.log(1e-3), 20))
    hist = ClickHistogram(bin_width=BIN, bins=BINS, grace=1e9)
    now = 8 * 86400.0
    for s in range(20):  # 600 pages each, all older than the day the fit looks at
        appeared, page, ts = synthetic_pages(rng, profits[s], decays[s], 600, 0, 6 * 86400)
        fill(hist, s, appeared, page, ts, s * 1000, now)
    table = hist.table(now)
    fit = fit_profit_decay(table.increments, table.pages, bin_width=BIN)
    assert fit.fitted.all()
    assert np.max(np.abs(fit.profit / profits - 1)) < 0.05
    assert np.max(np.abs(fit.decay / decays - 1)) < 0.05


def test_censoring_aware_fit_is_right_where_the_naive_one_is_biased() -> None:
    rng = np.random.default_rng(3)
    profit, decay, now = 10.0, 5e-5, 86400.0
    # A source found a day ago whose pages appear steadily up to `now`: many are still young.
    appeared, page, ts = synthetic_pages(rng, profit, decay, 4000, 0, now)
    hist = ClickHistogram(bin_width=BIN, bins=BINS, grace=1e9)
    fill(hist, 0, appeared, page, ts, 0, now)
    table = hist.table(now)
    aware = fit_profit_decay(table.increments, table.pages, bin_width=BIN)
    # Naive: every page in every bin, whatever its age.
    seen = ts <= now
    ages = np.maximum(ts[seen] - appeared[page[seen]], 0)
    counts, _ = np.histogram(ages, bins=BIN * np.arange(BINS + 1))
    naive_m = counts / appeared.size
    naive = fit_profit_decay(naive_m[None, :], np.full((1, BINS), appeared.size), bin_width=BIN)
    assert abs(aware.profit[0] / profit - 1) < 0.05
    assert abs(aware.decay[0] / decay - 1) < 0.05
    # Young pages drag the naive averages down at long ages: P too low, decay too fast.
    assert naive.profit[0] < 0.85 * profit
    assert naive.decay[0] > 1.2 * decay


def test_clicks_logged_only_after_a_late_crawl_still_give_p_and_mu() -> None:
    # A search engine's click log: a page earns clicks only once crawled, and crawls come
    # 0-2 half-lives late. Unobserved early bins must not read as "interest still growing".
    rng = np.random.default_rng(5)
    profit, decay, now = 20.0, math.log(2) / 3600, 4 * 86400.0
    appeared, page, ts = synthetic_pages(rng, profit, decay, 3000, 0, 3 * 86400)
    crawled = appeared + rng.uniform(0, 7200, appeared.size)
    logged = ts >= crawled[page]
    hist = ClickHistogram(bin_width=BIN, bins=BINS, grace=1e9)
    for j, a in enumerate(appeared):
        hist.add_page(j, source=0, appeared=float(a), crawled=float(crawled[j]))
    seen = logged & (ts <= now)
    hist.add_clicks(page[seen].tolist(), ts[seen].tolist(), [1] * int(seen.sum()))
    assert not hist.sees_before_crawl
    table = hist.table(now)
    fit = fit_profit_decay(table.increments, table.pages, bin_width=BIN)
    assert fit.profit[0] == pytest.approx(profit, rel=0.05)
    assert fit.decay[0] == pytest.approx(decay, rel=0.05)
    # Counting those bins as observed (zero clicks) halves P and misreads the decay.
    counts, _ = np.histogram(ts[seen] - appeared[page[seen]], bins=BIN * np.arange(BINS + 1))
    naive = fit_profit_decay(
        counts[None, :] / appeared.size, np.full((1, BINS), 3000), bin_width=BIN
    )
    assert naive.profit[0] < 0.8 * profit


def test_degenerate_click_data() -> None:
    increments = np.zeros((3, 4))
    pages = np.array([[5, 5, 5, 5], [0, 0, 0, 0], [3, 3, 0, 0]])
    increments[2] = [1.0, 1.0, 0.0, 0.0]  # as many clicks late as early: no decay seen yet
    fit = fit_profit_decay(increments, pages, bin_width=BIN)
    assert fit.fitted.tolist() == [True, False, True]
    assert fit.profit[0] == 0.0 and np.isnan(fit.decay[0])  # clicks none: worthless
    assert np.isnan(fit.profit[1]) and np.isnan(fit.decay[1])
    assert np.isfinite(fit.profit[2]) and fit.profit[2] > 0
    # Flat: the slowest decay whose curve still puts a tenth of the clicks in the two bins
    # seen, so P is at most ten times the two clicks a page showed there.
    assert fit.decay[2] == pytest.approx(-math.log(0.9) / (2 * BIN), rel=0.05)
    assert fit.profit[2] == pytest.approx(20.0, rel=0.05)


def test_cumulative_curves_fit_too() -> None:
    ages = BIN * np.arange(1, BINS + 1)
    curves = np.array([8.0 * -np.expm1(-1e-4 * ages), 3.0 * -np.expm1(-2e-5 * ages)])
    pages = np.full((2, BINS), 40)
    pages[1, 30:] = 0  # young pages: later bins not finished
    fit = fit_profit_decay(curves, pages, bin_width=BIN, cumulative=True)
    assert fit.profit == pytest.approx([8.0, 3.0], rel=1e-3)
    assert fit.decay == pytest.approx([1e-4, 2e-5], rel=1e-3)


def test_late_bins_alone_do_not_set_p() -> None:
    # Clicks seen only from bin 5 on (pages crawled late): no μ puts a tenth of a page's
    # clicks there and is told apart from the rest; the source stays on its prior.
    increments = np.zeros((2, 8))
    pages = np.zeros((2, 8))
    increments[0, 5], pages[0, 5] = 3.0, 4
    increments[1, 5:], pages[1, 5:] = [3.0, 1.5, 0.75], 4
    fit = fit_profit_decay(increments, pages, bin_width=BIN)
    assert fit.fitted.tolist() == [False, True]
    assert np.isnan(fit.profit[0])
    assert np.isfinite(fit.profit[1])


def test_fit_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="one shape"):
        fit_profit_decay(np.zeros((2, 3)), np.zeros((2, 4)))
    with pytest.raises(ValueError, match=">= 0"):
        fit_profit_decay(-np.ones((1, 3)), np.ones((1, 3)))


# -- cold start -----------------------------------------------------------------------------
def test_cold_start_smooths_toward_pooled_priors() -> None:
    fit = DecayFit(
        profit=np.array([10.0, 0.0, np.nan, 4.0]),
        decay=np.array([1e-4, np.nan, np.nan, 2e-4]),
        pages=np.array([95.0, 5.0, 0.0, 10.0]),
        residual=np.zeros(4),
        fitted=np.array([True, True, False, True]),
    )
    cold = ColdStart(prior_links=1.0, profit_pessimism=0.5, prior_pages=5.0)
    links = np.array([10.0, 0.0, 0.0, 0.0])
    span = np.array([1000.0, 3000.0, 0.0, 0.0])  # sources 2 and 3 crawled fewer than twice
    lam, prof, mu = apply_cold_start(links, span, fit, cold)
    pooled_rate = 10.0 / 4000.0
    assert lam[0] == pytest.approx(11.0 / (1000.0 + 1 / pooled_rate))
    assert lam[1] == pytest.approx(1.0 / (3000.0 + 1 / pooled_rate))  # nothing seen: not dead
    assert lam[2] == pytest.approx(pooled_rate)  # unknown: the pooled rate
    assert 0 < lam[1] < lam[2] < lam[0]
    prior = 0.5 * (95 * 10.0 + 5 * 0.0 + 10 * 4.0) / 110
    assert prof[0] == pytest.approx((95 * 10 + 5 * prior) / 100)
    assert prof[1] == pytest.approx(prior / 2)  # five clickless pages halve the prior
    assert prof[2] == pytest.approx(prior)
    assert mu[1] == mu[2] == pytest.approx(np.median([1e-4, 2e-4]))
    assert not np.isnan(prof).any() and not np.isnan(mu).any() and (lam > 0).all()


def test_decay_is_shrunk_toward_the_median_by_pages_and_profit_follows() -> None:
    day = 86400.0
    fit = DecayFit(
        profit=np.array([10.0, 10.0, 10.0]),
        decay=np.array([1e-5, 1e-5, 1e-4]),
        pages=np.array([1000.0, 2.0, 50.0]),
        residual=np.zeros(3),
        fitted=np.ones(3, bool),
    )
    cold = ColdStart(prior_pages=0.0, prior_pages_decay=10.0)
    _, prof, mu = apply_cold_start(np.zeros(3), np.zeros(3), fit, cold, horizon=day)
    # The median fit is 1e-5: the third source moves toward it by 10 / (50 + 10) in log.
    assert mu[0] == mu[1] == pytest.approx(1e-5)
    assert mu[2] == pytest.approx(math.exp((50 * math.log(1e-4) + 10 * math.log(1e-5)) / 60))
    # Its clicks within the day's horizon stay as fitted.
    assert prof[2] * -math.expm1(-mu[2] * day) == pytest.approx(10 * -math.expm1(-1e-4 * day))
    assert prof[2] > 10.0
    # Without the shrinkage the fits pass through.
    _, prof, mu = apply_cold_start(
        np.zeros(3), np.zeros(3), fit, ColdStart(prior_pages=0.0, prior_pages_decay=0.0)
    )
    assert mu.tolist() == [1e-5, 1e-5, 1e-4] and prof.tolist() == [10.0] * 3


def test_cold_start_without_any_data_uses_the_defaults() -> None:
    fit = fit_profit_decay(np.zeros((2, 3)), np.zeros((2, 3)))
    cold = ColdStart()
    lam, prof, mu = apply_cold_start(np.zeros(2), np.zeros(2), fit, cold)
    assert lam.tolist() == pytest.approx([cold.link_rate] * 2)
    assert prof.tolist() == [cold.profit] * 2
    assert mu.tolist() == [cold.decay] * 2


def test_cold_start_validates() -> None:
    with pytest.raises(ValueError, match=r"ColdStart\.profit must"):
        ColdStart(profit=-1.0)
    with pytest.raises(ValueError, match="profit_pessimism"):
        ColdStart(profit_pessimism=2.0)
