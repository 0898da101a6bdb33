"""Synthetic pages for the figures of Busa-Fekete et al., *A Scalable Crawling Algorithm
Utilizing Noisy Change-Indicating Signals* (WWW 2025): lognormal change and request rates,
signal recall uniform on ``[0, 0.95]`` and precision uniform on ``[0.2, 1]`` (the paper's
Fig. 1 shows real sitemap signals noisy both ways; these ranges are ours, not its data)."""

from __future__ import annotations

import numpy as np

from scrapy_echo.model.refetch.signal_renewal import SignalPages

RATE_SIGMA = 1.0  # lognormal spread of Δ and μ (median 1 per unit of time)
MAX_RECALL = 0.95  # below 1: some changes stay unsignalled, so τ^eff stays finite
PRECISION_RANGE = (0.2, 1.0)


def signal_population(
    pages: int, *, seed: int, sigma: float = RATE_SIGMA, max_recall: float = MAX_RECALL
) -> SignalPages:
    """``pages`` pages drawn from ``seed``.

    >>> len(signal_population(5, seed=1))
    5
    """
    if pages < 1:
        raise ValueError(f"pages must be >= 1, got {pages!r}")
    if not 0 <= max_recall < 1:
        raise ValueError(f"max_recall must be in [0, 1), got {max_recall!r}")
    rng = np.random.default_rng(seed)
    delta = rng.lognormal(0.0, sigma, pages)
    mu = rng.lognormal(0.0, sigma, pages)
    recall = rng.uniform(0.0, max_recall, pages)
    precision = rng.uniform(*PRECISION_RANGE, pages)
    return SignalPages.from_quality(mu=mu, delta=delta, recall=recall, precision=precision)


__all__ = ["signal_population"]
