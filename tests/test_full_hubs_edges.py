"""The full-hub model at its edges (scrapy_echo.model.intervals.full_hubs): decays that vanish,
estimates that are not numbers, ω beyond the tables, and budgets, solvers and interval bounds the
search must survive without spending more than it has."""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.estimation.crawl_history import CrawlHistory
from scrapy_echo.model.intervals.full_hubs import (
    FullHubs,
    capped,
    full_hub_terms,
    poisson_below,
    solve_with_full_hubs,
)
from scrapy_echo.model.intervals.limits import ScheduleLimits
from scrapy_echo.model.intervals.plan import Estimates
from scrapy_echo.model.intervals.schedule import IntervalSolution
from scrapy_echo.model.intervals.solver import solve_intervals


def _reference(lam: float, profit: float, mu: float, shows: int, tau: float) -> list[float]:
    """``V, M, W`` by their sums of positive terms, in 60 digits: ``V = P Σ_j q^j P(X ≥ j)``,
    ``M = Σ_j P(N ≥ j)`` (``j ≤ K``) and ``V - τV' = P Σ_m p(m) h(m)`` with ``X ~
    Poisson((λ+μ)τ)`` of law ``p``, ``h(m) = Σ_{j ≤ min(m, K)} q^j - [m ≤ K] m q^m``."""
    with localcontext() as ctx:
        ctx.prec, ctx.Emin, ctx.Emax = 60, -(10**9), 10**9
        lam_d, mu_d, tau_d = Decimal(lam), Decimal(mu), Decimal(tau)
        q = lam_d / (lam_d + mu_d)

        def law(mean: Decimal) -> list[Decimal]:
            out, term = [], (-mean).exp()
            for m in range(shows + 2):
                out.append(term)
                term = term * mean / (m + 1)
            return out

        p_n, p_x = law(lam_d * tau_d), law((lam_d + mu_d) * tau_d)
        at_least_n = [1 - sum(p_n[:j]) for j in range(shows + 2)]  # P(N ≥ j)
        at_least_x = [1 - sum(p_x[:j]) for j in range(shows + 2)]
        pages = sum(at_least_n[1 : shows + 1])
        value = sum(q**j * at_least_x[j] for j in range(1, shows + 1))
        shown = [sum((q**j for j in range(1, m + 1)), Decimal(0)) for m in range(shows + 1)]
        net = sum(p_x[m] * (shown[m] - m * q**m) for m in range(shows + 1))
        net += at_least_x[shows + 1] * shown[shows]
        cost = 1 + shows * at_least_n[shows + 1]
        return [profit * float(value), float(pages), profit * float(net / cost)]


def _terms(lam: float, profit: float, mu: float, shows: int, tau: float) -> list[float]:
    v, m, w = full_hub_terms(
        np.array([lam]), np.array([profit]), np.array([mu]), np.array([shows]), np.array([tau])
    )
    return [float(v[0]), float(m[0]), float(w[0])]


@pytest.mark.parametrize("mu", [1e-9, 1e-12, 1e-20, 1e-300, 5e-324])
def test_a_vanishing_decay_is_no_decay_not_a_cancellation(mu: float) -> None:
    """The closed forms are differences of terms near 1 scaled by λ/μ: with μ tiny they gave
    V = 0 (1e-300), NaN (5e-324), or an index a million times too large (1e-12, with 300
    shown). The error is now at most ~1e-8 of P M."""
    cases = ((1e-3, 10, 10.0), (1e-3, 10, 1e5), (1e-6, 1, 1e7), (0.1, 20, 1e3), (0.1, 300, 10.0))
    for lam, shows, tau in cases:
        got, want = _terms(lam, 2.0, mu, shows, tau), _reference(lam, 2.0, mu, shows, tau)
        assert np.isfinite(got).all()
        scale = 2.0 * want[1]  # what the pages found are worth undecayed
        for g, w in zip(got, want, strict=True):
            assert abs(g - w) <= 1e-7 * scale


