"""The prequential score of candidate rate estimators (model.estimation.predictive)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.estimation.predictive import MARGIN, PredictiveScores


def test_the_score_is_the_poisson_log_likelihood_up_to_log_n_factorial() -> None:
    scores = PredictiveScores(("a", "b"))
    scores.predict([np.array([0.5]), np.array([0.0])])
    scores.observe(0, 4.0, 3)  # means 2 and 0 (floored): 3 log 2 - 2, and hugely negative
    assert np.isclose(scores.loglik[0], 3 * np.log(2.0) - 2.0)
    assert scores.loglik[1] < -50 and scores.chosen == 0
    scores.observe(0, 0.0, 5)  # no span: nothing to score
    scores.observe(7, 1.0, 1)  # a source no re-solve has rated
    assert scores.crawls == 1


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), spread=st.floats(2.0, 20.0))
def test_the_rates_the_crawls_follow_win_and_the_choice_stays(seed: int, spread: float) -> None:
    rng = np.random.default_rng(seed)
    true = rng.lognormal(-7.0, 1.0, size=50)
    off = true * rng.choice([1 / spread, spread], size=true.size)  # each wrong by `spread`
    scores = PredictiveScores(("off", "true"))
    scores.predict([off, true])
    flips = 0
    for _ in range(400):
        source = int(rng.integers(true.size))
        span = float(rng.exponential(3600.0))
        chosen = scores.chosen
        scores.observe(source, span, int(rng.poisson(true[source] * span)))
        flips += scores.chosen != chosen
    assert scores.chosen == 1 and flips == 1  # switched once, when the lead passed the margin
    assert scores.loglik[1] - scores.loglik[0] > MARGIN
    back = PredictiveScores.from_data(scores.to_data())
    assert back.chosen == 1 and np.array_equal(back.loglik, scores.loglik)
    back.observe(0, 60.0, 1)  # it goes on with the rates it was given
    assert back.crawls == scores.crawls + 1


def test_a_full_hubs_count_is_scored_as_a_floor() -> None:
    """An overflowed hub showed only ``count`` of its new links: a candidate that predicted
    more is not wrong there, and one that predicted fewer pays P(N >= count)."""
    scores = PredictiveScores(("many", "few"))
    scores.predict([np.array([30.0]), np.array([1.0])])
    scores.observe(0, 1.0, 10, floor=True)
    p_few = 1.0 - sum(np.exp(-1.0) / math.factorial(k) for k in range(10))
    assert np.isclose(scores.loglik[1], np.log(p_few))
    assert -1e-5 < scores.loglik[0] <= 0.0  # P(N >= 10) with a mean of 30: almost 1
    assert scores.chosen == 0
    # As an exact count, 10 would also have counted against the mean of 30.
    exact = PredictiveScores(("many", "few"))
    exact.predict([np.array([30.0]), np.array([1.0])])
    exact.observe(0, 1.0, 10)
    lead = np.diff(scores.loglik)[0]
    assert np.diff(exact.loglik)[0] > lead  # (b - a: the floor widens a's lead)


@settings(max_examples=40, deadline=None)
@given(count=st.integers(1, 200), mean=st.floats(1e-3, 500.0))
def test_the_floor_score_is_a_log_probability(count: int, mean: float) -> None:
    scores = PredictiveScores(("a",))
    scores.predict([np.array([mean])])
    scores.observe(0, 1.0, count, floor=True)
    # log P(N >= count) against the sum of the lower terms, where that has no cancellation.
    lower = sum(np.exp(k * np.log(mean) - mean - math.lgamma(k + 1)) for k in range(count))
    assert scores.loglik[0] <= 0.0
    if lower < 0.5:
        assert np.isclose(scores.loglik[0], np.log1p(-lower), rtol=1e-6, atol=1e-12)


def test_weights_count_a_sources_crawls_by_what_its_links_are_worth() -> None:
    scores = PredictiveScores(("a", "b"))
    scores.predict([np.array([1.0, 1.0]), np.array([2.0, 0.5])])
    scores.observe(0, 1.0, 2, weight=3.0)
    scores.observe(1, 1.0, 0, weight=0.5)
    expected = [3 * (2 * np.log(1.0) - 1.0) + 0.5 * -1.0, 3 * (2 * np.log(2.0) - 2.0) + 0.5 * -0.5]
    assert np.allclose(scores.loglik, expected)


def test_every_source_at_once_is_the_sum_of_each() -> None:
    one, many = PredictiveScores(("a", "b")), PredictiveScores(("a", "b"))
    rates = [np.array([0.2, 1.0, 3.0]), np.array([1.0, 1.0, 1.0])]
    one.predict(rates)
    many.predict(rates)
    spans, counts = np.array([2.0, 0.0, 1.5]), np.array([1.0, 4.0, 6.0])
    for source in range(3):
        one.observe(source, float(spans[source]), int(counts[source]))
    many.observe_all(spans, counts)
    assert np.allclose(one.loglik, many.loglik) and one.crawls == many.crawls == 2
