"""ECHO-newpages with Pham et al.'s exploration: the experimental policy ``echo-explore``
(docs/how-it-works.rst, "Exploration"; docs/benchmarks.rst has why it is not the default)."""

from __future__ import annotations

from typing import Any

import numpy as np

from scrapy_echo.model.decisions.echo_newpages import EchoNewPages
from scrapy_echo.model.decisions.exploration import ExplorationShare
from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision, SolveJob
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.plan import Estimates


class EchoExplore(EchoNewPages):
    """ECHO-newpages spending a share of its source crawls on the source crawled longest
    ago, the share tuned by UCB1 over Pham et al.'s exploitation ratios."""

    name = "echo-explore"

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self.exploration = ExplorationShare()

    def solve_job(self, estimates: Estimates, crawl_rate: float) -> SolveJob:
        self.exploration.next_cycle()
        return super().solve_job(estimates, crawl_rate)

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        decision = super().choose(now, last_crawl, frontier)
        if decision is None or decision.kind != "source":
            return decision
        if self._all_crawled != last_crawl.size:  # a first crawl: explores by itself
            return decision
        share = self.exploration
        explore = share.explore_next()
        if explore:
            # Pham et al.'s round robin: the source crawled longest ago (not one backing off).
            held = self._held_back(now, last_crawl)
            waiting = np.where(held <= now, held, np.inf)
            oldest = int(waiting.argmin())
            if np.isfinite(waiting[oldest]):
                decision = Decision("source", oldest)
            else:
                explore = False
        share.crawled(explored=explore)
        return decision

    def to_data(self) -> dict[str, Any]:
        return {"exploration": self.exploration.to_data()}

    def load_data(self, data: dict[str, Any]) -> None:
        self.exploration.load_data(data["exploration"])

    def links_found(self, source: int, appeared: list[float], now: float) -> None:
        if source >= len(self.plan):
            return
        est = self.plan.estimates
        age = np.maximum(now - np.asarray(appeared, dtype=np.float64), 0.0)
        self.exploration.found(float(est.profit[source] * np.exp(-est.decay[source] * age).sum()))


__all__ = ["EchoExplore"]
