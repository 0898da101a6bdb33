"""The discrete policies of Busa-Fekete et al. (WWW 2025), carried over to ECHO's
profit model for the simulator's comparisons (docs/how-it-works.rst, "Change-indicating
signals").

The paper keeps cached pages fresh; here a source's "staleness" is the profit of the new links
waiting on it, so its value of a crawl is ECHO's index ``V(τ) = (λP/μ) g(μτ)`` (the paper's
crawl value with request rate ``λP`` and change rate ``μ``), and a waiting page is worth its
remaining profit ``P e^{-μ age}``. The paper's digest names the policies and what they take in,
not every detail; what is filled in is said per class.

- ``greedy``: every slot to the highest value, page or source; no solver, no ``ω`` (the level
  the argmax reaches plays its part), so the crawl rate is constant by construction.
- ``greedy-cis``: ``greedy`` taking signals as noiseless: each signal since a source's last
  crawl is a new page surely waiting on it, valued per crawl it takes to collect.
- ``lds``: the low-discrepancy schedule of Azar et al. (the paper's baseline): each source
  crawled as evenly as it can be at the solver's rate ``1/I``, the most behind first, at every
  slot no worthy page takes.
"""

from __future__ import annotations

import numpy as np

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision, Policy
from scrapy_echo.model.decisions.recrawl_index import net_index_cap
from scrapy_echo.model.estimation.change_signals import signal_index
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.plan import Plan

# Each slot moves the level the argmax reaches this far toward the value it went to: the
# level of the last few hundred slots, which a budget change moves within as many.
LEVEL_WEIGHT = 1.0 / 256


class Greedy(Policy):
    """Busa-Fekete et al.'s GREEDY: the slot goes to the waiting page or the source worth most.

    Filled in: a source never crawled is crawled first (as by every policy here), and pages
    and sources are weighed on one scale, the profit a crawl now adds (a page's remaining
    profit; a source's index, which at the optimum equals the same ``ω`` a page must be
    worth)."""

    name = "greedy"
    uses_solver = False

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self.level = 0.0  # the value the argmax reaches, as a moving average over slots

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        plan = self._plan_for(last_crawl)
        first = self._first_crawl(last_crawl)
        if first is not None:
            return first
        best_page, page_value = _best_page(now, frontier, plan)
        if not last_crawl.size:
            return Decision("page", best_page) if best_page >= 0 else None
        source_values = self.source_values(now, last_crawl, plan)
        best_source = int(source_values.argmax())
        if best_page >= 0 and page_value >= source_values[best_source]:
            self._reached(page_value)
            return Decision("page", best_page)
        self._reached(float(source_values[best_source]))
        return Decision("source", best_source)

    def _reached(self, value: float) -> None:
        self.level += LEVEL_WEIGHT * (max(value, 0.0) - self.level)

    def source_values(self, now: float, last_crawl: FloatArray, plan: Plan) -> FloatArray:
        """ECHO's index of every source (0 while backing off), priced with the page crawls
        it triggers: at most :func:`net_index_cap` at the level the slots reach."""
        est = plan.estimates
        n = last_crawl.size
        zero = np.zeros(n)
        elapsed = now - last_crawl
        value = signal_index(
            elapsed, est.link_rate, est.profit, est.decay, zero, zero, zero, zero, omega=0.0
        )
        value = np.minimum(value, net_index_cap(est.link_rate, est.profit, est.decay, self.level))
        return np.where(elapsed >= 0, value, 0.0)


class GreedyCis(Greedy):
    """Busa-Fekete et al.'s GREEDY-CIS: GREEDY with every signal taken as a sure change. The
    paper gives a page known stale its cap; here a source's ``k`` pending signals are ``k`` sure new
    pages, worth ``P Σ_j e^{-μ (now - t_j)}`` for the ``k + 1`` crawls that collect them, on
    the scale pages are weighed on (the cap ``λP/μ``, or the sum alone, would outbid every
    waiting page for good). False signals make it spend crawls on sources with nothing new."""

    name = "greedy-cis"
    _decay_plan: Plan | None = None

    def source_values(self, now: float, last_crawl: FloatArray, plan: Plan) -> FloatArray:
        value = super().source_values(now, last_crawl, plan)
        book = self.signals
        if book is None or not book.received:
            return value
        n = last_crawl.size
        book.grow(n)
        if self._decay_plan is not plan:  # (once per plan, not at every slot)
            book.decay = np.array(plan.estimates.decay, dtype=np.float64)
            self._decay_plan = plan
        count, recent = book.recent(np.arange(n), now)
        # Per crawl it takes to collect them (the source's, then one per page): summed, a
        # backlog of signals would outbid every waiting page for good.
        sure = plan.estimates.profit * recent / (1.0 + count)
        return np.where((count > 0) & (now >= last_crawl), np.maximum(value, sure), value)


class LowDiscrepancy(Policy):
    """The paper's LDS baseline in time rather than in sequence: pages worth ``ω`` first, as
    ECHO-newpages; then, at every slot, the source most behind its rate ``1/I`` (largest
    ``τ/I``), due or not, so that each is crawled as evenly spaced as the budget allows.

    Azar et al.'s Algorithm 3 orders crawls in a sequence at fixed rates
    (:class:`~scrapy_echo.model.decisions.rate_schedule.RateSchedule`, used as such in the
    paper's own model, :mod:`scrapy_echo.sim.signal_freshness`). Here the rates change at
    every re-solve and source crawls share the slots with pages: a sequence started afresh
    at each re-solve knows nothing of when a source was last crawled and spends its few
    source slots on the fastest sources (measured on a 1,000-source trace: 29.1% and 62.3%
    of the upper bound at 0.017 and 0.033 crawls/s, against 54.9% and 77.7% for this rule;
    docs/how-it-works.rst, "The seed's own policies"). Filled in: the pages, which the paper has
    not, the first crawls every policy here makes, and a slot no source is scheduled for
    (a plan that keeps none) going to the source crawled longest ago rather than idle."""

    name = "lds"

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        plan = self._plan_for(last_crawl)
        best_page, page_value = _best_page(now, frontier, plan)
        if best_page >= 0 and page_value >= plan.omega:
            return Decision("page", best_page)
        first = self._first_crawl(last_crawl)
        if first is not None:
            return first
        if not last_crawl.size:
            return None
        elapsed = now - last_crawl
        most_behind, ratio = self._most_behind(elapsed, plan)
        if ratio > 0:
            return Decision("source", most_behind)
        if best_page >= 0:
            return Decision("page", best_page)
        # The plan keeps no source (its estimates say the budget cannot pay for any source's
        # new pages): every slot would go idle for good, the estimates frozen with it (an
        # audit saw no page crawled on a real trace at two budgets). The source crawled
        # longest ago goes instead, as ECHO's own policies do, and refreshes them.
        stalest = int(elapsed.argmax())
        return Decision("source", stalest) if elapsed[stalest] > 0 else None


def _best_page(now: float, frontier: Frontier, plan: Plan) -> tuple[int, float]:
    """The source whose newest waiting page is worth most now, and that worth (-1 and -inf
    when nothing waits). (ECHO-paper has its own, which also drops hopeless pages: the
    reference policy is left as it is.)"""
    if not len(frontier):
        return -1, -np.inf
    waiting, values = Policy._page_values(now, frontier, plan)
    top = int(values.argmax())
    return int(waiting[top]), float(values[top])


__all__ = ["Greedy", "GreedyCis", "LowDiscrepancy"]
