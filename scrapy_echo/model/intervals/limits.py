"""The interval problem under more limits than the one budget: per-host capacity and
per-source bounds on the interval (docs/how-it-works.rst, "Per-host capacity").

A host that may be sent at most ``c_h`` requests per second (its download delay) adds one
constraint per host, ``Σ_{i on h, kept} (1/I_i + λ_i) <= c_h``. Its multiplier ``ω_h >= 0``
adds to the global ``ω`` for that host's sources only, and each source's best interval depends
on its multiplier alone. So the solution is the single-budget one with every host's multiplier
``max(ω, ν_h)``, where ``ν_h`` is the multiplier that makes host ``h`` spend exactly ``c_h`` on
its own. :func:`solve_with_limits` finds it by rounds: solve the free sources under what is
left of the budget; a host that overspends is solved alone under its capacity and fixed (its
``ν_h`` is above the round's ``ω``, and ``ω`` only falls as hosts are fixed, since fixing
frees budget); repeat until no free host overspends. Each round is one single-budget solve;
hosts that bind are few, so a few rounds suffice.

Interval bounds are settings a user imposes (``ECHO_MIN_INTERVAL``, ``ECHO_MAX_INTERVAL``): a
source planned less often than every ``hi`` is fixed at ``hi`` (the user asked for it to be
watched; its new pages are paid for only if the plan keeps it), and its recrawls come off the
budget before the rest are solved again; a kept source planned more often than every ``lo`` is
slowed to ``lo`` and the budget it frees goes to the others. Both bounds always hold; a source
fixed at ``hi`` in an early round may stay there after ``ω`` has fallen, which costs a little
optimality, never feasibility.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray, g_inv
from scrapy_echo.model.intervals.schedule import IntervalSolution
from scrapy_echo.model.intervals.solver import profit_rate, solve_intervals

IntArray = NDArray[np.intp]
BoolArray = NDArray[np.bool_]
Solve = Callable[[FloatArray, FloatArray, FloatArray, float], IntervalSolution]

# Rounds of fixing before giving up (each fixes at least one host or bound; hosts that bind
# at once are fixed together, so real inputs take two or three).
_MAX_ROUNDS = 64
# Up to this many hosts binding in one round are solved one by one by the full single-budget
# solver (its repair picks better kept sets); more at once, by one vectorised search.
_ONE_BY_ONE = 16
# Overspending a host by less than this share of its capacity is rounding, not a violation.
_SLACK = 1e-6
# Shares of its sources' new pages a host that cannot take them all is planned to fetch (the
# best of them: the one-by-one solve tries each and keeps the most profitable).
_PAGE_SHARES = (0.8, 0.6, 0.45, 0.3, 0.2, 0.12, 0.06)


@dataclass(frozen=True)
class ScheduleLimits:
    """Limits beyond the crawl budget.

    ``host[i]`` is source ``i``'s host (an index into ``capacity``: requests per second that
    host takes, ``inf`` for no limit); ``min_interval`` and ``max_interval`` bound every
    source's interval (seconds)."""

    host: IntArray
    capacity: FloatArray
    min_interval: float = 0.0
    max_interval: float = math.inf

    def __post_init__(self) -> None:
        if self.host.size and (self.host.min() < 0 or self.host.max() >= self.capacity.size):
            raise ValueError("every host index must name a capacity")
        if np.any(np.isnan(self.capacity)) or np.any(self.capacity < 0):
            raise ValueError("host capacities must be >= 0 (inf: no limit)")
        if not 0.0 <= self.min_interval <= self.max_interval:
            raise ValueError(
                f"need 0 <= min_interval <= max_interval, got {self.min_interval!r} and "
                f"{self.max_interval!r}"
            )

    @classmethod
    def none(cls, sources: int) -> ScheduleLimits:
        """No limit at all: the single-budget problem."""
        return cls(np.zeros(sources, np.intp), np.array([math.inf]))

    @property
    def binding(self) -> bool:
        """Whether any limit can bind (else the single-budget solve is the answer)."""
        return bool(
            np.isfinite(self.capacity).any()
            or self.min_interval > 0
            or math.isfinite(self.max_interval)
        )

    def padded(self, sources: int) -> ScheduleLimits:
        """For ``sources`` sources: any beyond ``host`` get a host of no limit."""
        extra = sources - self.host.size
        if extra <= 0:
            return self
        capacity = np.append(self.capacity, math.inf)
        host = np.concatenate([self.host, np.full(extra, capacity.size - 1, np.intp)])
        return ScheduleLimits(host, capacity, self.min_interval, self.max_interval)


