"""The candidate estimators' scores as a report shows them: how well each candidate ``λ`` has
predicted the crawls' new links and each candidate ``P`` the clicks that followed
(prequential log-likelihoods, docs/how-it-works.rst, "Estimators that earn their place").
``scrapy echo-report`` prints them for a crawl's saved state, ``python -m scrapy_echo.sim run
--estimators`` for a replay's final state."""

from __future__ import annotations

from typing import Any

from scrapy_echo.model.estimation.learning import SourceLearner


def estimator_scores(learner: SourceLearner) -> dict[str, Any]:
    """Each candidate's log-likelihood, over how many crawls or sources' click batches, the
    one that leads (ECHO-newpages plans with it), and the clicks' dispersion."""
    rates, profits = learner.predictive, learner.click_scores
    return {
        "estimator_loglik": dict(zip(rates.names, rates.loglik.round(1).tolist(), strict=True)),
        "estimator_crawls": rates.crawls,
        "estimator_leading": rates.names[rates.chosen],
        "profit_estimator_loglik": dict(
            zip(profits.names, profits.loglik.round(1).tolist(), strict=True)
        ),
        "profit_estimator_batches": profits.crawls,
        "profit_estimator_leading": profits.names[profits.chosen],
        "click_dispersion": learner.dispersion,
    }


def estimator_text(s: dict[str, Any]) -> str:
    """:func:`estimator_scores` as lines, each starting with a newline (none for a crawl
    that has scored nothing yet)."""
    text = ""
    if s["estimator_crawls"]:
        scores = ", ".join(f"{name} {ll:+.1f}" for name, ll in s["estimator_loglik"].items())
        text += (
            f"\nλ estimators, log-likelihood of the next crawls' new links over "
            f"{s['estimator_crawls']} crawls: {scores} ({s['estimator_leading']} leads)"
        )
    if s["profit_estimator_batches"]:
        loglik = s["profit_estimator_loglik"]
        scores = ", ".join(f"{name} {ll:+.1f}" for name, ll in loglik.items())
        text += (
            f"\nP estimators, log-likelihood of the clicks that followed over "
            f"{s['profit_estimator_batches']} sources' batches: {scores} "
            f"({s['profit_estimator_leading']} leads)"
        )
    if s["click_dispersion"] > 1:
        text += (
            f"\npages' clicks vary {s['click_dispersion']:.3g} times as much as Poisson "
            "counts: the learned prior of P counts a source's pages as that many times fewer"
        )
    return text


__all__ = ["estimator_scores", "estimator_text"]
