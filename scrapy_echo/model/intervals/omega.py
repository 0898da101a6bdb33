"""The search for ``ω``, the value of one crawl, that makes a schedule spend the budget.

A search covers a set of *members*: every source that can be worth a crawl (the Lagrangian,
where ``ω`` also decides which are kept) or a fixed kept set (the repair passes). Cost falls
monotonically in ``ω``; a safeguarded Newton search on ``log cost`` against ``log ω`` brackets
and finds the smallest feasible ``ω``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.bracket import MAX_MOVE, SAMPLE_TRUST, Bracket
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.stationary import StationaryPoints

BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]

# In the saturated regime (x past ~35) a recrawl of a source with a = λP/μ within this share of
# the largest a is worth the same to ~1e-9; the rest are not worth one.
SATURATED_GROUP = 1e-9
_SATURATED_X = 30.0  # e^{-30} ≈ 1e-13: past it, ω near a resolves x no better than this
_DEAD_X = 50.0  # a finite x for a source not recrawled (the interval is inf regardless)


@dataclass
class Problem:
    """Validated inputs. Sources that can be worth a crawl are split once into those whose
    clicks decay (the only ones whose interval needs solving) and static ones (``μ = 0``)."""

    link_rate: FloatArray
    profit: FloatArray
    decay: FloatArray
    crawl_rate: float
    active: BoolArray  # λ > 0 and P > 0: everything else is never worth a crawl
    static: BoolArray  # active and μ == 0: value P per page whatever the delay

    @property
    def size(self) -> int:
        return int(self.link_rate.size)


@dataclass
class Members:
    """The sources one search covers, compressed to what the search touches."""

    index: IntArray  # decaying members, positions in the full arrays
    points: StationaryPoints
    static_index: IntArray  # static (μ = 0) members
    static_lam: FloatArray
    static_profit: FloatArray
    top: float  # an ω at which nothing is worth recrawling or keeping
    recrawl_top: float  # the largest a = λP/μ: above it no decaying member is recrawled

    @classmethod
    def of(cls, problem: Problem, mask: BoolArray | None = None) -> Members:
        """All sources that can be worth a crawl, or those of them in ``mask``."""
        chosen = problem.active if mask is None else problem.active & mask
        return cls.at_indices(problem, np.flatnonzero(chosen))

    @classmethod
    def at_indices(cls, problem: Problem, chosen: IntArray) -> Members:
        static_of = problem.static[chosen]
        dec, static = chosen[~static_of], chosen[static_of]
        lam, prof, mu = problem.link_rate[dec], problem.profit[dec], problem.decay[dec]
        with np.errstate(over="ignore"):
            # λP/μ can overflow for absurd scales; such a source is worth any ω we reach.
            scale = np.minimum(lam * prof / mu, np.finfo(np.float64).max)
        static_profit = problem.profit[static]
        recrawl_top = float(np.max(scale, initial=0.0))
        top = max(recrawl_top, float(np.max(static_profit, initial=0.0)))
        return cls(
            dec,
            StationaryPoints(lam, mu, 1.0 / scale),
            static,
            problem.link_rate[static],
            static_profit,
            top,
            recrawl_top,
        )

    @property
    def size(self) -> int:
        return int(self.index.size + self.static_index.size)

    def search_top(self, *, fixed: bool) -> float:
        """Where a search's bracket starts above. A fixed set keeps its static members at any
        ``ω``, so above the largest ``a`` its cost no longer moves: a bracket reaching up to a
        static member's ``P`` would spend its iterations on that flat stretch."""
        return self.recrawl_top if fixed and self.index.size else self.top

    def kept_at(self, point: Point, kept: IntArray, static_kept: IntArray) -> Members:
        """The members ``point`` keeps (``kept``, ``static_kept``: their positions). A source
        dropped at some ``ω`` stays dropped at every larger one (``e^{-x}/y`` falls as ``ω``
        rises; a static source's ``P > ω`` likewise), so once the search's bracket has
        ``point`` as its lower end only these can matter."""
        return Members(
            self.index.take(kept),
            self.points.subset(kept),
            self.static_index.take(static_kept),
            self.static_lam.take(static_kept),
            self.static_profit.take(static_kept),
            self.top,
            self.recrawl_top,
        )


@dataclass
class Point:
    """The schedule at one ``ω``."""

    omega: float
    x: FloatArray  # μI per decaying member
    kept: BoolArray  # per decaying member
    alive: BoolArray  # per decaying member: y < 1 (recrawled at all)
    static_kept: BoolArray
    cost: float
    slope: float  # ω d cost/dω, the kept set held fixed

    @property
    def kept_count(self) -> int:
        return int(np.count_nonzero(self.kept)) + int(np.count_nonzero(self.static_kept))