def solve_with_limits(
    link_rate: FloatArray,
    profit: FloatArray,
    decay: FloatArray,
    crawl_rate: float,
    limits: ScheduleLimits,
    *,
    solve: Solve | None = None,
) -> IntervalSolution:
    """:func:`~scrapy_echo.model.intervals.solver.solve_intervals` under ``limits`` as well;
    ``solve`` replaces the single-budget solver (the policies pass theirs)."""
    lam, prof, mu = (np.asarray(a, dtype=np.float64) for a in (link_rate, profit, decay))
    run: Solve = solve if solve is not None else _default_solve
    if not limits.binding:
        return run(lam, prof, mu, crawl_rate)
    limits = limits.padded(lam.size)
    rounds = _Rounds(lam, prof, mu, crawl_rate, limits, run)
    return rounds.solve()


def _default_solve(lam: FloatArray, prof: FloatArray, mu: FloatArray, n: float) -> IntervalSolution:
    return solve_intervals(lam, prof, mu, n)


class _Rounds:
    """The rounds of :func:`solve_with_limits`: fixed sources and what they spend."""

    def __init__(
        self,
        lam: FloatArray,
        prof: FloatArray,
        mu: FloatArray,
        budget: float,
        limits: ScheduleLimits,
        solve: Solve,
    ) -> None:
        self.lam, self.prof, self.mu, self.budget = lam, prof, mu, budget
        self.limits, self.run = limits, solve
        n = lam.size
        self.intervals = np.full(n, np.inf)
        self.kept = np.zeros(n, bool)
        self.fixed = np.zeros(n, bool)
        self.capped = np.zeros(limits.capacity.size, bool)  # hosts solved alone
        self.host_omega = np.zeros(limits.capacity.size)  # their own multipliers ν_h
        self.share = np.ones(n)  # of each source's new pages the plan fetches
        self.iterations = 0
        self.omega = 0.0  # the global multiplier of the last round

    def solve(self) -> IntervalSolution:
        omega, converged = 0.0, True
        for _ in range(_MAX_ROUNDS):
            free = ~self.fixed
            sol = self.run(
                self.lam[free], self.prof[free], self.mu[free], max(self.budget - self.spent(), 0.0)
            )
            self.iterations += sol.iterations
            converged &= sol.converged
            # (No free source left: the budget does not bind, and its multiplier is 0.)
            omega = self.omega = sol.omega if free.any() else 0.0
            self.intervals[free], self.kept[free] = sol.intervals, sol.kept
            if not (self._fix_overdue(free) or self._fix_hosts(free) or self._fix_hurried(free)):
                break
        else:
            converged = False
        lam = self.lam * self.share
        return IntervalSolution(
            self.intervals.copy(),
            omega,
            self.kept.copy(),
            profit_rate(lam, self.prof, self.mu, self.intervals, self.kept),
            self.spent(everything=True),
            converged,
            self.iterations,
            "limited",
            np.maximum(omega, np.where(self.capped, self.host_omega, 0.0)[self.limits.host]),
            self.share.copy(),
        )

    def costs(self) -> FloatArray:
        """Crawls per second of each source: its recrawls, and its new pages if kept."""
        with np.errstate(divide="ignore"):
            recrawls = np.where(np.isfinite(self.intervals), 1.0 / self.intervals, 0.0)
        return recrawls + np.where(self.kept, self.lam * self.share, 0.0)

    def spent(self, *, everything: bool = False) -> float:
        """Crawls per second of the fixed sources (of all, with ``everything``)."""
        costs = self.costs()
        return float(np.sum(costs) if everything else np.sum(costs[self.fixed]))

    def _fix_overdue(self, free: NDArray[np.bool_]) -> bool:
        hi = self.limits.max_interval
        late = free & (self.intervals > hi)
        if not late.any():
            return False
        # Recrawled that often, its pages paid for only if the plan keeps it.
        self.intervals[late], self.fixed[late] = hi, True
        return True

    def _fix_hosts(self, free: NDArray[np.bool_]) -> bool:
        limits = self.limits
        cost = self.costs()
        per_host = np.bincount(limits.host, weights=cost, minlength=limits.capacity.size)
        over = (per_host > limits.capacity * (1 + _SLACK)) & ~self.capped
        if not over.any():
            return False
        self.capped |= over
        members = free & over[limits.host]
        fixed_cost = np.where(self.fixed, cost, 0.0)
        held = np.bincount(limits.host, weights=fixed_cost, minlength=limits.capacity.size)
        room = np.maximum(limits.capacity - held, 0.0)
        if int(over.sum()) <= _ONE_BY_ONE:
            for host in np.flatnonzero(over).tolist():
                self._solve_host_alone(host, members & (limits.host == host), room[host])
        else:
            search = _HostSearch(
                self.lam[members], self.prof[members], self.mu[members], limits.host[members]
            )
            intervals, kept, omega = search.solve(room)
            self.iterations += search.evaluations
            self.host_omega[over] = omega[over]
            self._fix(members, intervals, kept)
        return True

    def _solve_host_alone(self, host: int, members: NDArray[np.bool_], room: float) -> None:
        """One host by the single-budget solver, its repair and exact kept-set search
        included: what the vectorised search leaves when a source's drop leaves room.

        A host whose sources publish more than it can take is also solved for a share of
        their new pages (the best ones: the frontier fetches the most valuable first),
        and the share worth most is planned: the paper's model fetches every new page of a
        source it keeps, and would drop a source its host cannot keep up with altogether,
        leaving the host's few turns to stale pages."""
        lam, prof, mu = self.lam[members], self.prof[members], self.mu[members]
        sol, share = self.run(lam, prof, mu, room), 1.0
        self.iterations += sol.iterations
        if room > 0 and float(lam.sum()) > room:
            for part in _PAGE_SHARES:
                trial = self.run(lam * part, prof, mu, room)
                self.iterations += trial.iterations
                if trial.objective > sol.objective:
                    sol, share = trial, part
        self.host_omega[host] = sol.omega
        self.share[members] = share
        self._fix(members, sol.intervals, sol.kept)

    def _fix(self, members: NDArray[np.bool_], intervals: FloatArray, kept: BoolArray) -> None:
        """Fix a host's sources at its own solution, within the interval bounds (the maximum
        wins over the host's capacity: the user asked for those recrawls, and Scrapy's
        downloader spaces them out)."""
        lo, hi = self.limits.min_interval, self.limits.max_interval
        intervals = np.minimum(np.where(kept, np.maximum(intervals, lo), intervals), hi)
        self.intervals[members] = intervals
        self.kept[members] = kept
        self.fixed[members] = True

    def _fix_hurried(self, free: NDArray[np.bool_]) -> bool:
        lo = self.limits.min_interval
        fast = free & self.kept & (self.intervals < lo)
        if not fast.any():
            return False
        self.intervals[fast], self.fixed[fast] = lo, True
        return True


