"""The paper's baselines (Lefortier et al., section 6), for the simulator's comparisons and as
``ECHO_POLICY`` choices:

- ``echo-schedule``: sources strictly every ``I``; spare slots to the most recently discovered
  new pages; otherwise idle.
- ``echo-greedy``: new pages first; then the source with the most expected profit waiting on
  it, ``P λ τ`` with ``P`` the plain average of clicks per page, as the paper has it (no
  decay, no fit, no solver).
- ``bfs``: new pages first; then the next source in a fixed random order.
- ``fixed-quota``: like echo-schedule, but half of all crawls go to sources (most behind
  schedule first, intervals solved for that half alone) and half to new pages.
- ``frequency``: echo-schedule with every source of equal quality (``P = 1``, one common ``μ``):
  intervals from ``λ`` alone.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision, Policy, SolveJob, then
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.plan import Estimates


class EchoSchedule(Policy):
    name = "echo-schedule"

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        plan = self._plan_for(last_crawl)
        first = self._first_crawl(last_crawl)
        if first is not None:
            return first
        due = self._due_source(now, last_crawl, plan)
        if due is not None:
            return due
        return self._newest_discovered(frontier)


class Frequency(EchoSchedule):
    name = "frequency"

    def solve_job(self, estimates: Estimates, crawl_rate: float) -> SolveJob:
        decay = estimates.decay[np.isfinite(estimates.decay) & (estimates.decay > 0)]
        common = float(np.median(decay)) if decay.size else 1.0 / 3600
        equal = Estimates(
            estimates.link_rate,
            np.ones(len(estimates)),
            np.full(len(estimates), common),
        )
        # Keep the real estimates for reporting; the schedule is the equal-quality one.
        return then(super().solve_job(equal, crawl_rate), self._reported(estimates))


class FixedQuota(Policy):
    name = "fixed-quota"
    source_share: ClassVar[float] = 0.5

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self.source_crawls = 0
        self.page_crawls = 0

    def solve_job(self, estimates: Estimates, crawl_rate: float) -> SolveJob:
        """Intervals solved for the sources' half of the budget alone (the paper's
        Fixed-quota): new pages are paid from the other half, so a source costs only its
        recrawls here and every source worth anything gets a schedule."""
        if not len(estimates):
            return super().solve_job(estimates, crawl_rate)
        # λε and P/ε keep each source's value per second (λP) and drop its pages' cost to
        # a billionth of the budget in all.
        total = float(np.sum(estimates.link_rate))
        eps = 1e-9 * crawl_rate / total if total > 0 else 1.0
        recrawls_only = Estimates(
            estimates.link_rate * eps, estimates.profit / eps, estimates.decay
        )
        job = super().solve_job(recrawls_only, self.source_share * crawl_rate)
        return then(job, self._reported(estimates))

    def to_data(self) -> dict[str, Any]:
        return {"source_crawls": self.source_crawls, "page_crawls": self.page_crawls}

    def load_data(self, data: dict[str, Any]) -> None:
        self.source_crawls, self.page_crawls = int(data["source_crawls"]), int(data["page_crawls"])

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        plan = self._plan_for(last_crawl)
        total = self.source_crawls + self.page_crawls
        sources_turn = self.source_crawls <= self.source_share * total
        page = self._newest_discovered(frontier)
        if sources_turn or page is None:
            source = self._first_crawl(last_crawl)
            if source is None and last_crawl.size:
                most_behind, ratio = self._most_behind(now - last_crawl, plan)
                if ratio > 0:
                    source = Decision("source", most_behind)
            if source is not None:
                self.source_crawls += 1
                return source
        if page is not None:
            self.page_crawls += 1
        return page


class EchoGreedy(Policy):
    name = "echo-greedy"
    uses_solver = False

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        plan = self._plan_for(last_crawl)
        waiting = frontier.waiting_sources()
        if waiting.size:
            best = np.argmax(plan.estimates.average_profit[waiting])
            return Decision("page", int(waiting[best]))
        first = self._first_crawl(last_crawl)
        if first is not None:
            return first
        est = plan.estimates
        waiting_profit = est.average_profit * est.link_rate * (now - last_crawl)
        if not waiting_profit.size or not waiting_profit.max() > 0:
            return None
        return Decision("source", int(waiting_profit.argmax()))


class BreadthFirst(Policy):
    name = "bfs"
    uses_solver = False

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self._rng = np.random.default_rng(seed)
        self._order = np.zeros(0, dtype=np.intp)
        self._next = 0

    def to_data(self) -> dict[str, Any]:
        return {
            "order": self._order.tolist(),
            "next": self._next,
            "rng": self._rng.bit_generator.state,
        }

    def load_data(self, data: dict[str, Any]) -> None:
        order = np.asarray(data["order"], dtype=np.intp)
        if order.ndim != 1 or sorted(order.tolist()) != list(range(order.size)):
            raise ValueError("a BFS order that is not a permutation of the sources")
        rng = np.random.default_rng()
        rng.bit_generator.state = data["rng"]
        self._order, self._next, self._rng = order, int(data["next"]), rng

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        waiting = frontier.waiting_sources()
        if waiting.size:
            return Decision("page", int(waiting[0]))
        n = last_crawl.size
        if n == 0:
            return None
        if self._order.size < n:  # new sources join the cycle in a random order of their own
            added = np.arange(self._order.size, n)
            self._order = np.concatenate([self._order, self._rng.permutation(added)])
        source = int(self._order[self._next % n])
        self._next = (self._next + 1) % n
        return Decision("source", source)


__all__ = ["BreadthFirst", "EchoGreedy", "EchoSchedule", "FixedQuota", "Frequency"]
