"""Estimators judged by how well they predict: a prequential score of candidate ``λ``.

Each re-solve, every candidate estimator gives every source a rate; each crawl of a source
after that (its first excepted) then scores each candidate by the Poisson log-likelihood of the
new links the crawl found over the time since the source's previous crawl,
``N log(λτ) - λτ`` (``log N!``, the same for all, left out). The sums, pooled over the sources,
are Dawid's prequential log-likelihood: a candidate is scored only on crawls it did not see.
The plan uses the first candidate until another has predicted better by :data:`MARGIN`
(a likelihood ratio of 20, "strong" evidence on Kass and Raftery's scale), then that one
until a third, or the first again, leads it by as much (docs/how-it-works.rst, "Estimators
that earn their place"): a close race does not flip the plan back and forth.

Pooled over all sources, the sums grow by one term a crawl, so on a crawl of any size the
choice settles within hours: a few sources crawled many times decide as well as many sources
crawled a few times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray

# The candidates ``SourceLearner.estimates`` rates: the priors learned from the spread of all
# sources' rates (the default's), and the paper's (one pooled rate).
CANDIDATES = ("learned", "plain")
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
        self.crawls = 0  # crawls scored
        self.chosen = 0  # the candidate in use
        self._rates = np.zeros((len(self.names), 0))

    def predict(self, rates: Sequence[FloatArray]) -> None:
        """Each candidate's rate per source, from this re-solve on (one array each)."""
        if len(rates) != len(self.names):
            raise ValueError(f"{len(rates)} candidates' rates for {len(self.names)} names")
        self._rates = np.maximum(np.vstack([np.asarray(r, dtype=np.float64) for r in rates]), 0.0)

    def observe(self, source: int, span: float, count: int) -> None:
        """A crawl of ``source`` found ``count`` new links ``span`` seconds after its previous
        one (a source no re-solve has rated yet, or no span, scores nothing)."""
        if not (0 <= source < self._rates.shape[1]) or not span > 0:
            return
        mean = np.maximum(self._rates[:, source], _RATE_FLOOR) * span
        self.loglik += count * np.log(mean) - mean
        self.crawls += 1
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


__all__ = ["CANDIDATES", "MARGIN", "PredictiveScores"]
