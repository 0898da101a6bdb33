"""What a crawl adds to the learned estimates before it plans: the user's value of each site
and the sites' temporal scores, and no budget for sources it will never crawl again."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.plan import Estimates


def valued(
    estimates: Estimates,
    *,
    scores: FloatArray | None,
    clicked: NDArray[np.bool_] | None,
    weights: FloatArray | None,
    off: list[int],
) -> Estimates:
    """``estimates`` with each site's ``scores`` scaling the prior ``P`` of its sources not
    ``clicked`` (docs/how-it-works.rst, "Ranking sites by how temporal they are"), each site's
    ``weights`` scaling the value of its pages, clicks or not (``ECHO_SITE_WEIGHTS``), and a
    rate of 0 for the sources ``off`` the schedule (retired or removed: never crawled again,
    no share of the budget either)."""
    if scores is not None and clicked is not None:
        estimates = replace(
            estimates, profit=np.where(clicked, estimates.profit, estimates.profit * scores)
        )
    if weights is not None:
        mean = estimates.mean_clicks
        estimates = replace(
            estimates,
            profit=estimates.profit * weights,
            mean_clicks=None if mean is None else mean * weights,
        )
    if off:
        link_rate = estimates.link_rate.copy()
        link_rate[off] = 0.0
        estimates = replace(estimates, link_rate=link_rate)
    return estimates


__all__ = ["valued"]
