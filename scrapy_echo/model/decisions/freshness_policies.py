"""The discrete, bandwidth-controlled policies of Busa-Fekete et al., *A Scalable Crawling
Algorithm Utilizing Noisy Change-Indicating Signals* (WWW 2025), in their own freshness model:
crawl slots come at a constant total rate, and each goes to one page.

- :class:`Greedy` (the paper's GREEDY): the page with the highest crawl value ``V_i`` at the
  time since its last crawl, signals ignored; the value level the argmax reaches plays the
  role of ``η``, so no optimum is ever computed and a new budget is followed at once.
- :class:`GreedyCis` (GREEDY-CIS): signals taken as noiseless, so a page with a signal since
  its last crawl is surely stale and bids its cap ``μ/Δ``; without one, ``V`` with ``ν = 0``.
- :class:`GreedyNcis` (GREEDY-NCIS, the index policy of Lemma 1): ``V_i(τ^eff_i)``, the
  value at the effective time that noisy signals push forward.
- :class:`Lds`: the low-discrepancy schedule of the given rates
  (:class:`scrapy_echo.model.decisions.rate_schedule.RateSchedule`), state ignored.

The mechanics (argmax per slot, the CIS variant's cap) follow the paper's names and captions;
its Algorithm 1 is not in the digest at hand, so they are a reconstruction.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.decisions.rate_schedule import RateSchedule
from scrapy_echo.model.refetch.signal_renewal import (
    FloatArray,
    SignalPages,
    crawl_value,
    periodic_value,
)

TABLE_POINTS = 256  # V_i tabulated per page for GREEDY-NCIS, geometric in ι
TABLE_SPAN = 40.0  # tabulated up to ι = TABLE_SPAN/Δ^u: there V is the cap to 1e-15
TABLE_STRETCH = 1e4  # ratio of the last grid step to the first


class SlotPolicy(Protocol):
    name: str

    def choose(self, elapsed: FloatArray, signals: NDArray[np.int64]) -> int:
        """The page that gets this slot, from each page's time since its last crawl and
        number of signals since."""
        ...


class Greedy:
    name = "GREEDY"

    def __init__(self, pages: SignalPages) -> None:
        self.mu, self.delta = pages.mu, pages.delta

    def choose(self, elapsed: FloatArray, signals: NDArray[np.int64]) -> int:
        return int(periodic_value(self.mu, self.delta, elapsed).argmax())


class GreedyCis:
    name = "GREEDY-CIS"

    def __init__(self, pages: SignalPages) -> None:
        self.pages = pages
        self.delta = pages.delta
        self.observable = np.where(pages.delta_o > 0, pages.delta_o, 1.0)

    def choose(self, elapsed: FloatArray, signals: NDArray[np.int64]) -> int:
        p = self.pages
        # V with ν = 0 in closed form: E[L] = (1 - e^{-Δ^o t})/Δ^o (t when Δ^o = 0).
        length = np.where(p.delta_o > 0, -np.expm1(-p.delta_o * elapsed) / self.observable, elapsed)
        fresh = -np.expm1(-self.delta * elapsed) / self.delta
        value = p.mu * (fresh - np.exp(-p.delta_u * elapsed) * length)
        return int(np.where(signals > 0, p.cap, value).argmax())


class GreedyNcis:
    name = "GREEDY-NCIS"

    def __init__(
        self,
        pages: SignalPages,
        *,
        points: int = TABLE_POINTS,
        span: float = TABLE_SPAN,
        stretch: float = TABLE_STRETCH,
    ) -> None:
        if points < 2:
            raise ValueError(f"points must be >= 2, got {points!r}")
        if not span > 0 or not stretch > 1:
            raise ValueError("span must be > 0 and stretch > 1")
        self.pages = pages
        self.step = pages.signal_step()
        self.last = points - 1
        self.log_stretch = float(np.log(stretch))
        self.span = span / pages.delta_u
        unit = np.expm1(self.log_stretch * np.arange(points) / self.last) / (stretch - 1.0)
        grid = self.span[:, None] * unit[None, :]
        repeated = _repeat(pages, points)
        self.table = crawl_value(repeated, grid.ravel()).reshape(len(pages), points)
        self.rows = np.arange(len(pages))

    def choose(self, elapsed: FloatArray, signals: NDArray[np.int64]) -> int:
        return int(self.values(elapsed, signals).argmax())

    def values(self, elapsed: FloatArray, signals: NDArray[np.int64]) -> FloatArray:
        """``V_i(τ^eff_i)`` interpolated in the table (the cap past its end)."""
        tau = self.pages.effective_time(elapsed, signals)
        with np.errstate(invalid="ignore"):
            ratio = np.minimum(tau / self.span, 1.0)
        where = self.last * np.log1p(ratio * np.expm1(self.log_stretch)) / self.log_stretch
        low = np.minimum(where.astype(np.int64), self.last - 1)
        frac = where - low
        value = (1 - frac) * self.table[self.rows, low] + frac * self.table[self.rows, low + 1]
        return np.where(tau >= self.span, self.pages.cap, value)


class Lds:
    name = "LDS"

    def __init__(self, rates: FloatArray) -> None:
        self.schedule = RateSchedule(rates)

    def choose(self, elapsed: FloatArray, signals: NDArray[np.int64]) -> int:
        return self.schedule.next_page()


def _repeat(pages: SignalPages, times: int) -> SignalPages:
    return SignalPages(
        np.repeat(pages.mu, times),
        np.repeat(pages.delta_o, times),
        np.repeat(pages.delta_u, times),
        np.repeat(pages.nu, times),
    )


__all__ = ["Greedy", "GreedyCis", "GreedyNcis", "Lds", "SlotPolicy"]
