"""The synthetic trace generator: deterministic, and shaped as documented."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from scrapy_echo.sim.synth import DAY, SynthParams, source_truth, synthesize


@pytest.fixture(scope="module")
def trace():
    return synthesize(SynthParams(sources=400, days=14, seed=3))


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    params = SynthParams(sources=50, days=3, seed=9)
    a, b = synthesize(params), synthesize(params)
    c = synthesize(SynthParams(sources=50, days=3, seed=10))
    for name in ("page_created", "link_disappeared", "click_ts", "click_count"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.page_created[:10], c.page_created[:10])


def test_total_new_link_rate_scales_with_sources(trace) -> None:
    rate = trace.n_pages / trace.duration
    # 0.15 pages/s at 3000 sources, scaled to 400, less the night and weekend troughs.
    assert 0.6 * 0.15 * 400 / 3000 < rate < 1.1 * 0.15 * 400 / 3000


def test_hubs_show_at_most_k_links(trace) -> None:
    # At sample times, count the primary links shown per source.
    for t in np.linspace(DAY, trace.duration - 1, 7):
        shown = (trace.link_appeared <= t) & (trace.link_disappeared > t)
        per_source = np.bincount(trace.link_source[shown], minlength=trace.n_sources)
        # K is at most 50 (300 for listing sources), plus the cross-links of the site.
        assert per_source.max() <= 300 + 50


def test_clicks_are_heavy_tailed_across_sources(trace) -> None:
    page_source = np.full(trace.n_pages, -1)
    page_source[trace.link_page[::-1]] = trace.link_source[::-1]  # primary link's source
    per_source = np.bincount(
        page_source[trace.click_page], weights=trace.click_count, minlength=trace.n_sources
    )
    top = np.sort(per_source)[::-1]
    assert top[: trace.n_sources // 5].sum() > 0.7 * top.sum()


def test_daily_and_weekly_cycles(trace) -> None:
    hour = (trace.page_created % DAY) / 3600
    day = (trace.page_created // DAY) % 7
    afternoon = ((hour >= 12) & (hour < 18)).sum()
    night = ((hour >= 0) & (hour < 6)).sum()
    assert afternoon > 2 * night
    weekday = np.isin(day, [0, 1, 2, 3, 4]).sum() / 10  # two weeks: 10 weekdays
    weekend = np.isin(day, [5, 6]).sum() / 4
    assert weekend < 0.8 * weekday


def test_news_clicks_come_sooner_than_blog_clicks() -> None:
    trace = synthesize(SynthParams(sources=300, days=4, seed=1, news_share=1.0))
    blogs = synthesize(SynthParams(sources=300, days=4, seed=1, news_share=0.0))
    delay = np.median(trace.click_ts - trace.page_created[trace.click_page])
    blog_delay = np.median(blogs.click_ts - blogs.page_created[blogs.click_page])
    # Each source's median click delay is its half-life: 6-24 h for news, 1-4 days for blogs
    # (the trace's end cuts a few late blog clicks, which only lowers blog_delay).
    assert 6 * 3600 < delay < 24 * 3600 < blog_delay


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"sources": 0}, "sources"),
        ({"days": 3, "warmup_days": 5}, "warmup_days"),
        ({"news_share": 2.0}, "news_share"),
        ({"hub_items": (20, 10)}, "hub_items"),
        ({"signal_recall": 1.5}, "signal_recall"),
        ({"signal_precision": 0.0}, "signal_precision"),
        ({"signal_noise_per_day": -1.0}, "signal_noise_per_day"),
        ({"signal_delay": -1.0}, "signal_delay"),
        ({"site_rate_sigma": -0.5}, "site_rate_sigma"),
    ],
)
def test_bad_parameters_name_the_field(kwargs, field) -> None:
    with pytest.raises(ValueError, match=field):
        SynthParams(**kwargs)


def test_signals_have_the_recall_precision_and_delay_asked_for() -> None:
    base = SynthParams(sources=300, days=4, warmup_days=1, seed=3)
    plain = synthesize(base)
    assert plain.signal_ts.size == 0  # the defaults write none
    asked = {"signal_recall": 0.8, "signal_precision": 0.8, "signal_delay": 120.0}
    noisy = synthesize(replace(base, **asked))
    # The rest of the trace is the same: the signals have a random stream of their own.
    assert np.array_equal(noisy.link_appeared, plain.link_appeared)
    assert np.array_equal(noisy.click_ts, plain.click_ts)
    assert np.all(np.diff(noisy.signal_ts) >= 0) and noisy.signal_ts.max() <= noisy.duration
    # A signal is true if its source showed a new link in the 20 minutes before it.
    true = 0
    for source, ts in zip(noisy.signal_source.tolist(), noisy.signal_ts.tolist(), strict=True):
        times = noisy.link_appeared[noisy.link_source == source]
        true += bool(np.any((times <= ts) & (times > ts - 1200.0)))
    precision = true / noisy.signal_ts.size
    recall = noisy.signal_ts.size * precision / noisy.link_source.size
    assert 0.75 <= precision <= 0.9, precision  # (a false one may fall near a link)
    assert 0.7 <= recall <= 0.9, recall
    noise = synthesize(replace(base, signal_noise_per_day=2.0))
    per_source_day = noise.signal_ts.size / (base.sources * base.days)
    assert 1.8 <= per_source_day <= 2.2


def test_mirrors_list_all_of_their_sites_first_source_and_change_nothing_else() -> None:
    base = SynthParams(sources=40, days=2, seed=5)
    plain, mirrored = synthesize(base), synthesize(replace(base, mirror_share=1.0))
    n = plain.link_source.size
    for name in ("page_created", "click_ts", "click_count"):
        assert np.array_equal(getattr(plain, name), getattr(mirrored, name))
    assert np.array_equal(plain.link_page, mirrored.link_page[:n])
    extra_source, extra_page = mirrored.link_source[n:], mirrored.link_page[n:]
    firsts = np.flatnonzero((plain.link_source % base.sources_per_site == 0)[: plain.n_pages])
    assert sorted(extra_page.tolist()) == sorted(firsts.tolist())  # every page of a first source
    assert np.all(extra_source == plain.link_source[extra_page] + 1)  # on the site's second
    delay = mirrored.link_appeared[n:] - plain.page_created[extra_page]
    assert np.all((delay >= 0) & (delay <= 1800))
    with pytest.raises(ValueError, match="mirror_share"):
        SynthParams(mirror_share=1.5)


def test_a_site_rate_factor_makes_a_sites_sources_publish_alike() -> None:
    plain = SynthParams(sources=800, days=3, seed=4)
    shared = replace(plain, site_rate_sigma=1.5, rate_sigma=0.5)

    def between_site_share(params: SynthParams) -> float:
        rate = np.log(source_truth(params).link_rate)
        site_mean = np.bincount(np.arange(rate.size) // 4, weights=rate) / 4
        return float(site_mean.var() / rate.var())

    assert between_site_share(plain) < 0.4  # independent draws: a quarter, by chance
    assert between_site_share(shared) > 0.8
    # The factor has its own stream: the other draws are as without it.
    a, b = source_truth(plain), source_truth(replace(plain, site_rate_sigma=1.0))
    assert np.array_equal(a.profit, b.profit) and np.array_equal(a.decay, b.decay)
    assert not np.array_equal(a.link_rate, b.link_rate)
