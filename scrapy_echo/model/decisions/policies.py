"""Crawl policies: which source or new page to crawl next, as decision rules over plain state.

One implementation of each policy of the ECHO paper (section 6) serves both the simulator and
the Scrapy scheduler. A policy is asked for a decision each time a crawl slot is free; it sees
the current time, when each source was last crawled, and the :class:`Frontier` of waiting new
pages. Every re-solve period it gets fresh estimates (``λ, P, μ`` per source) and makes a
:class:`Plan` from them.

- ``echo-newpages`` (the paper's best): new pages first, most valuable first, as long as a page
  is worth at least ``ω`` (the value of one crawl); then the source most behind its schedule
  (largest ``τ/I``). When nothing is worth ``ω`` (the budget is below the new-link rate), the
  slot goes to whichever is worth more: the best deferred page or the best early recrawl,
  valued by the index ``V(τ) = (λP/μ) g(μτ)`` (docs/how-it-works.rst, "The same optimum as
  an index").
  When the plan values nothing at all (it keeps no source), the source crawled longest ago:
  idling would leave the estimates that said so unchanged forever.
  Every improvement past the paper is its own (:mod:`scrapy_echo.model.decisions.echo_newpages`):
  the plan honours per-host limits, and change-indicating signals, when a crawl has any, move
  each source's recrawls (Busa-Fekete et al.).
- ``echo-paper``: ECHO-newpages exactly as first built, kept unchanged as the reference that
  later improvements to ``echo-newpages`` are measured against.
- the paper's baselines: :mod:`scrapy_echo.model.decisions.baselines`.

Every policy crawls a source it has never crawled before anything else but worthy pages: a
first crawl is the only way to learn what a source is worth.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.recrawl_index import best_early_recrawl
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.limits import ScheduleLimits, solve_with_limits
from scrapy_echo.model.intervals.plan import Estimates, Plan
from scrapy_echo.model.intervals.schedule import IntervalSolution
from scrapy_echo.model.intervals.solver import solve_intervals

if TYPE_CHECKING:
    from scrapy_echo.model.estimation.change_signals import SignalBook
    from scrapy_echo.model.estimation.cycles import WeekProfile
    from scrapy_echo.model.estimation.overlap import Overlap
    from scrapy_echo.model.intervals.full_hubs import FullHubs


# A re-solve: work for any thread, which returns the plan's install (Policy.solve_job).
SolveJob = Callable[[], Callable[[], Plan]]


@dataclass(frozen=True)
class Solved:
    """What a policy's solve found: the intervals, and (echo-newpages) the hubs it planned
    as full, whose index the plan's choices weigh."""

    solution: IntervalSolution
    full_hubs: FullHubs | None = None


def then(job: SolveJob, after: Callable[[Plan], Plan]) -> SolveJob:
    """``job``, with ``after`` applied to the plan it installs (on the install's thread)."""

    def work() -> Callable[[], Plan]:
        install = job()
        return lambda: after(install())

    return work


@dataclass(frozen=True)
class Decision:
    """Crawl ``source`` itself, or (``kind == "page"``) the newest waiting page found on it."""

    kind: Literal["source", "page"]
    source: int