@settings(max_examples=40, deadline=None)
@given(
    lam=st.floats(1e-6, 3.0),
    mu=st.floats(1.2e-8, 1e-2),  # the learner's range of μ
    shows=st.integers(1, 25),
    tau=st.floats(10.0, 1e7),
)
def test_the_terms_match_their_sums_of_positive_terms(lam, mu, shows, tau) -> None:
    got, want = _terms(lam, 2.0, mu, shows, tau), _reference(lam, 2.0, mu, shows, tau)
    for g, w in zip(got, want, strict=True):
        assert abs(g - w) <= 1e-7 * 2.0 * want[1] + 1e-15


def test_an_echo_source_has_echos_index_to_the_last_digits_near_its_series() -> None:
    """g(x) = 1 - (1 + x)e^{-x} was summed to x⁵ below x = 0.01 (1e-10 off there)."""
    lam, mu, tau = 1 / 600, 1e-5, 900.0  # x = 0.009
    x = mu * tau
    g = sum((-1) ** k * (k - 1) * x**k / math.factorial(k) for k in range(2, 14))
    assert _terms(lam, 3.0, mu, 1000, tau)[2] == pytest.approx(lam * 3.0 / mu * g, rel=1e-12)


def _log_terms_sum(mean: float, shows: int) -> tuple[float, float]:
    terms = [k * math.log(mean) - mean - math.lgamma(k + 1) for k in range(shows + 1)]
    return math.fsum(math.exp(t) for t in terms[:shows]), math.exp(terms[shows])


@pytest.mark.parametrize(
    ("mean", "shows"),
    [(1e-9, 1), (0.3, 1), (9.0, 10), (650.0, 700), (1000.0, 1000), (1350.0, 1300), (2500.0, 2400)],
)
def test_poisson_below_from_tiny_means_to_past_the_underflow(mean: float, shows: int) -> None:
    below, at = poisson_below(np.array([mean]), np.array([shows]))
    want_below, want_at = _log_terms_sum(mean, shows)
    assert abs(below[0] - want_below) < 1e-12 and abs(at[0] - want_at) < 1e-12


def test_poisson_below_at_zero_and_nan() -> None:
    below, at = poisson_below(np.array([0.0, math.nan, 1e9]), np.array([3, 3, 3]))
    assert below[0] == 1.0 and at[0] == 0.0
    assert math.isnan(below[1]) and math.isnan(at[1])  # not a number stays one
    assert below[2] == 0.0 and at[2] == 0.0


def _hubs(
    shows: list[float],
    lam: list[float] | None = None,
    profit: list[float] | None = None,
    mu: list[float] | None = None,
) -> Estimates:
    def column(values: list[float] | None, default: float) -> np.ndarray:
        return np.array([default] * len(shows) if values is None else values, dtype=float)

    return Estimates(
        column(lam, 1 / 600), column(profit, 3.0), column(mu, 1e-5), shows=np.array(shows)
    )


def test_estimates_that_are_not_numbers_are_left_to_echo() -> None:
    """A full hub of infinite or undefined λ, P or μ made NaN tables (or was planned with no
    decay); its NaN index won every early recrawl's argmax."""
    inf, nan = math.inf, math.nan
    est = _hubs(
        lam=[1 / 600, inf, 1 / 600, 1 / 600, 1 / 600, 1 / 600],
        profit=[3.0, 3.0, inf, 3.0, 3.0, 3.0],
        mu=[1e-5, 1e-5, 1e-5, inf, nan, -1e-5],
        shows=[10.0] * 6,
    )
    assert capped(est).tolist() == [0]
    hubs = FullHubs.of(est)
    assert np.isfinite(hubs.value).all() and np.isfinite(hubs.index).all()


def test_a_hub_never_crawled_is_worth_nothing_early_rather_than_an_index_error() -> None:
    hubs = FullHubs.of(_hubs(shows=[10.0, 10.0, 10.0]))
    values = hubs.values(np.array([math.nan, 5.0, 5000.0]))
    assert values[:2].tolist() == [0.0, 0.0]
    assert values[2] == pytest.approx(_terms(1 / 600, 3.0, 1e-5, 10, 5000.0)[2], rel=0.02)


