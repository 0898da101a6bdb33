"""The two signal indices side by side (docs/how-it-works.rst, "Change-indicating signals"):
Busa-Fekete et al.'s effective time (the default's), which never falls, and the profit index
(``echo-signal-profit``), which does fall as the pages its signals promise age; and GREEDY's
source index priced with the page crawls a source crawl triggers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.recrawl_index import net_index_cap
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.decisions.signal_policies import Greedy
from scrapy_echo.model.estimation.change_signals import effective_time_index, signal_index
from scrapy_echo.model.intervals.plan import Estimates


def _one(*values: float) -> list[np.ndarray]:
    return [np.array([float(x)]) for x in values]


def _echo(t: float, lam: float, profit: float, mu: float) -> float:
    x = mu * t
    return lam * profit / mu * (-math.expm1(-x) - x * math.exp(-x))


rates = st.floats(1e-6, 1e-2)
quality = st.floats(0.05, 0.95)


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.0, 1e5),
    st.floats(0.0, 1e5),
    st.integers(0, 5),
    st.integers(0, 3),
    rates,
    st.floats(0.1, 100.0),
    rates,
    quality,
    st.floats(1e-7, 1e-2),
)
def test_the_effective_time_index_never_falls_as_time_passes_or_signals_come(
    t: float,
    wait: float,
    k: int,
    more: int,
    lam: float,
    profit: float,
    mu: float,
    recall: float,
    false_rate: float,
) -> None:
    """Lemma 1's premise: time and signals only push the state forward."""
    before = effective_time_index(*_one(t, lam, profit, mu, recall, false_rate, k))
    after = effective_time_index(*_one(t + wait, lam, profit, mu, recall, false_rate, k + more))
    assert float(after[0]) >= float(before[0]) * (1 - 1e-12)
    assert float(after[0]) <= lam * profit / mu * (1 + 1e-9)  # ECHO's cap, never past it


def test_a_signal_moves_the_clock_by_its_odds_of_a_link() -> None:
    """``τ^eff = t + k c``, ``c = -ln(1 - q)/((1 - r) λ)``: with ``r = 0.5`` and ``ν = rλ``
    (precision 1/2) each signal is worth ``ln 2 / (λ/2)`` seconds of waiting."""
    lam, profit, mu = 1e-3, 2.0, 1e-4
    one = effective_time_index(*_one(600.0, lam, profit, mu, 0.5, 0.5 * lam, 1))
    shift = math.log(2.0) / (0.5 * lam)
    assert float(one[0]) == pytest.approx(_echo(600.0 + shift, lam, profit, mu), rel=1e-9)
    silent = effective_time_index(*_one(600.0, lam, profit, mu, 0.0, 0.0, 3))
    assert float(silent[0]) == pytest.approx(_echo(600.0, lam, profit, mu), rel=1e-9)
    # Signals that never fire falsely: the first one says a link waits for sure.
    sure = effective_time_index(*_one(600.0, lam, profit, mu, 0.5, 0.0, 1))
    assert float(sure[0]) == pytest.approx(lam * profit / mu)


def test_a_signal_counts_for_at_most_its_cap_of_links() -> None:
    """``most_links`` bounds the step: a signal of a source whose recall is near 1 (the
    seed's step grows without bound) moves its clock by at most ``most_links / λ``."""
    lam, profit, mu = 1e-3, 2.0, 1e-4
    terms = _one(600.0, lam, profit, mu, 0.99, 0.2 * lam, 2)
    uncapped = effective_time_index(*terms)
    capped = effective_time_index(*terms, most_links=np.array([1.5]))
    assert float(capped[0]) == pytest.approx(_echo(600.0 + 2 * 1.5 / lam, lam, profit, mu))
    assert float(capped[0]) < float(uncapped[0])
    # A cap above the seed's step changes nothing; without signals it never acts.
    loose = effective_time_index(*terms, most_links=np.array([1e6]))
    assert float(loose[0]) == pytest.approx(float(uncapped[0]), rel=1e-12)
    quiet = _one(600.0, lam, profit, mu, 0.99, 0.2 * lam, 0)
    assert float(effective_time_index(*quiet, most_links=np.array([0.1]))[0]) == pytest.approx(
        _echo(600.0, lam, profit, mu)
    )


