"""ECHO-newpages, the default policy: the paper's best and every improvement past it.

Past the paper (:class:`~scrapy_echo.model.decisions.policies.EchoPaper` is the reference,
unchanged):

- the plan honours per-host limits (capacity, interval bounds), and a source crawled less than
  the minimum interval ago is not crawled early either;
- a source backing off after failures, or retired, is not recrawled early;
- change-indicating signals (Busa-Fekete et al.), when the crawl has any: a source whose signals are
  informative is due when its signal index, ECHO's index at their *effective time* (each
  signal moves the source's clock forward), reaches the value of a crawl, ``V ≥ ω``, rather
  than at its planned interval, and is weighed by that index for early recrawls
  (docs/how-it-works.rst, "Change-indicating signals"). With no signals, or useless ones
  (recall not trusted above :data:`~scrapy_echo.model.estimation.change_signals.MIN_RECALL`), it
  schedules exactly as without;
- a source's ``λ`` and ``P`` are shrunk toward priors learned from all sources, and ``P``
  taken at an upper confidence value, so a source valued on a few pages is crawled enough to
  be learned (Pham et al.'s exploration done by optimism; docs/how-it-works.rst, "Estimating
  the parameters" and "Exploration");
- every candidate estimate of ``λ`` (the learned priors', the paper's, Pham et al.'s yield
  predictor) and of ``P`` is scored by how well it predicts the crawl's own observations, for
  ``scrapy echo-report`` and the experimental ``echo-earned`` (docs/how-it-works.rst,
  "Estimators that earn their place");
- a source's long-run ``λ`` borrows pseudo-links from the other sources of its site, as
  many as sites are measured to tell rates apart (none where they do not; Ford et al.'s
  pseudo-observation priors pooled by site, :mod:`scrapy_echo.model.estimation.site_prior`;
  docs/how-it-works.rst, "Rates pooled by site");
- of two sources listing the same pages (Jaccard ≥ 0.7), the one worth less has its shared
  rate credited to the other (Pham et al.'s overlap; docs/how-it-works.rst, "Overlapping
  sources");
- ``λ`` counts a crawl of a hub that overflowed with its links dated over the time since its
  oldest one (Ford et al.), and a hub seen full so is planned as one that shows only its latest
  ``K`` links (:mod:`scrapy_echo.model.intervals.full_hubs`; docs/how-it-works.rst, "Planning for
  hubs that fill up"). An undated overflow stays the paper's count: its rate is only a floor.

``echo-censored`` (:mod:`scrapy_echo.model.decisions.censored_policy`) plans with the
censoring-aware rates as if every hub showed every link (the ablation the full-hub model is measured
against): experimental, as are ``echo-signal-profit`` (below), which weighs signals by the
profit they promise (the default's index before the effective time's), and ``echo-explore``
(:mod:`scrapy_echo.model.decisions.explore_policy`), which adds Pham et al.'s UCB1-tuned
exploration share.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision, EchoPaper, Solved, SolveJob
from scrapy_echo.model.decisions.recrawl_index import best_early_recrawl, early_recrawl_values
from scrapy_echo.model.estimation.change_signals import (
    MIN_RECALL,
    SIGNAL_WORTH_CAP,
    effective_time_index,
    signal_index,
)
from scrapy_echo.model.estimation.overlap import credit_overlaps
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.full_hubs import FullHubs, solve_with_full_hubs
from scrapy_echo.model.intervals.host_requests import hub_value_per_request
from scrapy_echo.model.intervals.limits import ScheduleLimits
from scrapy_echo.model.intervals.plan import Estimates, Plan
from scrapy_echo.model.intervals.schedule import IntervalSolution

# New pages a hub crawl on a saturated host is weighed with at most (a hub shows about as
# many on its first page).
_PAGES_PER_HUB_CRAWL = 10
# Trusted sources' ids, recall, false-signal rate and most links a signal counts for.
_Trusted = tuple[NDArray[np.intp], FloatArray, FloatArray, FloatArray]


def _no_trusted_signals() -> _Trusted:
    return np.zeros(0, dtype=np.intp), np.zeros(0), np.zeros(0), np.zeros(0)


class EchoNewPages(EchoPaper):
    """ECHO-newpages, the default: the paper's policy and every improvement past it (the
    issues after the first build add theirs here, never to :class:`EchoPaper`)."""

    name = "echo-newpages"
    uses_limits = True
    uses_overlaps = True
    learned_priors = True
    pools_sites = True
    refreshes = True
    censoring_aware = True
    counts_floors = False  # (measured: the floors' rate cost it on the default trace)
    # Whether hubs seen full are planned as such (model.full_hubs); echo-censored's is not.
    plans_full_hubs: ClassVar[bool] = True
    # Whether signals move a source's clock (Busa-Fekete et al.'s effective time, an index
    # that never falls) rather than add the decayed profit they promise (echo-signal-profit):
    # measured ahead at every budget of three traces with signals (docs/benchmarks.rst).
    signals_move_clock: ClassVar[bool] = True
    # Whether a request to a host whose capacity binds goes where it pays most per request of
    # that host: a waiting page, or a hub crawl valued with the pages it will reveal
    # (model.intervals.host_requests; docs/how-it-works.rst, "Per-host capacity"). Off here:
    # it wins on the slow valuable hosts' webs over 600 s, not in the live check's 90 s
    # (docs/benchmarks.rst, "Hosts"); ``echo-host-priced`` keeps it as an experiment.
    prices_host_requests: ClassVar[bool] = False

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        # The sources with informative signals, their recall, false-signal rate and the most
        # links a signal may count for, learned once per plan.
        self._signal_plan: tuple[Plan | None, _Trusted] = (None, _no_trusted_signals())
        self.full_hubs = FullHubs.empty()  # the last solve's (planned as full)
        # Per source, whether its host's capacity binds in the plan, and its host's delay
        # (1/capacity), for the plan they were worked out for.
        self._saturated: tuple[Plan | None, NDArray[np.intp], FloatArray] = (
            None,
            np.zeros(0, dtype=np.intp),
            np.zeros(0),
        )

    def solve_job(self, estimates: Estimates, crawl_rate: float) -> SolveJob:
        if self.overlaps:
            credited = credit_overlaps(estimates.link_rate, self.overlaps)
            estimates = replace(estimates, link_rate=credited)
        return super().solve_job(estimates, crawl_rate)

    def _install(self, estimates: Estimates, solved: Solved | None) -> Plan:
        plan = super()._install(estimates, solved)
        hubs = solved.full_hubs if solved is not None else None
        self.full_hubs = hubs if hubs is not None else FullHubs.empty()
        host_omega = solved.solution.source_omega if solved is not None else None
        if host_omega is not None and host_omega.size == len(plan):
            self.plan = plan = replace(plan, host_omega=host_omega)
        return plan

    def _page_floor(self, plan: Plan, waiting: NDArray[np.intp]) -> float | FloatArray:
        """A page on a host whose capacity binds must be worth a crawl of that host
        (``ν_h``), not only of the budget: else a host that cannot fetch all its sources'
        new pages spends its few turns on its oldest ones, and its hubs, not due before
        them, are never recrawled to find fresher ones."""
        if plan.host_omega is None:
            return plan.omega
        return plan.host_omega[waiting]

    def _solve(
        self, estimates: Estimates, crawl_rate: float, limits: ScheduleLimits | None
    ) -> Solved:
        if not self.plans_full_hubs or estimates.shows is None:
            return super()._solve(estimates, crawl_rate, limits)
        if limits is not None and np.isfinite(limits.capacity).any():
            # A hub on a host of limited capacity stays ECHO's: its solver honours the host.
            host = limits.padded(len(estimates)).host
            limited = np.isfinite(limits.capacity[host])
            estimates = replace(estimates, shows=np.where(limited, 0.0, estimates.shows))
        # The interval bounds hold for the hubs inside the solve, where what they cost within
        # them is what they leave the rest (a hub not kept is watched as any source is).
        bounds = (0.0, math.inf) if limits is None else (limits.min_interval, limits.max_interval)

        def solve(part: Estimates, rate: float) -> IntervalSolution:
            return self._solve_intervals(part, rate, limits)

        solution, hubs = solve_with_full_hubs(estimates, crawl_rate, solve, bounds=bounds)
        return Solved(solution, hubs)

    # -- hosts whose capacity binds ------------------------------------------------------
    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        decision = super().choose(now, last_crawl, frontier)
        if decision is None or not (self.prices_host_requests and self.uses_limits):
            return decision
        if decision.kind == "source" and math.isnan(last_crawl[decision.source]):
            return decision  # (a first crawl: what the source lists is still unknown)
        return self._host_priced(now, last_crawl, frontier, decision)

    def _host_priced(
        self, now: float, last_crawl: FloatArray, frontier: Frontier, decision: Decision
    ) -> Decision:
        """``decision``, or the best request a saturated host that is free can take if it
        is worth more: on such a host each request displaces another, so its waiting pages
        and its hubs' crawls are weighed by value per request of that host (a hub crawl with
        the pages it will reveal: :func:`hub_value_per_request`). ``decision`` on a
        saturated host is always weighed so; elsewhere it keeps its slot unless the best
        such request is worth more than it (a page's value, or a crawl's, ``ω``)."""
        plan = self.plan
        which, delay = self._saturated_sources(plan)
        if not which.size:
            return decision
        which = which[which < last_crawl.size]
        est = plan.estimates
        # Each request here displaces another of the same host: valued at the clicks per page
        # measured, not at the optimism that has a source's pages tried (a source valued on a
        # few pages would take every turn of its host, and the others none).
        profit = est.average_profit
        held = self._held_back(now, last_crawl)[which]
        hubs = hub_value_per_request(
            now - held,
            rate=est.link_rate[which],
            profit=profit[which],
            decay=est.decay[which],
            delay=delay[: which.size],
            most=_PAGES_PER_HUB_CRAWL,
        )
        best = Decision("source", int(which[hubs.argmax()])) if hubs.size else decision
        best_value = float(hubs.max()) if hubs.size else -math.inf
        waiting = frontier.waiting_sources()
        age = np.maximum(now - frontier.head_appeared[waiting], 0.0)
        values = profit[waiting] * np.exp(-est.decay[waiting] * age)
        mine = np.isin(waiting, which)
        if mine.any():
            top = int(np.where(mine, values, -np.inf).argmax())
            if values[top] > best_value:
                best, best_value = Decision("page", int(waiting[top])), float(values[top])
        if best_value <= 0:
            return decision
        if np.isin(decision.source, which):
            return best
        if decision.kind == "page":
            hit = np.flatnonzero(waiting == decision.source)
            worth = float(values[hit[0]]) if hit.size else plan.omega
        else:
            worth = plan.omega
        return best if best_value > worth else decision

    def _saturated_sources(self, plan: Plan) -> tuple[NDArray[np.intp], FloatArray]:
        """The sources on hosts whose capacity binds in ``plan`` (their ``ν_h`` above
        ``ω``), and their host's delay, worked out once per plan."""
        cached, which, delay = self._saturated
        if cached is plan:
            return which, delay
        which, delay = np.zeros(0, dtype=np.intp), np.zeros(0)
        limits = self.limits
        if plan.host_omega is not None and limits is not None and plan.omega > 0:
            padded = limits.padded(len(plan))
            capacity = padded.capacity[padded.host[: len(plan)]]
            binds = (plan.host_omega > plan.omega * (1 + 1e-9)) & np.isfinite(capacity)
            which = np.flatnonzero(binds & (capacity > 0))
            delay = 1.0 / capacity[which]
        self._saturated = (plan, which, delay)
        return which, delay

    # -- signals -----------------------------------------------------------------------
    def trusted_signals(self) -> int:
        """How many sources' signals the current plan acts on."""
        return int(self._informative(self.plan)[0].size)

    def _informative(self, plan: Plan) -> _Trusted:
        """Kept sources whose signals say enough, with their recall, false-signal rate and
        the most new links one of their signals counts for (:data:`SIGNAL_WORTH_CAP` times
        the links their signals have been followed by)."""
        cached_plan, trusted = self._signal_plan
        if cached_plan is plan:
            return trusted
        which, recall, false, most = _no_trusted_signals()
        book = self.signals
        if book is not None and book.received:
            book.grow(len(plan))
            book.decay = np.array(plan.estimates.decay, dtype=np.float64)
            all_recall, all_false = book.quality()
            # (The book may know sources added since the plan was made: not planned yet.)
            all_recall = all_recall[: len(plan)]
            which = np.flatnonzero((all_recall >= MIN_RECALL) & plan.kept)
            recall, false = all_recall[which], all_false[which]
            most = SIGNAL_WORTH_CAP * book.links_per_signal()[which]
        self._signal_plan = (plan, (which, recall, false, most))
        return which, recall, false, most

    def _signal_values(
        self, now: float, last_crawl: FloatArray, plan: Plan
    ) -> tuple[NDArray[np.intp], FloatArray]:
        """The informative sources and their signal index now (-inf while backing off)."""
        which, recall, false, most = self._informative(plan)
        if not which.size:
            return which, np.zeros(0)
        assert self.signals is not None
        est = plan.estimates
        count, recent = self.signals.recent(which, now)
        elapsed = now - last_crawl[which]
        terms = (elapsed, est.link_rate[which], est.profit[which], est.decay[which], recall, false)
        if self.signals_move_clock:
            value = effective_time_index(*terms, count, most_links=most)
        else:
            value = signal_index(*terms, count, recent, plan.omega)
        return which, np.where(elapsed >= 0, value, -np.inf)

    # -- the decision rule -------------------------------------------------------------
    def _cycle(self, now: float, last_crawl: FloatArray) -> FloatArray | None:
        """Per source, how much busier than its average it has been since its last crawl,
        or None to take its rate as constant (here; ``echo-cycles`` learns the week)."""
        return None

    def _due_source(self, now: float, last_crawl: FloatArray, plan: Plan) -> Decision | None:
        which, value = self._signal_values(now, last_crawl, plan)
        cycle = self._cycle(now, last_crawl)
        if (not which.size and cycle is None) or not plan.omega > 0:
            return super()._due_source(now, last_crawl, plan)
        if cycle is None:
            # τ/I for the others, V/ω for these: either is 1 when a source falls due.
            ratio = (now - last_crawl) * plan.recrawl_rate
        else:
            # V/ω, with V from the rate since the last crawl (the week's cycle): 1 at τ = I
            # for a source of average rate.
            with np.errstate(over="ignore", invalid="ignore"):
                ratio = early_recrawl_values(now, np.minimum(last_crawl, now), plan)
            ratio *= cycle / plan.omega
            ratio[last_crawl > now] = 0.0
        ratio[which] = value / plan.omega
        most = int(ratio.argmax())
        return Decision("source", most) if ratio[most] >= 1.0 else None

    def _early_recrawl(self, now: float, last_crawl: FloatArray, plan: Plan) -> tuple[int, float]:
        held = self._held_back(now, last_crawl)
        which, signal_value = self._signal_values(now, last_crawl, plan)
        cycle = self._cycle(now, last_crawl)
        hubs = self.full_hubs.sources
        if not which.size and cycle is None and not hubs.size:
            return self._early_recrawl_unbounded(now, held, plan)
        # These sources are weighed by their signal index, the rest as without signals.
        with np.errstate(over="ignore", invalid="ignore"):
            values = early_recrawl_values(now, np.minimum(held, now), plan)
        if cycle is not None:
            values *= cycle
        if hubs.size:  # full hubs by their own index, which ECHO's matches only at τ = I
            values[hubs] = self.full_hubs.values(np.maximum(now - held[hubs], 0.0))
        values[held >= now] = 0.0
        values[which] = signal_value
        top = int(values.argmax())
        return top, max(float(values[top]), 0.0)

    def _held_back(self, now: float, last_crawl: FloatArray) -> FloatArray:
        """``last_crawl``, with a source crawled less than the minimum interval ago shown as
        crawled now: it is not crawled early either."""
        limits = self.limits
        if limits is not None and limits.min_interval > 0:
            recent = now - last_crawl < limits.min_interval
            if recent.any():
                return np.where(recent, np.maximum(last_crawl, now), last_crawl)
        return last_crawl

    @staticmethod
    def _early_recrawl_unbounded(
        now: float, last_crawl: FloatArray, plan: Plan
    ) -> tuple[int, float]:
        # A source backing off after failures, or retired, has its crawl time in the future.
        # V(τ) at a negative τ grows without bound (g(x) for x < 0), so the reference policy
        # recrawls exactly those sources first whenever nothing is due; here they count 0.
        # (Weighed again only when one of them won: this runs at most slots. A source removed
        # or retired since the plan was made overflows the first pass: that one is redone.)
        with np.errstate(over="ignore", invalid="ignore"):
            best, value = best_early_recrawl(now, last_crawl, plan)
        if last_crawl[best] > now or not np.isfinite(value):
            best, value = best_early_recrawl(now, np.minimum(last_crawl, now), plan)
        return best, value


class EchoSignalProfit(EchoNewPages):
    """ECHO-newpages with signals weighed by the profit they promise (each a page worth its
    decayed ``P``, less the crawl that fetches it) rather than by Busa-Fekete et al.'s
    effective time: the default's index before, kept as an experiment
    (docs/how-it-works.rst, "Change-indicating signals", has what it costs)."""

    name = "echo-signal-profit"
    signals_move_clock = False


class EchoHostPriced(EchoNewPages):
    """ECHO-newpages with each request to a saturated host weighed by value per request of
    that host (:meth:`EchoNewPages._host_priced`): an experiment, the default's rule with
    the capacity-aware greedy's valuation of a hub crawl."""

    name = "echo-host-priced"
    prices_host_requests = True
