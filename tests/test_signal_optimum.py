"""The renewal formulas and the Theorem 1 optimum of Busa-Fekete et al., *A Scalable Crawling
Algorithm Utilizing Noisy Change-Indicating Signals*, against a Monte-Carlo simulation of the
crawl cycle, the periodic optimum without signals, and their limits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.refetch.signal_optimum import signal_optimum, thresholds_for
from scrapy_echo.model.refetch.signal_renewal import (
    SignalPages,
    crawl_value,
    cycle_means,
    periodic_value,
    poisson_reaches,
)


def one(mu: float, delta_o: float, delta_u: float, nu: float) -> SignalPages:
    return SignalPages.of(mu=[mu], delta_o=[delta_o], delta_u=[delta_u], nu=[nu])


def simulated_cycles(
    page: SignalPages, iota: float, n: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Cycle lengths and fresh times drawn event by event: signals at rate Δ^o+ν, each a
    change with probability Δ^o/(Δ^o+ν), unobservable changes at rate Δ^u; the crawl comes
    the moment t + k c reaches ι."""
    rng = np.random.default_rng(seed)
    rate = float(page.delta_o[0] + page.nu[0])
    precision = float(page.delta_o[0]) / rate if rate else 0.0
    step = float(page.signal_step()[0])
    lengths, fresh = np.empty(n), np.empty(n)
    for i in range(n):
        t, k, changed = 0.0, 0, rng.exponential(1.0 / float(page.delta_u[0]))
        while True:
            left = iota - k * step if k else iota
            nxt = t + rng.exponential(1.0 / rate) if rate else math.inf
            if left <= nxt:
                end = left
                break
            t, k = nxt, k + 1
            if rng.random() < precision:
                changed = min(changed, t)
            if t + k * step >= iota:
                end = t
                break
        lengths[i], fresh[i] = end, min(end, changed)
    return lengths, fresh


@pytest.mark.parametrize(
    ("mu", "delta_o", "delta_u", "nu", "iota"),
    [
        (1.0, 0.6, 0.4, 0.9, 2.0),  # noisy signals, several per cycle
        (2.0, 1.5, 0.5, 0.3, 1.0),  # precise signals
        (1.0, 0.8, 0.2, 0.0, 3.0),  # noiseless: one signal ends the cycle
        (1.0, 0.0, 1.0, 2.0, 1.5),  # signals that say nothing: periodic
    ],
)
def test_cycle_means_match_a_simulated_cycle(
    mu: float, delta_o: float, delta_u: float, nu: float, iota: float
) -> None:
    page = one(mu, delta_o, delta_u, nu)
    lengths, fresh = simulated_cycles(page, iota, 20_000, seed=11)
    length, fresh_mean = (float(v[0]) for v in cycle_means(page, [iota]))
    # 4 standard errors: a wrong term (a missing k, a wrong weight) is off by far more.
    assert abs(lengths.mean() - length) <= 4 * lengths.std() / math.sqrt(lengths.size)
    assert abs(fresh.mean() - fresh_mean) <= 4 * fresh.std() / math.sqrt(fresh.size)


def test_poisson_reaches_is_the_poisson_tail() -> None:
    for n, x in [(1, 0.3), (4, 2.5), (30, 29.0), (200, 180.0), (3, 50.0)]:
        direct = 1.0 - sum(math.exp(-x + j * math.log(x) - math.lgamma(j + 1)) for j in range(n))
        assert poisson_reaches(n, x) == pytest.approx(direct, abs=1e-13)


def test_without_signals_the_value_is_cho_and_garcia_molinas() -> None:
    pages = SignalPages.of(mu=[1.0, 3.0], delta_o=[0.7, 0.2], delta_u=[0.3, 1.1], nu=[0.5, 0.1])
    plain = pages.without_signals()
    iota = np.array([0.4, 2.5])
    expected = periodic_value(plain.mu, plain.delta, iota)
    assert crawl_value(plain, iota) == pytest.approx(expected, rel=1e-12)
    # Signals that carry nothing (Δ^o = 0) give the same value at the same total rate.
    mute = SignalPages.of(mu=[1.0, 3.0], delta_o=[0.0, 0.0], delta_u=[1.0, 1.3], nu=[0.5, 0.1])
    assert crawl_value(mute, iota) == pytest.approx(expected, rel=1e-12)


def test_the_periodic_optimum_has_equal_marginal_values() -> None:
    """Without signals each crawled page's marginal freshness per crawl, d(μ f)/dρ with
    f = ρ(1 - e^{-Δ/ρ})/Δ, is the same η (Cho and Garcia-Molina's KKT condition), computed
    here by finite differences, independently of V."""
    rng = np.random.default_rng(5)
    pages = SignalPages.of(
        mu=rng.lognormal(size=12),
        delta_o=np.zeros(12),
        delta_u=rng.lognormal(size=12),
        nu=np.zeros(12),
    )
    opt = signal_optimum(pages, 6.0)
    crawled = opt.rates > 0
    assert crawled.sum() >= 3

    def served(rho: np.ndarray) -> np.ndarray:
        return (
            pages.mu[crawled] * rho * -np.expm1(-pages.delta[crawled] / rho) / pages.delta[crawled]
        )

    rho, h = opt.rates[crawled], 1e-6
    marginal = (served(rho + h) - served(rho - h)) / (2 * h)
    assert marginal == pytest.approx(np.full(marginal.size, opt.eta), rel=1e-5)
    # A page left out is worth at most η even at its first crawl (its cap μ/Δ).
    assert (pages.cap[~crawled] <= opt.eta * (1 + 1e-9)).all()


