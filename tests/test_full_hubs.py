"""The full-hub model (scrapy_echo.model.intervals.full_hubs): a hub that shows only its latest
K links."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.estimation.crawl_history import CrawlHistory
from scrapy_echo.model.intervals.full_hubs import FullHubs, full_hub_terms, poisson_below
from scrapy_echo.model.intervals.plan import Estimates


def _echo(lam: float, profit: float, mu: float, tau: float) -> tuple[float, float, float]:
    """ECHO's own value, pages and index of a crawl after ``tau`` (every link shown)."""
    x = mu * tau
    # g(x) = 1 - (1 + x) e^{-x} = Σ_{k≥2} (-1)^k (k-1) x^k / k!, summed where it cancels.
    g = (
        sum((-1) ** k * (k - 1) * x**k / math.factorial(k) for k in range(2, 12))
        if x < 0.1
        else 1.0 - (1.0 + x) * math.exp(-x)
    )
    return lam * profit / mu * -math.expm1(-x), lam * tau, lam * profit / mu * g


def _terms(lam: float, profit: float, mu: float, shows: int, tau: float) -> tuple[float, ...]:
    v, m, w = full_hub_terms(
        np.array([lam]), np.array([profit]), np.array([mu]), np.array([shows]), np.array([tau])
    )
    return float(v[0]), float(m[0]), float(w[0])


def test_poisson_below_matches_the_sum_and_survives_large_means():
    for mean, shows in ((0.5, 1), (3.0, 4), (12.0, 10), (40.0, 60)):
        below, at = poisson_below(np.array([mean]), np.array([shows]))
        exact = sum(math.exp(-mean) * mean**k / math.factorial(k) for k in range(shows))
        assert below[0] == pytest.approx(exact, rel=1e-12)
        assert at[0] == pytest.approx(math.exp(-mean) * mean**shows / math.factorial(shows))
    below, at = poisson_below(np.array([5000.0, 0.0]), np.array([10, 10]))
    assert below.tolist() == pytest.approx([0.0, 1.0]) and at.tolist() == pytest.approx([0, 0])
    assert np.isfinite(below).all() and np.isfinite(at).all()


@settings(max_examples=60, deadline=None)
@given(
    lam=st.floats(1e-5, 1e-2),
    mu=st.floats(1e-6, 1e-3),
    tau=st.floats(10.0, 2e5),
)
def test_a_hub_that_never_fills_is_echos_source(lam, mu, tau):
    shows = 10 + int(lam * tau + 20 * math.sqrt(lam * tau + 1))  # far above what can come
    got = _terms(lam, 2.0, mu, shows, tau)
    want = _echo(lam, 2.0, mu, tau)
    for g, w in zip(got, want, strict=True):
        assert g == pytest.approx(w, rel=1e-6, abs=1e-12)


def test_value_and_pages_match_a_simulated_hub():
    rng = np.random.default_rng(7)
    for lam, mu, shows, tau in ((1 / 600, 1e-5, 10, 9000.0), (1 / 60, 2e-4, 5, 400.0)):
        values, pages = [], []
        for _ in range(40_000):
            n = rng.poisson(lam * tau)
            ages = np.sort(rng.uniform(0.0, tau, n))[:shows]  # the newest K still shown
            values.append(3.0 * np.exp(-mu * ages).sum())
            pages.append(ages.size)
        v, m, _ = _terms(lam, 3.0, mu, shows, tau)
        assert np.mean(pages) == pytest.approx(m, rel=0.01)
        assert np.mean(values) == pytest.approx(v, rel=0.01)


@pytest.mark.parametrize("mu", [1e-5, 0.0])
def test_the_index_is_where_a_crawls_net_value_per_second_stops_growing(mu):
    """W(τ) = ω exactly where (V - ω(1 + M))/τ is flat: the plan's stationary condition."""
    lam, profit, shows = 1 / 300, 4.0, 10
    for tau in (600.0, 2400.0, 6000.0):
        v, m, w = _terms(lam, profit, mu, shows, tau)
        step = tau * 1e-4

        def net(t: float, omega: float = w) -> float:
            v, m, _ = _terms(lam, profit, mu, shows, t)
            return (v - omega * (1.0 + m)) / t

        slope = (net(tau + step) - net(tau - step)) / (2 * step)
        assert abs(slope) * tau < 1e-6 * max(v, 1e-9)
    if mu == 0.0:  # no decay: every page found is worth P
        assert v == pytest.approx(profit * m)


def test_the_index_of_a_full_hub_rises_sooner_and_stops_at_its_k_pages():
    lam, profit, mu, shows = 1 / 600, 3.0, 1e-5, 10
    _, _, early = _terms(lam, profit, mu, shows, 6000.0)
    assert early > 2 * _echo(lam, profit, mu, 6000.0)[2]  # crawl before it fills
    _, m, late = _terms(lam, profit, mu, shows, 10**7)
    assert m == pytest.approx(shows)
    # Long after: the K newest links, the j-th worth P q^j (q = λ/(λ+μ)), for 1 + K crawls.
    q = lam / (lam + mu)
    assert late == pytest.approx(lam * profit / mu * (1 - q**shows) / (1 + shows), rel=1e-6)


def _hubs(shows: list[float]) -> Estimates:
    n = len(shows)
    return Estimates(np.full(n, 1 / 600), np.full(n, 3.0), np.full(n, 1e-5), shows=np.array(shows))