class Policy(ABC):
    """A crawl policy. Subclasses set ``name`` and implement :meth:`choose`."""

    name: ClassVar[str]
    uses_solver: ClassVar[bool] = True
    # Whether the plan honours ``limits`` (per-host capacity, interval bounds): an
    # improvement past the paper, so echo-newpages' alone.
    uses_limits: ClassVar[bool] = False
    # Whether it reads the week's publishing cycle (``profile``, ``rate_factor``): the driver
    # learns it only then.
    uses_cycles: ClassVar[bool] = False
    # Whether it credits overlapping sources (``overlaps``): the driver finds them only then.
    uses_overlaps: ClassVar[bool] = False
    # Whether a source's ``λ`` and ``P`` are shrunk toward priors learned from all sources
    # (model.learned_prior) rather than one pooled value: past the paper, echo-newpages' alone.
    learned_priors: ClassVar[bool] = False
    # With them, whether the plan takes, for λ and for P each, the candidate estimate that
    # has predicted the crawl's own observations best (model.estimation.predictive).
    earns_estimators: ClassVar[bool] = False
    # Whether a source's long-run ``λ`` borrows from its site's other sources, as far as
    # sites tell rates apart (model.site_prior): past the paper, echo-newpages' alone.
    pools_sites: ClassVar[bool] = False
    # Whether ``λ`` counts the crawls of hubs that overflowed for what they are (a floor, or a
    # count over the time since the oldest dated link): past the paper, echo-newpages' alone.
    censoring_aware: ClassVar[bool] = False
    # With it, whether the undated floors count (their rate is a censored maximum-likelihood
    # guess, held at four times the plain one when every crawl is a floor), or only the
    # dated overflows (an exact count over the span their links cover).
    counts_floors: ClassVar[bool] = True
    # Whether fetched pages that may have changed are fetched again (the refresh lane): past
    # the paper, echo-newpages' alone.
    refreshes: ClassVar[bool] = False

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        self.seed = seed
        # The local search of the solver's repair (solve_intervals' repair_solves). A policy
        # re-solves every half hour, a simulation a thousand times: the refill and greedy fills
        # already recover nearly all of its gain (benchmarks/bench_sim.py), so it is off.
        self.repair_solves = repair_solves
        self.plan = Plan.empty()
        self._all_crawled = -1  # size of last_crawl when no NaN was left in it
        self._quiet: tuple[Plan | None, int, float] = (None, 0, 0.0)  # see _due_source
        self.limits: ScheduleLimits | None = None  # set by the driver before a replan
        self.signals: SignalBook | None = None  # likewise: the crawl's signals, if any
        # Likewise: each source's λ over its window to its weekly average (the week's cycle),
        # and the cycle itself.
        self.rate_factor: FloatArray | None = None
        self.profile: WeekProfile | None = None
        self.overlaps: list[Overlap] = []  # likewise: sources listing the same pages

    def replan(self, estimates: Estimates, crawl_rate: float) -> Plan:
        """Make a new plan from fresh estimates and the crawl budget (pages/s), at once."""
        return self.solve_job(estimates, crawl_rate)()()

    def solve_job(self, estimates: Estimates, crawl_rate: float) -> SolveJob:
        """A re-solve in two parts, for a driver that solves off its own thread: the work
        returned reads only what this call took (the estimates, the budget, the limits) and
        may run on any thread; what it returns installs the plan, on the policy's own thread
        (the one that calls :meth:`choose`). Subclasses change the estimates before calling
        this, and the installed plan with :func:`then`."""
        limits = self.limits if self.uses_limits else None
        estimates = estimates.copy()
        if not (self.uses_solver and len(estimates)):
            return lambda: lambda: self._install(estimates, None)

        def work() -> Callable[[], Plan]:
            solved = self._solve(estimates, crawl_rate, limits)
            return lambda: self._install(estimates, solved)

        return work

    def _install(self, estimates: Estimates, solved: Solved | None) -> Plan:
        if solved is None:
            n = len(estimates)
            self.plan = Plan(estimates, np.full(n, np.inf), 0.0, np.zeros(n, bool))
        else:
            sol = solved.solution
            self.plan = Plan(estimates, sol.intervals, sol.omega, sol.kept)
        return self.plan

    def _reported(self, estimates: Estimates) -> Callable[[Plan], Plan]:
        """For :func:`then`, by a policy that solves for estimates of its own making: the
        installed plan keeps the real ones, for reports."""

        def keep(plan: Plan) -> Plan:
            self.plan = replace(plan, estimates=estimates)
            return self.plan

        return keep

    def links_found(self, source: int, appeared: list[float], now: float) -> None:  # noqa: B027
        """A crawl of ``source`` at ``now`` found new pages that appeared at ``appeared``
        (estimates). Policies that learn from what their crawls find override this; the
        rest ignore it."""

    def source_crawled(self, source: int, found: int, first: bool) -> None:  # noqa: B027
        """A crawl of ``source`` (its ``first``, or not) found ``found`` new pages (0 for a
        304). Policies that adapt to each crawl's outcome override this."""

    def to_data(self) -> dict[str, Any]:
        """What the policy learned or counted that its next choices depend on, as plain data
        (for snapshots): nothing, but for policies that keep such a thing of their own."""
        return {}

    def load_data(self, data: dict[str, Any]) -> None:  # noqa: B027
        """Take :meth:`to_data` back (``ValueError``, ``KeyError`` or ``TypeError`` if it is
        not one); the plan is not in it: a re-solve makes it."""

    def crawl_times_changed(self) -> None:
        """Forget what :meth:`_due_source` and :meth:`_first_crawl` remember between calls
        (the earliest due time; that every source was crawled). Both assume crawl times only
        move forward: a revived source's goes back to never, and the live scheduler shows
        masked times for sources on busy hosts."""
        self._quiet = (None, 0, 0.0)
        self._all_crawled = -1

    def _solve(
        self, estimates: Estimates, crawl_rate: float, limits: ScheduleLimits | None
    ) -> Solved:
        """The solve of :meth:`solve_job` (on any thread: it reads no mutable state)."""
        return Solved(self._solve_intervals(estimates, crawl_rate, limits))

    def _solve_intervals(
        self, estimates: Estimates, crawl_rate: float, limits: ScheduleLimits | None
    ) -> IntervalSolution:
        def single_budget(
            lam: FloatArray, prof: FloatArray, mu: FloatArray, budget: float
        ) -> IntervalSolution:
            return solve_intervals(lam, prof, mu, budget, repair_solves=self.repair_solves)

        args = (estimates.link_rate, estimates.profit, estimates.decay, crawl_rate)
        if limits is not None:
            return solve_with_limits(*args, limits, solve=single_budget)
        return single_budget(*args)

    @abstractmethod
    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        """The next crawl, or ``None`` to leave this slot idle.

        ``last_crawl[i]`` is when source ``i`` was last crawled (NaN: never). The caller
        carries the decision out: crawls the source, or pops the source's newest page.
        """

    # -- shared pieces -------------------------------------------------------------------
    def _plan_for(self, last_crawl: FloatArray) -> Plan:
        self.plan = self.plan.padded(last_crawl.size)
        return self.plan

    def _first_crawl(self, last_crawl: FloatArray) -> Decision | None:
        """A source never crawled, if any. Once every source has been crawled that stays
        true until sources are added, so the scan is skipped until the array grows."""
        if self._all_crawled == last_crawl.size:
            return None
        never = np.isnan(last_crawl)
        if never.any():
            return Decision("source", int(never.argmax()))
        self._all_crawled = last_crawl.size
        return None

    def _due_source(self, now: float, last_crawl: FloatArray, plan: Plan) -> Decision | None:
        """The source most behind its schedule if any is due (``τ ≥ I``), else ``None``.

        When none is due, the earliest due time ``min(last + I)`` is remembered: crawls only
        move due times later, so until then (same plan, same sources) the scan is skipped.
        """
        if not last_crawl.size:
            return None
        quiet_plan, quiet_size, quiet_until = self._quiet
        if quiet_plan is plan and quiet_size == last_crawl.size and now < quiet_until:
            return None
        most_behind, ratio = self._most_behind(now - last_crawl, plan)
        if ratio >= 1.0:
            return Decision("source", most_behind)
        next_due = float(np.min(last_crawl + plan.intervals))
        self._quiet = (plan, last_crawl.size, next_due)
        return None

    @staticmethod
    def _most_behind(elapsed: FloatArray, plan: Plan) -> tuple[int, float]:
        """The source with the largest ``τ/I`` (``elapsed`` = ``τ``) and that ratio; sources
        not recrawled on schedule count 0."""
        ratio = elapsed * plan.recrawl_rate
        most = int(ratio.argmax())
        return most, float(ratio[most])

    @staticmethod
    def _page_values(
        now: float, frontier: Frontier, plan: Plan
    ) -> tuple[NDArray[np.intp], FloatArray]:
        """Sources with waiting pages and the expected remaining profit of each head page,
        ``P e^{-μ age}``."""
        waiting = frontier.waiting_sources()
        est = plan.estimates
        age = np.maximum(now - frontier.head_appeared[waiting], 0.0)
        return waiting, est.profit[waiting] * np.exp(-est.decay[waiting] * age)

    @staticmethod
    def _newest_discovered(frontier: Frontier) -> Decision | None:
        waiting = frontier.waiting_sources()
        if not waiting.size:
            return None
        return Decision("page", int(waiting[np.argmax(frontier.head_discovered[waiting])]))