def test_omega_below_every_index_above_every_index_and_a_hub_worth_nothing() -> None:
    hubs = FullHubs.of(_hubs(lam=[1 / 600, 1e-300], shows=[10.0, 10.0]))
    assert (hubs.index[1] < 1e-290).all()  # its links (all but) never come
    interval, kept, cost = hubs.at(1e-12)  # below the index at 10 s: crawled at the grid's start
    assert kept.tolist() == [True, False] and interval[0] == 10.0
    assert cost == pytest.approx((1.0 + _terms(1 / 600, 3.0, 1e-5, 10, 10.0)[1]) / 10.0)
    interval, kept, cost = hubs.at(2.0 * hubs.index.max())
    assert not kept.any() and np.isinf(interval).all() and cost == 0.0


def _spent(est: Estimates, sol: IntervalSolution, hubs: FullHubs) -> float:
    """Crawls a second the schedule takes: a kept hub its recrawls and pages, a kept source its
    recrawls and new links, a source not kept its recrawls (when watched)."""
    total = 0.0
    for i, (interval, kept) in enumerate(zip(sol.intervals, sol.kept, strict=True)):
        recrawls = 1.0 / interval if np.isfinite(interval) else 0.0
        if kept and i in hubs.sources:
            assert est.shows is not None and 0 < interval < math.inf
            lam, p, mu = est.link_rate[i], est.profit[i], est.decay[i]
            total += (1.0 + _terms(lam, p, mu, int(est.shows[i]), interval)[1]) * recrawls
        else:
            total += recrawls + (est.link_rate[i] if kept else 0.0)
    return total


# What a hub spends is read off its tables, linear between grid points 2^(1/7) apart: the
# pages its crawls find at the interval itself differ by a few parts in 10,000.
_READ = 1 + 1e-3


class _Counted:
    """ECHO's solver, counting its calls; ``omega`` replaces the ω it returns."""

    def __init__(self, omega: float | None = None) -> None:
        self.calls, self.omega = 0, omega

    def __call__(self, est: Estimates, rate: float) -> IntervalSolution:
        self.calls += 1
        sol = solve_intervals(est.link_rate, est.profit, est.decay, rate)
        return sol if self.omega is None else replace(sol, omega=self.omega)


_MIXED = Estimates(
    np.array([1 / 60, 1 / 300, 1 / 3000, 1 / 3000, 1 / 6000, 1 / 600]),
    np.array([5.0, 3.0, 2.0, 8.0, 1.0, 4.0]),
    np.full(6, 2e-5),
    shows=np.array([10.0, 20.0, 0.0, 0.0, 0.0, 0.0]),
)
_ALL_HUBS = Estimates(
    np.array([1 / 60, 1 / 300]), np.array([5.0, 3.0]), np.full(2, 2e-5), shows=np.array([10, 20.0])
)
# The other source has no decay: kept, it takes its new links and no more (its ω is 0).
_STATIC_REST = Estimates(
    np.array([1 / 60, 1 / 300, 1 / 3000]),
    np.array([5.0, 3.0, 2.0]),
    np.array([2e-5, 2e-5, 0.0]),
    shows=np.array([10.0, 20.0, 0.0]),
)


@pytest.mark.parametrize("budget", [0.0, 1e-9, 1e-4, 0.02, 1.0, 1e6])
@pytest.mark.parametrize("est", [_MIXED, _ALL_HUBS, _STATIC_REST], ids=["mixed", "all", "static"])
def test_the_search_spends_no_more_than_the_budget_in_few_solves(est, budget) -> None:
    """It ended at the middle of its bracket, at times on the side where the hubs spend more
    than the budget (9% more at 0.02 for the mixed sources, 7 million times more at 1e-9 for
    hubs alone, any at 0 beside a source without decay); a rest whose ω is 0 took it down a
    factor e at a time, past ``max_solves``."""
    solve = _Counted()
    sol, hubs = solve_with_full_hubs(est, budget, solve)
    assert math.isfinite(sol.omega) and sol.omega >= 0 and sol.converged
    assert solve.calls <= 40
    assert _spent(est, sol, hubs) <= budget * _READ + 1e-12
    assert not np.isnan(sol.intervals).any()


@pytest.mark.parametrize("omega", [0.0, math.nan])
def test_the_search_survives_a_solver_whose_omega_is_zero_or_not_a_number(omega: float) -> None:
    solve = _Counted(omega)
    sol, hubs = solve_with_full_hubs(_MIXED, 0.02, solve)
    assert math.isfinite(sol.omega) and solve.calls <= 40
    assert _spent(_MIXED, sol, hubs) <= 0.02 * _READ


