"""The learner that turns crawl yields and clicks into estimates for the policy."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_echo.model.estimation.learning import SourceLearner
from scrapy_echo.model.estimation.priors import ColdStart


def test_estimates_before_any_data_are_the_cold_start() -> None:
    cold = ColdStart(link_rate=0.5, profit=2.0, decay=1e-3)
    est = SourceLearner(3, cold=cold).estimates(now=0.0)
    assert est.link_rate.tolist() == [0.5] * 3
    assert est.profit.tolist() == [2.0] * 3
    assert est.decay.tolist() == [1e-3] * 3


def test_learns_link_rate_and_clicks() -> None:
    learner = SourceLearner(2, bin_width=60.0, bins=10, grace=0.0)
    for t, n in [(0.0, 0), (600.0, 6), (1200.0, 6)]:
        learner.record_crawl(0, t, n)
    rng = np.random.default_rng(0)
    for j in range(200):
        learner.add_page(j, source=0, appeared=float(j))
    page = rng.integers(0, 200, 4000)
    ts = page + rng.exponential(120.0, 4000)  # μ = 1/120 s
    learner.add_clicks(page.tolist(), ts.tolist(), [1] * 4000)
    est = learner.estimates(now=5000.0)
    # 12 links in 1200 s, plus one prior link at the pooled rate (the same 12/1200).
    assert est.link_rate[0] == pytest.approx(13 / (1200 + 1 / 0.01))
    assert est.profit[0] == pytest.approx(4000 / 200, rel=0.1)
    assert est.decay[0] == pytest.approx(1 / 120, rel=0.1)
    assert not np.isnan(est.profit).any() and not np.isnan(est.link_rate).any()


def test_clicks_before_the_crawl_wait_for_the_page() -> None:
    learner = SourceLearner(1, bin_width=60.0, bins=5)
    learner.add_clicks(["early"], [10.0], [7])  # the page is not crawled yet
    learner.add_page("early", source=0, appeared=0.0)
    table = learner.clicks.table(now=400.0)
    assert table.increments[0, 0] == 7.0


def test_pending_clicks_are_bounded_and_counted() -> None:
    learner = SourceLearner(1, pending_horizon=100.0, max_pending=3)
    learner.add_clicks(["a", "b", "c", "d"], [1.0, 2.0, 3.0, 4.0], [1, 1, 1, 1])
    assert learner.dropped_clicks == 1  # the oldest page's click went first
    learner.add_clicks(["e"], [500.0], [1])  # everything older than 100 s expires
    assert learner.dropped_clicks == 4
    learner.add_page("a", source=0, appeared=0.0)  # too late: its click is gone
    assert learner.clicks.table(now=1e5).increments.sum() == 0.0


def test_sources_added_at_run_time() -> None:
    learner = SourceLearner(1)
    learner.record_crawl(4, 0.0, 0)
    assert learner.sources == 5
    assert learner.estimates(now=1.0).link_rate.size == 5


def test_clicks_caught_counts_only_clicks_after_the_crawl() -> None:
    """The paper's profit p_j(Δt) is the clicks a page gets after its crawl: clicks stamped
    before it (site analytics see them) were caught by no one."""
    learner = SourceLearner(1, bin_width=60.0, bins=10)
    learner.add_clicks(["a"], [5.0], [4])  # before "a" is even crawled: waits
    learner.add_page("a", source=0, appeared=0.0, crawled=30.0)
    learner.add_clicks(["a", "a", "a"], [20.0, 30.0, 90.0], [2, 3, 5])
    assert learner.clicks_caught == 3 + 5


def test_the_candidate_p_are_scored_by_the_clicks_that_follow() -> None:
    """Forty sources, half drawing a hundred times the clicks per page of the others: the
    learned priors' P, which tell the two kinds apart, predict the next clicks better than the
    paper's one pessimistic pooled prior, and the learner says so (docs/how-it-works.rst,
    "Estimators that earn their place")."""
    rng = np.random.default_rng(3)
    hour, decay = 3600.0, np.log(2.0) / 7200.0
    profit = np.where(np.arange(40) % 2 == 0, 0.3, 30.0)
    learner = SourceLearner(40, bins=24, bin_width=1200.0, refit_every=hour)
    pages: list[tuple[str, int, float]] = []
    for h in range(30):
        now = h * hour
        for source in range(40):
            for i in range(3):
                page = f"{source}/{h}/{i}"
                learner.add_page(page, source=source, appeared=now, crawled=now)
                pages.append((page, source, now))
        # The clicks of the hour just past, on every page young enough to draw some.
        rows = []
        for page, source, born in pages:
            a, b = now - born, now + hour - born
            share = np.exp(-decay * a) - np.exp(-decay * b)
            count = rng.poisson(profit[source] * share)
            if count:
                rows.append((page, now + hour / 2, float(count)))
        if rows:
            learner.add_clicks(*zip(*rows, strict=True))
        learner.estimates(now + hour, learned_priors=True)
    scores = learner.click_scores
    assert scores.crawls > 40  # several fits' batches, each source's scored
    loglik = dict(zip(scores.names, scores.loglik, strict=True))
    assert loglik["learned"] > loglik["plain"] + 100
    assert scores.names[scores.chosen] == "learned"
    # Saved and restored, the scores go on where they were.
    back = SourceLearner.from_data(learner.to_data())
    assert np.array_equal(back.click_scores.loglik, scores.loglik)


def test_rows_no_clock_could_stamp_are_ignored_not_kept_waiting() -> None:
    learner = SourceLearner(1, pending_horizon=100.0)
    learner.add_clicks(["a", "b"], [10.0, 20.0], [1, 1])  # waiting for their pages
    learner.add_clicks(["c", "d", "e"], [1e300, float("nan"), 30.0], [5, 1, float("inf")])
    assert learner.pending_clicks == 2 and learner.dropped_clicks == 0  # none dated the others
    assert learner.received == 2.0