class EchoPaper(Policy):
    """ECHO-newpages as first built: the reference every improvement is measured against.
    Improvements go into :class:`EchoNewPages`; this class stays as it is."""

    name = "echo-paper"
    # A page worth less than this share of a crawl's value is dropped: its value only falls,
    # so it would never be crawled, and it would be weighed again at every decision.
    drop_below: ClassVar[float] = 0.01

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self.dropped_pages = 0

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        plan = self._plan_for(last_crawl)
        best_page, page_value = -1, 0.0
        if len(frontier):
            waiting, values = self._page_values(now, frontier, plan)
            hopeless = values < self.drop_below * plan.omega
            if hopeless.any():
                # Each value is its source's newest page: the rest of the queue is worth less.
                for source in waiting[hopeless].tolist():
                    self.dropped_pages += frontier.drop(source)
                waiting, values = waiting[~hopeless], values[~hopeless]
        if len(frontier) and values.size:
            worth = values >= self._page_floor(plan, waiting)
            if worth.any():  # the most valuable page worth a crawl
                return Decision("page", int(waiting[np.where(worth, values, -np.inf).argmax()]))
            top = int(values.argmax())
            best_page, page_value = int(waiting[top]), float(values[top])
        first = self._first_crawl(last_crawl)
        if first is not None:
            return first
        if not last_crawl.size:
            return None
        due = self._due_source(now, last_crawl, plan)
        if due is not None:
            return due
        # Nothing is worth a crawl: spend the slot on the best of what is left.
        best_source, source_value = self._early_recrawl(now, last_crawl, plan)
        if best_page >= 0 and page_value >= source_value:
            return Decision("page", best_page)
        if source_value > 0:
            return Decision("source", best_source)
        # The plan values nothing (it keeps no source: its estimates say the budget cannot pay
        # for any source's new pages). Idling would freeze those estimates for good; the
        # source crawled longest ago is recrawled instead, which refreshes them.
        elapsed = now - last_crawl
        stalest = int(elapsed.argmax())
        if elapsed[stalest] > 0:
            return Decision("source", stalest)
        return None

    def _page_floor(self, plan: Plan, waiting: NDArray[np.intp]) -> float | FloatArray:
        """What a waiting page of each of ``waiting``'s sources must be worth to go before
        the sources: a crawl's value, ``ω``."""
        return plan.omega

    def _early_recrawl(self, now: float, last_crawl: FloatArray, plan: Plan) -> tuple[int, float]:
        return best_early_recrawl(now, last_crawl, plan)
