"""The prior for P learned from all sources (nonparametric empirical Bayes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.model.estimation.learned_prior import MIN_SOURCES, posterior_rates


def two_kinds(seed: int = 1, sources: int = 600) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Half the sources low-quality (P around 0.15), half good (P lognormal around 3); each
    with 5 to 60 pages and Poisson clicks."""
    rng = np.random.default_rng(seed)
    good = rng.random(sources) < 0.5
    true = np.where(good, 3.0 * rng.lognormal(0, 1.0, sources), 0.15)
    pages = rng.integers(5, 60, sources).astype(float)
    profit = rng.poisson(true * pages) / pages
    return true, pages, profit


def test_low_quality_sources_are_not_pulled_up_to_the_pooled_mean() -> None:
    true, pages, profit = two_kinds()
    post = posterior_rates(pages, profit)
    assert post is not None
    low = true == 0.15
    pooled = (pages * profit).sum() / pages.sum()
    linear = (pages * profit + 5 * 0.5 * pooled) / (pages + 5)  # the paper's pooled shrink

    # Typical error of log P on the low-quality half: the learned prior's is far smaller.
    def error(estimate: np.ndarray) -> float:
        return float(np.median(np.abs(np.log(np.maximum(estimate[low], 1e-9) / true[low]))))

    assert error(post) < 0.25
    assert 2 * error(post) < error(linear)
    # And the good sources keep their own values: many clicks outweigh any prior.
    good = ~low & (pages * true > 50)
    assert np.median(np.abs(post[good] / true[good] - 1)) < 0.15


def test_sources_without_pages_get_the_priors_mean_and_too_few_sources_none() -> None:
    true, pages, profit = two_kinds(sources=100)
    pages[:3] = 0
    post = posterior_rates(pages, profit)
    assert post is not None
    assert post[0] == post[1] == post[2] and 0.15 < post[0] < true.max()
    assert posterior_rates(pages[: MIN_SOURCES - 1] * 0 + 3, profit[: MIN_SOURCES - 1]) is None
    assert posterior_rates(np.full(50, 4.0), np.zeros(50)) is None  # no click anywhere


@given(st.integers(0, 2**32 - 1), st.integers(1, 40), st.integers(0, 200))
def test_more_clicks_on_the_same_pages_never_lower_the_posterior(
    seed: int, n: int, clicks: int
) -> None:
    _, pages, profit = two_kinds(seed, sources=60)
    pages = np.append(pages, [n, n])
    profit = np.append(profit, [clicks / n, (clicks + 1) / n])
    post = posterior_rates(pages, profit)
    assert post is not None
    assert post[-1] >= post[-2] * (1 - 1e-12)
    assert np.all(np.isfinite(post)) and np.all(post > 0)


def test_echo_newpages_learns_the_prior_and_echo_paper_keeps_the_pooled_one() -> None:
    from scrapy_echo.model.decisions.registry import make_policy

    assert make_policy("echo-newpages").learned_priors
    assert not make_policy("echo-paper").learned_priors


@pytest.mark.parametrize("bad", [np.nan, -1.0])
def test_unusable_fits_count_as_sources_without_pages(bad: float) -> None:
    _, pages, profit = two_kinds(sources=80)
    profit[0] = bad
    post = posterior_rates(pages, profit)
    assert post is not None and np.isfinite(post[0])


def test_optimism_lifts_the_least_certain_sources_most() -> None:
    _, pages, profit = two_kinds(seed=4)
    pages[:2] = [3.0, 300.0]  # the same clicks per page, on 3 pages and on 300
    profit[:2] = 0.0
    mean = posterior_rates(pages, profit)
    upper = posterior_rates(pages, profit, optimism=2.0)
    assert mean is not None and upper is not None
    assert np.all(upper >= mean)
    lift = upper - mean
    assert lift[0] > 10 * lift[1]  # three pages without a click prove little


def test_a_slow_source_is_not_pulled_up_to_the_pooled_rate() -> None:
    from scrapy_echo.model.estimation.estimators import DecayFit
    from scrapy_echo.model.estimation.priors import ColdStart, apply_cold_start

    rng = np.random.default_rng(5)
    sources = 300
    true = np.where(np.arange(sources) % 2 == 0, 2e-5, 2e-3)  # links/s: slow and busy
    span = np.full(sources, 2 * 86400.0)
    links = rng.poisson(true * span).astype(float)
    nothing = np.full(sources, np.nan)
    fit = DecayFit(nothing, nothing, np.zeros(sources), nothing, np.zeros(sources, bool))
    args = (links / 8, span / 8, fit, ColdStart(), (links, span))  # window: the last eighth

    def error(lam: np.ndarray) -> float:
        return float(np.median(np.abs(np.log(lam[::2] / true[::2]))))

    pooled, _, _ = apply_cold_start(*args)
    learned, _, _ = apply_cold_start(*args, learned_priors=True)
    assert error(learned) < 0.5 * error(pooled)
    assert np.median(learned[1::2] / true[1::2]) == pytest.approx(1.0, abs=0.1)


def test_a_prior_fitted_to_a_sample_of_many_sources_is_the_prior_of_all(monkeypatch) -> None:
    from scrapy_echo.model.estimation import learned_prior

    sources = 3 * learned_prior.FIT_SOURCES + 7  # (fitted to every fourth)
    true, pages, profit = two_kinds(seed=5, sources=sources)
    sampled = learned_prior.posterior_moments(pages, profit)
    monkeypatch.setattr(learned_prior, "FIT_SOURCES", sources)  # every source in the fit
    whole = learned_prior.posterior_moments(pages, profit)
    assert sampled is not None and whole is not None
    (mean, spread), (whole_mean, whole_spread) = sampled, whole
    assert mean.shape == spread.shape == (sources,)
    off = np.abs(mean - whole_mean) / whole_mean
    # Each source's posterior mean within 10% of the whole fit's, nearly all within 3%; the
    # spreads (the optimism added to P) within 5% for the typical source.
    assert float(off.max()) < 0.10 and float(np.quantile(off, 0.99)) < 0.03
    spread_off = np.abs(spread - whole_spread) / np.maximum(whole_spread, 1e-9)
    assert float(np.median(spread_off)) < 0.05
    low = true == 0.15
    assert abs(float(np.median(sampled[0][low])) - 0.15) < 0.05  # still finds the low kind