def test_the_tabulated_index_reads_back_the_index_and_omega_gives_its_interval():
    hubs = FullHubs.of(_hubs([10.0, 25.0, 0.0]))  # the third was never seen full
    assert hubs.sources.tolist() == [0, 1]
    for tau in (3000.0, 4500.0, 20000.0):
        got = hubs.values(np.array([tau, tau]))
        want = [_terms(1 / 600, 3.0, 1e-5, k, tau)[2] for k in (10, 25)]
        assert got.tolist() == pytest.approx(want, rel=0.02)
    assert hubs.values(np.array([0.0, 0.0])).tolist() == [0.0, 0.0]
    omega = _terms(1 / 600, 3.0, 1e-5, 10, 5000.0)[2]
    interval, kept, cost = hubs.at(omega)
    assert kept.all() and interval[0] == pytest.approx(5000.0, rel=0.01)
    assert _terms(1 / 600, 3.0, 1e-5, 25, interval[1])[2] == pytest.approx(omega, rel=0.01)
    shown = zip((10, 25), interval, strict=True)
    pages = [(_terms(1 / 600, 3.0, 1e-5, k, i)[1], i) for k, i in shown]
    assert cost == pytest.approx(sum((1 + m) / i for m, i in pages), rel=0.01)
    # Past what a crawl of the K newest links can be worth, a hub is not recrawled.
    interval, kept, cost = hubs.at(10.0 * hubs.index.max())
    assert not kept.any() and np.isinf(interval).all() and cost == 0.0


def test_echo_newpages_plans_a_full_hub_due_where_its_index_reaches_omega():
    policy = make_policy("echo-newpages")
    n = 6
    est = Estimates(
        np.array([1 / 60, 1 / 300, 1 / 3000, 1 / 3000, 1 / 6000, 1 / 600]),
        np.array([5.0, 3.0, 2.0, 8.0, 1.0, 4.0]),
        np.full(n, 2e-5),
        shows=np.array([10.0, 20.0, 0.0, 0.0, 0.0, 0.0]),
    )
    plan = policy.replan(est, 0.02)
    # A waiting page is still worth its source's P: the plan keeps the estimates given.
    for field in ("link_rate", "profit", "decay", "shows"):
        np.testing.assert_array_equal(getattr(plan.estimates, field), getattr(est, field))
    assert plan.intervals[0] * est.link_rate[0] < 10  # crawled before it fills
    plain = make_policy("echo-censored").replan(est, 0.02)
    # Planned as if it showed every link, the busiest hub waits until far past full.
    assert plain.intervals[0] * est.link_rate[0] > 20
    # (At 0.02 crawls a second both hubs cost more than the budget: the second is not kept.)
    plan = policy.replan(est, 0.03)
    for hub, shows in ((0, 10), (1, 20)):
        assert plan.kept[hub]
        _, _, w = _terms(est.link_rate[hub], est.profit[hub], 2e-5, shows, plan.intervals[hub])
        assert w == pytest.approx(plan.omega, rel=0.05)


def test_crawl_history_knows_how_many_links_a_full_hub_shows():
    h = CrawlHistory(3, history=4)
    for t, n, floor, cut in ((0.0, 0, False, 0.0), (100.0, 7, True, 0.0), (200.0, 3, False, 0.0)):
        h.record(0, t, n, floor=floor, cut=cut)
    h.record(1, 0.0, 0)
    h.record(1, 100.0, 12, cut=30.0)  # a dated overflow
    h.record(2, 0.0, 0)
    h.record(2, 100.0, 50)  # many links, but all the ones that came: not full
    assert h.shown().tolist() == [7.0, 12.0, 0.0]
    assert h.shown(floors=False).tolist() == [0.0, 12.0, 0.0]  # 0 overflowed undated only


def test_a_full_hub_stays_full_after_its_overflow_leaves_the_window():
    # Planned as full, the hub is crawled before it fills: its window soon holds no overflow.
    h = CrawlHistory(1, history=3)
    h.record(0, 0.0, 0)
    h.record(0, 100.0, 10, cut=40.0)
    for t in range(200, 1000, 100):
        h.record(0, float(t), 4)
    assert not h.cuts.any()  # the overflow has left the ring
    assert h.shown(floors=False).tolist() == [10.0]
    back = CrawlHistory.from_dict(h.to_dict())
    assert back.shown(floors=False).tolist() == [10.0]


def test_full_hubs_keep_the_interval_bounds_and_a_limited_host_keeps_echos_plan():
    from scrapy_echo.model.intervals.limits import ScheduleLimits

    est = Estimates(
        np.array([1 / 60, 1 / 60, 1 / 3000]),
        np.array([5.0, 5.0, 2.0]),
        np.full(3, 2e-5),
        shows=np.array([10.0, 10.0, 0.0]),
    )
    policy = make_policy("echo-newpages")
    policy.limits = ScheduleLimits(np.zeros(3, np.intp), np.array([np.inf]), min_interval=2000.0)
    plan = policy.replan(est, 0.02)
    assert plan.kept[:2].all() and (plan.intervals[:2] == 2000.0).all()
    # The second hub's host takes 1 request a second at most: ECHO's solver plans it.
    policy.limits = ScheduleLimits(np.array([0, 1, 0]), np.array([np.inf, 1.0]))
    policy.replan(est, 0.02)
    assert policy.full_hubs.sources.tolist() == [0]  # type: ignore[attr-defined]
