"""Estimators judged by how well they predict: a prequential score of candidate estimates.

Each re-solve, every candidate estimator gives every source a rate (of new links, ``λ``; or
of clicks per page, ``P``); each observation after that then scores each candidate by the
Poisson log-likelihood of what was observed over its exposure, ``N log(λτ) - λτ`` (``log N!``,
the same for all, left out), times the observation's weight; an overflowed hub's count, a
floor, by ``log P(N' ≥ N)``. The sums, pooled over the sources, are Dawid's prequential
log-likelihood: a candidate is scored only on what it did not see. The plan uses the first
candidate until another has predicted better by :data:`MARGIN` (a likelihood ratio of 20,
"strong" evidence on Kass and Raftery's scale), then that one until a third, or the first
again, leads it by as much (docs/how-it-works.rst, "Estimators that earn their place"): a close
race does not flip the plan back and forth.

Pooled over all sources, the sums grow by one term an observation, so on a crawl of any size
the choice settles within hours: a few sources crawled many times decide as well as many
sources crawled a few times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray

# The candidate ``λ`` ``SourceLearner.estimates`` rates: the priors learned from the spread of
# all sources' rates (the default's), the paper's (one pooled rate), and Pham et al.'s regression
# (model.estimation.yield_predictor).
CANDIDATES = ("learned", "plain", "yield")
# The candidate ``P``, scored by the clicks that follow (model.estimation.priors.Candidates):
# the learned prior's posterior mean (which plans with its optimism added) and the paper's.
PROFIT_CANDIDATES = ("learned", "plain")
# How far (in log-likelihood) another candidate must lead the one in use to replace it.
MARGIN = 3.0
# The rate a candidate is taken to predict at least: a rate of 0 that meets a new link would
# score minus infinity and be ruled out for good by one link.
_RATE_FLOOR = 1e-9


class PredictiveScores:
    """The prequential log-likelihoods of candidate ``λ`` estimators, pooled over sources.

    Parameters
    ----------
    names : sequence of str
        The candidates; the first is used until another leads it by :data:`MARGIN`.

    Examples
    --------
    >>> scores = PredictiveScores(("learned", "plain"))
    >>> scores.predict([np.array([1.0, 1.0]), np.array([2.0, 0.5])])
    >>> scores.observe(0, 1.0, 2)  # source 0, crawled 1 s after its previous crawl: 2 links
    >>> scores.observe(1, 2.0, 1)
    >>> [round(float(x), 3) for x in scores.loglik], scores.chosen
    ([-2.307, -1.614], 0)
    >>> for _ in range(7):
    ...     scores.observe(0, 1.0, 2)
    >>> scores.chosen  # "plain" now leads by more than MARGIN
    1
    """

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        self.loglik = np.zeros(len(self.names))
        self.crawls = 0  # observations scored (crawls; for P, sources' batches of clicks)
        self.chosen = 0  # the candidate in use
        self._rates = np.zeros((len(self.names), 0))

    def predict(self, rates: Sequence[FloatArray]) -> None:
        """Each candidate's rate per source, from this re-solve on (one array each)."""
        if len(rates) != len(self.names):
            raise ValueError(f"{len(rates)} candidates' rates for {len(self.names)} names")
        self._rates = np.maximum(np.vstack([np.asarray(r, dtype=np.float64) for r in rates]), 0.0)

    def observe(
        self, source: int, span: float, count: int, *, floor: bool = False, weight: float = 1.0
    ) -> None:
        """A crawl of ``source`` found ``count`` new links over the ``span`` seconds its count
        covers (a source no re-solve has rated yet, or no span, scores nothing); with
        ``floor``, the hub overflowed and showed only ``count`` of them: the crawl is scored
        by ``P(N ≥ count)`` (a candidate predicting more is not wrong there)."""
        if not (0 <= source < self._rates.shape[1]) or not span > 0:
            return
        mean = np.maximum(self._rates[:, source], _RATE_FLOOR) * span
        if floor and count > 0:
            self.loglik += weight * _log_at_least(count, mean)
        else:
            self.loglik += weight * (count * np.log(mean) - mean)
        self.crawls += 1
        self._follow_leader()

    def observe_all(self, spans: FloatArray, counts: FloatArray) -> None:
        """:meth:`observe` for every source at once: ``counts[i]`` events over ``spans[i]``
        (source ``i``'s exposure; those with none, or not rated yet, score nothing)."""
        spans = np.asarray(spans, dtype=np.float64)[: self._rates.shape[1]]
        counts = np.asarray(counts, dtype=np.float64)[: spans.size]
        scored = np.flatnonzero(spans > 0)
        if not scored.size:
            return
        mean = np.maximum(self._rates[:, scored], _RATE_FLOOR) * spans[scored]
        y = counts[scored]
        self.loglik += (y * np.log(mean) - mean).sum(axis=1)
        self.crawls += int(scored.size)
        self._follow_leader()

    def _follow_leader(self) -> None:
        leader = int(np.argmax(self.loglik))
        if self.loglik[leader] - self.loglik[self.chosen] > MARGIN:
            self.chosen = leader

    def to_data(self) -> dict[str, Any]:
        return {
            "names": list(self.names),
            "loglik": self.loglik.tolist(),
            "crawls": self.crawls,
            "chosen": self.chosen,
            "rates": self._rates.tolist(),
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> PredictiveScores:
        scores = cls(data["names"])
        loglik = np.asarray(data["loglik"], dtype=np.float64)
        if loglik.shape != scores.loglik.shape:
            raise ValueError("predictive scores of another number of candidates")
        scores.loglik, scores.crawls = loglik, int(data["crawls"])
        chosen = int(data["chosen"])
        if not 0 <= chosen < len(scores.names):
            raise ValueError(f"predictive scores choosing candidate {chosen}")
        scores.chosen = chosen
        rates = np.asarray(data["rates"], dtype=np.float64).reshape(len(scores.names), -1)
        scores._rates = rates
        return scores


def _log_at_least(count: int, mean: FloatArray) -> FloatArray:
    """``log P(N ≥ count)`` for ``N`` Poisson with each of ``mean``: one minus the lower
    terms where that is not small, else the upper tail summed (no cancellation either way)."""
    log_factorial = np.array([math.lgamma(i + 1) for i in range(count)])
    below = np.exp(np.arange(count)[:, None] * np.log(mean) - mean - log_factorial[:, None])
    below = below.sum(axis=0)
    out: FloatArray = np.log1p(-np.minimum(below, 0.5))
    small = below >= 0.5  # (then the mean is below about ``count``: the tail is short)
    if small.any():
        # Terms past ``count`` fall off once past the mean; 60 more, and twice as many as the
        # mean is above ``count``, reach below 1e-20 of the first.
        low = mean[small]
        extra = count + 60 + int(max(float(low.max()) - count, 0.0) * 2)
        j = np.arange(count, extra)
        tail_factorial = np.array([math.lgamma(i + 1) for i in j])
        log_upper = j[:, None] * np.log(low) - low - tail_factorial[:, None]
        top = log_upper.max(axis=0)
        out[small] = top + np.log(np.exp(log_upper - top).sum(axis=0))
    return out


__all__ = ["CANDIDATES", "MARGIN", "PROFIT_CANDIDATES", "PredictiveScores"]