@settings(max_examples=30, deadline=None)
@given(
    data=st.lists(
        st.tuples(
            st.floats(1e-5, 0.05),  # λ
            st.floats(0.1, 10.0),  # P
            st.sampled_from([0.0, 1e-6, 2e-5, 1e-3]),  # μ
            st.sampled_from([0.0, 0.0, 1.0, 5.0, 30.0]),  # K (0: not a full hub)
        ),
        min_size=1,
        max_size=10,
    ),
    budget=st.floats(1e-6, 10.0),
)
def test_any_mix_of_hubs_and_sources_gets_a_plan_within_its_budget(data, budget) -> None:
    lam, prof, mu, shows = (np.array(column) for column in zip(*data, strict=True))
    est = Estimates(lam, prof, mu, shows=shows)
    solve = _Counted()
    sol, hubs = solve_with_full_hubs(est, budget, solve)
    assert math.isfinite(sol.omega) and sol.omega >= 0 and solve.calls <= 40
    assert _spent(est, sol, hubs) <= budget * _READ + 1e-12


def test_interval_bounds_are_paid_for_and_a_hub_not_kept_is_still_watched() -> None:
    """The bounds were put on the hubs after the search: with ECHO_MAX_INTERVAL every other
    source was watched at it, the solver's ω fell to 0, and the hubs went every 10 s (22 times
    the budget); a hub not kept was never crawled, the bound notwithstanding."""
    est = Estimates(
        np.array([1 / 60, 1 / 600, 1 / 3000, 1 / 600]),
        np.array([5.0, 0.3, 2.0, 4.0]),
        np.full(4, 2e-5),
        shows=np.array([10.0, 10.0, 0.0, 0.0]),
    )
    policy = make_policy("echo-newpages")
    policy.limits = ScheduleLimits(np.zeros(4, np.intp), np.array([np.inf]), max_interval=900.0)
    plan = policy.replan(est, 0.01)
    hubs: FullHubs = policy.full_hubs  # type: ignore[attr-defined]
    solution = IntervalSolution(plan.intervals, plan.omega, plan.kept, 0.0, 0.0, True, 0, "")
    assert _spent(est, solution, hubs) <= 0.01 * _READ
    assert (plan.intervals <= 900.0).all()  # every source, kept or not, looked at now and then
    assert not plan.kept[1]  # (its pages are worth too little)


def test_a_hub_shows_at_least_as_many_links_as_any_of_its_crawls_found() -> None:
    """A dated overflow that found only 3 links (the listing reshuffled, or its others seen on
    another source first) made a hub of 12 one of 3: planned as crawled more often than it
    needs, each crawl costing less than it does."""
    h = CrawlHistory(2, history=4)
    for source in (0, 1):
        h.record(source, 0.0, 0)
        h.record(source, 100.0, 12)  # complete: 12 new links, all shown at once
    h.record(0, 200.0, 3, cut=50.0)
    assert h.shown().tolist() == [12.0, 0.0]  # (the second never overflowed)
    assert h.shown(floors=False).tolist() == [12.0, 0.0]


def test_the_recrawls_of_a_maximum_interval_come_off_what_the_hubs_may_spend() -> None:
    """Twenty sources watched every hour take 0.0056 of the 0.02 crawls a second whatever the
    solver is left, so its ω fell to 0 and the hubs went every 10 s (11 times the budget);
    counting only what the hubs leave it, they would still take 17% past the budget."""
    n = 22
    est = Estimates(
        np.array([1 / 60, 1 / 120] + [1e-5] * 20),
        np.array([5.0, 4.0] + [0.5] * 20),
        np.full(n, 2e-5),
        shows=np.array([10.0, 10.0] + [0.0] * 20),
    )
    policy = make_policy("echo-newpages")
    policy.limits = ScheduleLimits(np.zeros(n, np.intp), np.array([np.inf]), max_interval=3600.0)
    plan = policy.replan(est, 0.02)
    hubs: FullHubs = policy.full_hubs  # type: ignore[attr-defined]
    solution = IntervalSolution(plan.intervals, plan.omega, plan.kept, 0.0, 0.0, True, 0, "")
    assert plan.kept[0] and _spent(est, solution, hubs) <= 0.02 * _READ
