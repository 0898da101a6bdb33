"""The dispersion of pages' clicks (quasi-Poisson ``φ``), measured on the folded pages and
divided into the learned prior of ``P``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.estimation.clicks import ClickHistogram
from scrapy_echo.model.estimation.dispersion import MIN_PAGES, MIN_SOURCES, page_dispersion
from scrapy_echo.model.estimation.estimators import DecayFit
from scrapy_echo.model.estimation.learning import SourceLearner
from scrapy_echo.model.estimation.priors import ColdStart, candidate_estimates
from scrapy_echo.model.estimation.scoreboard import estimator_text


def moments(per_source: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each source's page count, sum of clicks and sum of squares."""
    pages = np.array([len(c) for c in per_source], dtype=float)
    total = np.array([c.sum() for c in per_source], dtype=float)
    squares = np.array([(c.astype(float) ** 2).sum() for c in per_source])
    return pages, total, squares


def test_poisson_pages_measure_about_one_and_varied_pages_their_ratio() -> None:
    rng = np.random.default_rng(3)
    poisson = [rng.poisson(rng.uniform(0.5, 50), 40) for _ in range(200)]
    assert page_dispersion(*moments(poisson)) == pytest.approx(1.0, abs=0.1)
    # Each page's own rate drawn from a gamma of shape 2: variance m + m²/2 over mean m.
    varied = [rng.poisson(rng.gamma(2.0, 10.0, 40)) for _ in range(200)]
    assert page_dispersion(*moments(varied)) == pytest.approx(1 + 20.0 / 2, rel=0.15)


def test_too_few_sources_or_pages_measure_nothing() -> None:
    rng = np.random.default_rng(4)
    varied = [rng.poisson(rng.gamma(1.0, 30.0, 40)) for _ in range(MIN_SOURCES - 1)]
    assert page_dispersion(*moments(varied)) == 1.0
    short = [rng.poisson(rng.gamma(1.0, 30.0, MIN_PAGES - 1)) for _ in range(100)]
    assert page_dispersion(*moments(short)) == 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(0, 1e200, allow_nan=False), min_size=0, max_size=12),
        min_size=0,
        max_size=60,
    )
)
def test_any_pages_give_a_finite_dispersion_of_at_least_one(per_source: list[list[float]]) -> None:
    with np.errstate(over="ignore"):  # (absurd counts square to inf: those sources left out)
        measured = moments([np.array(c) for c in per_source])
    value = page_dispersion(*measured)
    assert value >= 1.0 and math.isfinite(value)


def test_the_histogram_measures_its_folded_pages() -> None:
    hist = ClickHistogram(bin_width=60.0, bins=10, grace=0.0)
    rng = np.random.default_rng(5)
    page = 0
    for source in range(40):
        for clicks in rng.poisson(rng.gamma(1.0, 20.0, 12)):
            hist.add_page(page, source=source, appeared=0.0)
            hist.add_clicks([page, page], [10.0, 130.0], [clicks // 2, clicks - clicks // 2])
            page += 1
    assert hist.table(500.0).dispersion == 1.0  # nothing folded yet: young pages only
    table = hist.table(700.0)
    assert table.dispersion == pytest.approx(21.0, rel=0.3)
    again = ClickHistogram.from_data(hist.to_data())
    assert again.table(700.0).dispersion == table.dispersion
    # A state saved before the totals were kept restores with none: φ is 1 until more fold.
    old = {k: v for k, v in hist.to_data().items() if k not in ("totals", "totals_after")}
    assert ClickHistogram.from_data(old).table(700.0).dispersion == 1.0


def test_varied_pages_shrink_a_lucky_source_further() -> None:
    """A source with 3 pages and 30 clicks among sources with 1 click a page: as Poisson its
    P stays near 10; with pages that vary 20 times as much, near the others'."""
    sources = 200
    pages = np.full(sources, 50.0)
    profit = np.full(sources, 1.0)
    pages[0], profit[0] = 3.0, 10.0
    fit = DecayFit(
        profit=profit,
        decay=np.full(sources, 1e-4),
        pages=pages,
        residual=np.zeros(sources),
        fitted=np.ones(sources, dtype=bool),
    )
    links, span = np.ones(sources), np.full(sources, 3600.0)

    def learned(dispersion: float) -> float:
        found = candidate_estimates(links, span, fit, ColdStart(), dispersion=dispersion)
        return float(found.profits["learned"][0])

    assert learned(1.0) > 5.0
    assert learned(20.0) < 2.0
    assert learned(20.0) < learned(5.0) < learned(1.0)


def test_the_learner_takes_the_fits_dispersion_and_keeps_it_in_its_state() -> None:
    learner = SourceLearner(40, bin_width=60.0, bins=10, grace=0.0, refit_every=0.0)
    rng = np.random.default_rng(6)
    page = 0
    for source in range(40):
        learner.record_crawl(source, 0.0, 0)
        for clicks in rng.poisson(rng.gamma(1.0, 20.0, 12)):
            learner.add_page(page, source=source, appeared=0.0)
            learner.add_clicks([page], [30.0], [float(clicks)])
            page += 1
    learner.estimates(300.0, learned_priors=True)
    assert learner.dispersion == 1.0  # no page has its whole horizon seen yet
    learner.add_clicks([0], [650.0], [0.0])  # (a batch: the fit is due again)
    learner.estimates(700.0, learned_priors=True)
    assert learner.dispersion == pytest.approx(21.0, rel=0.3)
    assert SourceLearner.from_data(learner.to_data()).dispersion == learner.dispersion
    broken = learner.to_data()
    broken["fit"] = {**broken["fit"], "dispersion": float("nan")}
    with pytest.raises(ValueError, match="dispersion"):
        SourceLearner.from_data(broken)


def test_the_report_says_how_much_pages_vary_once_measured() -> None:
    scores = {"estimator_crawls": 0, "profit_estimator_batches": 0}
    assert "vary" not in estimator_text({**scores, "click_dispersion": 1.0})
    text = estimator_text({**scores, "click_dispersion": 22.8})
    assert "pages' clicks vary 22.8 times as much as Poisson counts" in text
