"""The prequential score of candidate rate estimators (model.estimation.predictive)."""

from __future__ import annotations

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