class OmegaSearch:
    """Finds ``ω`` over a set of members, the kept set chosen by ``ω`` or fixed."""

    # Above this many sources, a strided sample solved first gives the full search a start
    # within a few percent, so it needs three or four passes over all sources instead of ten.
    SAMPLE_ABOVE = 1 << 16
    SAMPLE_SIZE = 1 << 14
    # Above this many members the Lagrangian, once it has a lower end, drops the sources
    # not kept there from its remaining passes (tests lower it to run small instances through).
    SHRINK_ABOVE = 1 << 12

    def __init__(self, problem: Problem, *, rtol: float, max_iter: int) -> None:
        self.problem = problem
        self.rtol = rtol
        self.max_iter = max_iter
        self.evaluations = 0

    def run(
        self, members: Members, *, fixed: bool, near: float | None = None
    ) -> tuple[Point, bool]:
        """The cheapest feasible ``ω`` and whether the search met its tolerance; ``near`` is a
        first guess (the refill of a kept set starts from the Lagrangian's ``ω``)."""
        budget = self.problem.crawl_rate
        if members.top <= 0 or budget <= 0:  # nothing to schedule, or nothing to spend
            return self._evaluate(members, _above(max(members.top, 1.0)), fixed=fixed), True
        if members.index.size == 0 and float(np.sum(members.static_lam)) <= budget:
            # Only sources without decay, all affordable: the budget does not bind, so one
            # more crawl is worth nothing (ω = 0) and no ω would spend the rest.
            return self._all_static_kept(members), True
        sampled = False
        top = members.search_top(fixed=fixed)
        if near is not None and 0 < near < top:
            omega = near
        else:
            omega = self._first_guess(members, budget, fixed=fixed)
            sampled = not fixed and members.size > self.SAMPLE_ABOVE
        # Aim inside the tolerance band, not at its edge, so rounding lands feasible.
        target = budget * (1 - 0.5 * self.rtol)
        # A sample's ω is within a few percent; Newton's slope, blind to the kept-set jumps,
        # can overshoot by far more, so its first steps stay within a trust region.
        bracket = Bracket(target, top, max_move=SAMPLE_TRUST if sampled else MAX_MOVE, smooth=fixed)
        best: Point | None = None
        converged = False
        view, shrunk = members, None  # the members evaluated; how they map back to all
        best_shrunk: _Shrunk | None = None
        for _ in range(self.max_iter):
            point = self._evaluate(view, omega, fixed=fixed)
            if point.cost <= budget:
                best, best_shrunk = point, shrunk
                if budget - point.cost <= self.rtol * budget:
                    converged = True
                    break
            bracket.add(point)
            if shrunk is None and not fixed and self._worth_shrinking(members, point, bracket):
                shrunk = _Shrunk(members, point)
                view = shrunk.inner
            # A fixed kept set has no jumps, only steep stretches (y near 1) that ω resolves
            # slowly: there only a fully collapsed bracket stops the search.
            if not fixed and bracket.straddles_jump(budget):
                converged = True  # no ω spends the budget exactly: the repair's refill does
                break
            if bracket.collapsed:
                converged = True
                break
            omega = bracket.next_omega(point)
        if fixed and (best is None or budget - best.cost > self.rtol * budget):
            # The budget needs x = μI past ~35 for the sources at the margin, where ω can no
            # longer resolve x (g(x) rounds to 1): recrawls there are worth a nearly constant
            # ``a`` each (docs/how-it-works.rst, "The saturated regime").
            saturated = self._saturated(members, bracket.hi)
            if saturated is not None:
                return saturated, True
        if best is not None and best_shrunk is not None:
            best = best_shrunk.expand(best)
        if best is None:
            # Just above top every source is dead (y > 1: nothing recrawled), which is always
            # feasible. The Lagrangian then keeps nothing and the repair's fixed solves take
            # the saturated regime above.
            best = self._evaluate(members, _above(members.top), fixed=fixed)
        return best, converged

    def _worth_shrinking(self, members: Members, point: Point, bracket: Bracket) -> bool:
        """Every later ω lies above a bracket's lower end, where the sources it drops stay
        dropped: when ``point`` just became that end, the passes left need only the sources
        it keeps, if that saves enough to pay for copying them."""
        return (
            bracket.lo == point.omega
            and members.size > self.SHRINK_ABOVE
            and point.kept_count < 0.8 * members.size
        )

    def _all_static_kept(self, members: Members) -> Point:
        static_kept = np.ones(members.static_index.size, bool)
        cost = float(np.sum(members.static_lam))
        empty = np.zeros(0)
        return Point(0.0, empty, empty.astype(bool), empty.astype(bool), static_kept, cost, 0.0)

    def _saturated(self, members: Members, omega: float) -> Point | None:
        """The fixed set's schedule when the budget left at ``ω`` is tiny against the decay
        rates of the sources at the margin (``a = λP/μ`` within 1e-9 of ``ω``).

        A recrawl every ``I`` seconds with ``x = μI`` large earns ``a (1 - e^{-x}) μ/x``: about
        ``a`` per recrawl, so the crawls the sources above the margin leave are shared by the
        marginal ones at one ``x`` (equal marginal value). Sources below it are not recrawled.
        """
        pts = members.points
        if pts.mu.size == 0:
            return None
        point = self._evaluate(members, omega, fixed=True)
        scale = 1.0 / pts.inv_scale
        group = np.abs(scale - omega) <= SATURATED_GROUP * omega
        above = point.alive & ~group
        spare = self.problem.crawl_rate - float(np.sum(pts.lam))
        spare -= float(np.sum(members.static_lam)) + float(np.sum(pts.rate[above]))
        if not (spare > 0 and group.any()):
            return None
        shared_x = float(np.sum(pts.mu[group])) / spare
        if not shared_x >= _SATURATED_X:
            return None  # not the saturated regime: the search's answer stands
        point.x[group] = shared_x
        point.alive = above | group
        point.cost = self.problem.crawl_rate
        return point

    def _evaluate(self, members: Members, omega: float, *, fixed: bool) -> Point:
        self.evaluations += 1
        points = members.points
        points.at(omega)
        if fixed:
            kept = np.ones(points.x.size, bool)
            static_kept = np.ones(members.static_index.size, bool)
        else:
            kept = points.kept.copy()
            static_kept = members.static_profit > omega
        cost, slope = points.spend(kept)
        cost += float(np.sum(members.static_lam[static_kept]))
        return Point(omega, points.x.copy(), kept, points.alive.copy(), static_kept, cost, slope)

    def _first_guess(self, members: Members, budget: float, *, fixed: bool) -> float:
        top = members.search_top(fixed=fixed)
        if not fixed and members.size > self.SAMPLE_ABOVE:
            stride = members.size // self.SAMPLE_SIZE
            sample = Members.at_indices(
                self.problem, np.concatenate([members.index, members.static_index])[::stride]
            )
            scaled = OmegaSearch(
                _scaled(self.problem, sample.size / members.size),
                rtol=1e-6,
                max_iter=self.max_iter,
            )
            point, _ = scaled.run(sample, fixed=False)
            if 0 < point.omega < top:
                return point.omega
        # The short-interval law x ≈ sqrt(2ω/a): Σ μ sqrt(a/2ω) = N - Σλ.
        pts = members.points
        spare = budget - float(np.sum(pts.lam)) - float(np.sum(members.static_lam))
        weight = float(np.sum(pts.mu * np.sqrt(0.5 / pts.inv_scale)))
        if spare > 0 and 0 < weight < spare * 1e150:  # (a larger ratio squared overflows)
            guess = (weight / spare) ** 2
            if 0 < guess < top:
                return guess
        return top * 1e-3