def test_the_profit_index_falls_between_signals_as_its_promised_page_ages() -> None:
    """What does not carry over from Lemma 1: the page a signal promises loses value while
    it waits, so the profit index can fall (here to a twentieth in 3,000 s), and no
    threshold on one forward-moving number describes it."""
    lam, profit, mu, recall = 1e-3, 10.0, 1e-3, 0.95
    at_signal = signal_index(*_one(1.0, lam, profit, mu, recall, 1e-5, 1, 1.0), omega=1.0)
    later = signal_index(
        *_one(3001.0, lam, profit, mu, recall, 1e-5, 1, math.exp(-mu * 3000.0)), omega=1.0
    )
    # q (P - ω) = 0.99 x 9 at the signal; then the page decays by e^{-3}, time adds little.
    assert float(at_signal[0]) == pytest.approx(0.98955 * 9.0, rel=1e-3)
    assert float(later[0]) < float(at_signal[0]) / 20
    # What holds: its unsignalled part is ECHO's at rate (1 - r)λ, which only grows...
    quiet = [
        signal_index(*_one(t, lam, profit, mu, recall, 1e-5, 0, 0.0), omega=1.0)
        for t in (1.0, 3001.0)
    ]
    assert float(quiet[1][0]) > float(quiet[0][0])
    assert float(quiet[1][0]) == pytest.approx(_echo(3001.0, (1 - recall) * lam, profit, mu))
    # ... and a signal never lowers it.
    assert float(at_signal[0]) >= float(quiet[0][0])


@settings(max_examples=200, deadline=None)
@given(rates, st.floats(0.1, 100.0), st.floats(1e-5, 1e-2), st.floats(0.01, 0.99))
def test_the_priced_cap_is_the_index_of_the_net_profit_waiting(
    lam: float, profit: float, mu: float, share: float
) -> None:
    """Each link fetched costs a crawl worth ``L``: the net profit waiting after ``τ`` is
    ``W(τ) = λ ∫_0^τ (P e^{-μu} - L)^+ du``, and its index ``W - τ W'`` stops growing at
    ``u* = ln(P/L)/μ`` at the cap. Checked by quadrature, not by the cap's closed form."""
    level = share * profit
    u_star = math.log(profit / level) / mu
    tau = 2.0 * u_star  # past u*, where W' = 0
    u = np.linspace(0.0, tau, 20001)
    net = np.maximum(profit * np.exp(-mu * u) - level, 0.0)
    waiting = lam * float(np.sum((net[1:] + net[:-1]) / 2) * (u[1] - u[0]))
    cap = float(net_index_cap(*_one(lam, profit, mu), level=level)[0])
    assert cap == pytest.approx(waiting, rel=1e-5)
    # Below u* the index is ECHO's own, and it reaches the cap at u*.
    assert _echo(u_star, lam, profit, mu) == pytest.approx(cap, rel=1e-9)
    assert _echo(0.5 * u_star, lam, profit, mu) < cap


def test_greedy_prices_a_source_by_the_page_crawls_it_triggers() -> None:
    """A source whose pages are worth less than the level the slots reach finds links it
    will not fetch: GREEDY gives it nothing, however long it waited; a source worth more is
    held to its net cap."""
    policy = make_policy("greedy")
    assert isinstance(policy, Greedy)
    estimates = Estimates(
        link_rate=np.array([1e-3, 1e-3]), profit=np.array([0.5, 4.0]), decay=np.array([1e-4, 1e-4])
    )
    policy.replan(estimates, 0.1)
    policy.level = 1.0
    values = policy.source_values(1e6, np.zeros(2), policy.plan)
    assert float(values[0]) == 0.0
    assert float(values[1]) == pytest.approx(10.0 * (4.0 - 1.0 - math.log(4.0)), rel=1e-9)
    # The level is the value the argmax reaches: it moves toward each slot's winner.
    frontier = Frontier(2)
    frontier.push(1, "page", appeared=1e6 - 10.0, discovered=1e6 - 10.0)
    policy.level = 0.0
    assert policy.choose(1e6, np.zeros(2), frontier) is not None
    assert policy.level > 0.0
