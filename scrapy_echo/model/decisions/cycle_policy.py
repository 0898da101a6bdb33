"""ECHO-newpages with the week's publishing cycle (Pham et al.'s time of day and day of week):
the experimental policy ``echo-cycles`` (docs/how-it-works.rst, "Daily and weekly cycles")."""

from __future__ import annotations

from dataclasses import replace
from typing import ClassVar

import numpy as np

from scrapy_echo.model.decisions.echo_newpages import EchoNewPages
from scrapy_echo.model.decisions.policies import SolveJob
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.plan import Estimates


class EchoCycles(EchoNewPages):
    """ECHO-newpages with each source's rate varying over the week (experimental: it joins
    ECHO-newpages once it wins at every budget, docs/benchmarks.rst).

    The plan is solved for each source's weekly-average rate (its window's rate over the
    cycle's mean across that window), and a source's recrawl value weighs the links waiting
    on it by how busy the week has been since its last crawl: ``V(τ) m̄(last, now)``, due at
    ``ω`` as ever."""

    name = "echo-cycles"
    uses_cycles: ClassVar[bool] = True

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        # ∫ m up to each source's last crawl, and the crawl times it was computed for: only
        # the sources crawled since are computed again.
        self._upto_last = np.zeros(0)
        self._last_seen = np.zeros(0)

    def solve_job(self, estimates: Estimates, crawl_rate: float) -> SolveJob:
        factor = self.rate_factor
        if factor is not None and factor.size == len(estimates):
            estimates = replace(estimates, link_rate=estimates.link_rate * factor)
        self._last_seen = np.zeros(0)  # a new profile: every source computed again
        return super().solve_job(estimates, crawl_rate)

    def _cycle(self, now: float, last_crawl: FloatArray) -> FloatArray | None:
        profile = self.profile
        if profile is None or not profile.fitted:
            return None
        last = np.where(np.isfinite(last_crawl), np.minimum(last_crawl, now), now)
        if self._last_seen.size != last.size:
            self._upto_last, self._last_seen = profile.cumulative(last), last.copy()
        else:
            moved = np.flatnonzero(last != self._last_seen)
            if moved.size:
                self._upto_last[moved] = profile.cumulative(last[moved])
                self._last_seen[moved] = last[moved]
        span = now - last
        upto_now = float(profile.cumulative(np.array([now]))[0])
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(span > 0, (upto_now - self._upto_last) / span, 1.0)


__all__ = ["EchoCycles"]