def test_the_threshold_maximizes_the_pages_lagrangian() -> None:
    page = one(1.5, 0.9, 0.4, 0.6)
    eta = 0.4
    iota = float(thresholds_for(page, eta)[0])
    grid = np.linspace(0.05, 12.0, 2000)
    many = SignalPages.of(
        mu=[1.5] * grid.size,
        delta_o=[0.9] * grid.size,
        delta_u=[0.4] * grid.size,
        nu=[0.6] * grid.size,
    )
    length, fresh = cycle_means(many, grid)
    reward = (1.5 * fresh - eta) / length
    assert grid[int(reward.argmax())] == pytest.approx(iota, abs=2 * (grid[1] - grid[0]))


def test_noiseless_signals_have_the_closed_form() -> None:
    page = one(1.0, 0.7, 0.3, 0.0)
    iota = 1.7
    expected = -math.expm1(-iota) - math.exp(-0.3 * iota) * -math.expm1(-0.7 * iota) / 0.7
    assert crawl_value(page, [iota])[0] == pytest.approx(expected, rel=1e-12)


def test_very_noisy_signals_approach_no_signals() -> None:
    """As ν grows each signal says less (c → 0) but they come faster: k c → t Δ^o/Δ^u, so
    τ^eff → t Δ/Δ^u and V(ι) tends to the no-signal value at t = ι Δ^u/Δ."""
    plain = crawl_value(one(1.0, 0.0, 1.0, 0.0), [1.0])[0]
    gaps = [
        abs(crawl_value(one(1.0, 0.5, 0.5, nu), [2.0])[0] - plain) for nu in (0.5, 5.0, 50.0, 500.0)
    ]
    assert gaps[0] > gaps[1] > gaps[2] > gaps[3] and gaps[3] < 0.01 * plain


rates = st.floats(0.05, 5.0)


@given(
    mu=rates,
    delta_o=st.floats(0.0, 3.0),
    delta_u=rates,
    nu=st.floats(0.0, 3.0),
    a=st.floats(0.01, 10.0),
    b=st.floats(0.01, 10.0),
)
def test_the_value_rises_with_the_threshold_to_its_cap(
    mu: float, delta_o: float, delta_u: float, nu: float, a: float, b: float
) -> None:
    page = one(mu, delta_o, delta_u, nu)
    low, high = sorted((a, b))
    v_low, v_high = crawl_value(page, [low])[0], crawl_value(page, [high])[0]
    cap = page.cap[0]
    assert v_low >= 0
    assert v_low <= v_high + 1e-12 * cap  # rounding only
    assert v_high <= cap * (1 + 1e-12)


@pytest.mark.slow  # (over 6 s: the README's quick command leaves it out)
@settings(max_examples=15)  # each solves a whole optimum (about 1 s)
@given(seed=st.integers(0, 10_000), budget=st.floats(0.2, 40.0))
def test_the_optimum_spends_the_budget(seed: int, budget: float) -> None:
    rng = np.random.default_rng(seed)
    size = 8
    delta = rng.lognormal(size=size)
    pages = SignalPages.from_quality(
        mu=rng.lognormal(size=size),
        delta=delta,
        recall=rng.uniform(0, 0.9, size),
        precision=rng.uniform(0.2, 1, size),
    )
    opt = signal_optimum(pages, budget)
    assert opt.rates.sum() == pytest.approx(budget, rel=1e-6)
    assert 0 <= opt.accuracy <= 1
    assert opt.total_loss == pytest.approx(float((pages.mu * (1 - opt.freshness)).sum()))
    crawled = np.isfinite(opt.thresholds)
    assert crawl_value(pages, opt.thresholds)[crawled] == pytest.approx(
        np.full(crawled.sum(), opt.eta), rel=1e-6
    )
    # Signals can only help: the optimum without them serves no more requests fresh.
    assert signal_optimum(pages.without_signals(), budget).accuracy <= opt.accuracy + 1e-9


def test_bad_parameters_name_themselves() -> None:
    with pytest.raises(ValueError, match="delta_u must be"):
        SignalPages.of(mu=[1.0], delta_o=[1.0], delta_u=[0.0], nu=[1.0])
    with pytest.raises(ValueError, match="budget must be"):
        signal_optimum(one(1.0, 0.0, 1.0, 0.0), 0.0)
    with pytest.raises(ValueError, match="eta must be"):
        thresholds_for(one(1.0, 0.0, 1.0, 0.0), -1.0)
    with pytest.raises(ValueError, match="recall must be"):
        SignalPages.from_quality(mu=[1.0], delta=[1.0], recall=[1.0], precision=[0.5])
