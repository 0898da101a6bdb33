"""A deterministic crawl order that follows given rates: the "LDS" baseline Busa-Fekete et al.
(*A Scalable Crawling Algorithm Utilizing Noisy Change-Indicating Signals*, WWW 2025, Fig. 3)
take from Azar et al., *Tractable near-optimal policies for crawling* (their Algorithm 3, a
low-discrepancy schedule built from the optimal rates).

Algorithm 3's text was not at hand, so this is a reconstruction of the standard construction
(Tijdeman's chairman assignment; Angel, Holroyd, Martin and Propp, *Discrete low-discrepancy
sequences*, which Azar et al. cite), built as earliest-deadline-first over unit jobs: with
``p_i = ρ_i / Σρ`` page ``i``'s share of the slots, its ``k``-th crawl is released at slot time
``(k-1)/p_i`` and due by ``k/p_i``; each slot goes to the released crawl due first. The shares
add up to 1, so every crawl meets its window and after ``n`` slots page ``i`` has between
``⌊n p_i⌋`` and ``⌈n p_i⌉`` crawls: its crawls come nearly evenly spaced at its rate.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


class RateSchedule:
    """The next page to crawl, slot after slot, at the given ``rates`` (only their shares
    matter; pages of rate 0 are never chosen).

    >>> order = RateSchedule([2.0, 1.0, 1.0])
    >>> picks = [order.next_page() for _ in range(400)]
    >>> [picks.count(i) for i in range(3)]
    [200, 100, 100]
    """

    def __init__(self, rates: ArrayLike) -> None:
        values = np.asarray(rates, dtype=np.float64)
        if values.ndim != 1 or not values.size:
            raise ValueError("rates must be a non-empty 1-d array")
        if (~np.isfinite(values) | (values < 0)).any() or not values.sum() > 0:
            raise ValueError("rates must be finite, >= 0 and not all 0")
        shares = values / values.sum()
        # Pages of rate 0 get an infinite period: never released.
        with np.errstate(over="ignore", divide="ignore"):
            self.period = np.where(shares > 0, 1.0 / np.where(shares > 0, shares, 1.0), np.inf)
        self.done: NDArray[np.float64] = np.zeros(values.size)
        self.slot = 0

    def next_page(self) -> int:
        with np.errstate(invalid="ignore"):
            release = np.where(self.done > 0, self.done * self.period, 0.0)
        released = release <= self.slot * (1.0 + 1e-12)
        due = np.where(released, (self.done + 1.0) * self.period, np.inf)
        page = int(due.argmin())
        self.done[page] += 1.0
        self.slot += 1
        return page


__all__ = ["RateSchedule"]