class _HostSearch:
    """Each host's own multiplier ``ν_h`` at once: the smallest at which the host's sources,
    at their stationary intervals (and kept if they pay for their pages, as in the
    single-budget Lagrangian), spend at most the room it has. Bisection in ``log ν`` per host,
    vectorised over hosts: its cost falls monotonically in ``ν``."""

    ROUNDS = 100  # steps at most (bisection alone would need 60)
    LOG_TOL = 1e-7  # a bracket this narrow in log ν is as good as a root
    RTOL = 1e-6  # a host spending within this share of its room is at its root
    LOG_SPAN = 60.0  # the bracket: ν from e^-60 of a host's most valuable source up to it

    def __init__(self, lam: FloatArray, prof: FloatArray, mu: FloatArray, host: IntArray):
        self.lam, self.mu, self.host = lam, mu, host
        self.value = lam * prof
        self.static = mu == 0
        self.prof = prof
        with np.errstate(divide="ignore", invalid="ignore"):
            # Above a = λP/μ (P for a static source) a source is worth nothing: y >= 1.
            self.top = np.where(self.static, prof, self.value / np.where(self.static, 1, mu))
        self.evaluations = 0

    def solve(self, room: FloatArray) -> tuple[FloatArray, BoolArray, FloatArray]:
        """Intervals, kept flags (per source) and ``ν`` (per host, 0 where no source)."""
        hosts = room.size
        top = np.zeros(hosts)
        np.maximum.at(top, self.host, self.top)
        # In log ν: at ``high`` nothing is kept (cost 0); ``low`` is far enough below it that
        # every decaying source is recrawled all but constantly. (Not the round's ω, at which
        # these hosts overspent: a host that drops a source can sit below it.)
        high = np.log(np.maximum(top, 1e-300)) + 1e-9
        low = high - self.LOG_SPAN
        high = self._search(room, low, high, None)
        # Where a source stopped paying for its pages at ν, the cost jumped past the room and
        # left some unspent: the sources kept there spend it, at shorter intervals (the
        # single-budget solver's refill, per host).
        kept = self._cost(np.exp(high))[1]
        high = self._search(room, np.minimum(low, high), high, kept)
        nu = np.exp(high)
        intervals, kept, _ = self._cost(nu, kept)
        return intervals, kept, np.where(top > 0, nu, 0.0)

    def _search(
        self, room: FloatArray, low: FloatArray, high: FloatArray, forced: BoolArray | None
    ) -> FloatArray:
        """The smallest ``log ν`` in ``[low, high]`` per host at which it spends at most its
        room (with the kept set ``forced`` if given)."""
        f_low = self._cost(np.exp(low), forced)[2] - room
        f_high = self._cost(np.exp(high), forced)[2] - room
        for step in range(self.ROUNDS):
            width = high - low
            open_ = (width > self.LOG_TOL) & (f_high < -self.RTOL * room) & (f_low > 0)
            if not open_.any():
                break
            # Regula falsi with the Illinois halving, every third step a bisection: the cost
            # jumps where the kept set changes, and bisection bounds the worst case.
            with np.errstate(divide="ignore", invalid="ignore"):
                secant = high - f_high * width / (f_high - f_low)
            fair = np.isfinite(secant) & (secant > low) & (secant < high) & (step % 3 != 2)
            middle = np.where(fair, secant, 0.5 * (low + high))
            middle = np.where(open_, middle, high)
            f_middle = self._cost(np.exp(middle), forced)[2] - room
            over = open_ & (f_middle > 0)
            under = open_ & ~over
            f_high = np.where(over, f_high * 0.5, np.where(under, f_middle, f_high))
            f_low = np.where(over, f_middle, np.where(under, f_low * 0.5, f_low))
            low = np.where(over, middle, low)
            high = np.where(under, middle, high)
        return high

    def _cost(
        self, nu: FloatArray, forced: BoolArray | None = None
    ) -> tuple[FloatArray, BoolArray, FloatArray]:
        """Per source its interval and whether it is kept (``forced``, else whether it pays
        for its pages), and per host what that costs, at multipliers ``nu``."""
        self.evaluations += 1
        omega = nu[self.host]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y = np.where(self.static, 0.0, omega / self.top)
            alive = ~self.static & (y < 1.0)
            x = np.where(alive, g_inv(np.where(alive, y, 0.0)), np.inf)
            if forced is None:
                kept = alive & (self.mu * np.exp(-x) > self.lam * y)
                kept |= self.static & (self.prof > omega)
            else:
                kept = forced
            intervals = np.where(alive, x / np.where(self.static, 1.0, self.mu), np.inf)
            rate = np.where(kept & alive, self.mu / x, 0.0)
        cost = np.where(kept, rate + self.lam, 0.0)
        per_host = np.bincount(self.host, weights=cost, minlength=nu.size).astype(np.float64)
        return intervals.astype(np.float64), np.asarray(kept, bool), per_host


__all__ = ["ScheduleLimits", "solve_with_limits"]