class _Shrunk:
    """Members reduced to those kept at a bracket's lower end, and the way back.

    The expanded point gives the dropped members the lower end's ``x`` and ``alive``: they are
    not kept, so nothing reads them but a warm start.
    """

    def __init__(self, members: Members, low: Point) -> None:
        self.low = low
        self.kept_at = np.flatnonzero(low.kept)
        self.static_at = np.flatnonzero(low.static_kept)
        self.inner = members.kept_at(low, self.kept_at, self.static_at)

    def expand(self, point: Point) -> Point:
        x, alive = self.low.x.copy(), self.low.alive.copy()
        x[self.kept_at] = point.x
        alive[self.kept_at] = point.alive
        kept = np.zeros(x.size, bool)
        kept[self.kept_at] = point.kept
        static_kept = np.zeros(self.low.static_kept.size, bool)
        static_kept[self.static_at] = point.static_kept
        return Point(point.omega, x, kept, alive, static_kept, point.cost, point.slope)


def _above(top: float) -> float:
    """An ``ω`` just above ``top``, where every source is dead, that is still finite."""
    return float(min(top * (1 + 1e-9), np.finfo(np.float64).max))


def _scaled(problem: Problem, fraction: float) -> Problem:
    return Problem(
        problem.link_rate,
        problem.profit,
        problem.decay,
        problem.crawl_rate * fraction,
        problem.active,
        problem.static,
    )
