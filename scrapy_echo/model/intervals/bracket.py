"""The bracket a search for ``ω`` keeps around the cheapest feasible ``ω``, and the next
``ω`` it proposes (:mod:`scrapy_echo.model.intervals.omega` runs the search)."""

from __future__ import annotations

import math
from typing import Protocol


class Point(Protocol):
    """What the bracket reads of an evaluation
    (:class:`scrapy_echo.model.intervals.omega.Point`)."""

    @property
    def omega(self) -> float: ...
    @property
    def cost(self) -> float: ...
    @property
    def slope(self) -> float: ...
    @property
    def kept_count(self) -> int: ...


# A Lagrangian bracket whose ends keep different sources straddles a jump in the kept set:
# no ω spends the budget exactly. It stops once its ends' costs differ by less than
# _JUMP_GAP of the budget (the repair's refill spends that sliver exactly, and the sources
# dropping inside it are worth ~0 at the margin) or its width falls below _JUMP_RTOL. Any
# bracket stops at _BRACKET_RTOL.
_JUMP_GAP = 1e-3
_JUMP_RTOL = 1e-4
_BRACKET_RTOL = 1e-12
SAMPLE_TRUST = 0.05  # largest Newton step in log ω after a sample's first guess
MAX_MOVE = 50.0  # largest step in log ω of any proposal


class Bracket:
    """Keeps ``lo < ω* <= hi`` and proposes the next ``ω``.

    While the kept set stays the same, Newton on ``log cost`` against ``log ω`` (its slope
    holds the kept set fixed). Where sources drop out between evaluations (the budget below
    ``Σ λ``), those jumps dominate the cost curve and only a secant through the last two
    evaluations sees them. When a
    proposal leaves the bracket, the Illinois variant of regula falsi; failing that, bisection.
    """

    def __init__(
        self, target: float, top: float, *, max_move: float = MAX_MOVE, smooth: bool = False
    ) -> None:
        self.max_move = max_move  # largest step in log ω that Newton may take
        # A fixed kept set's cost has no jumps: a bracket that stops shrinking there is stuck
        # on a steep stretch. (The Lagrangian's jumps are settled by the secant instead.)
        self.smooth = smooth
        self.log_target = math.log(target)
        self.lo, self.hi = 0.0, top  # cost(lo) > target >= cost(hi); cost(top) = 0
        self.f_lo, self.f_hi = math.inf, -math.inf  # log(cost / target) at each end
        self.cost_lo, self.cost_hi = math.inf, 0.0
        self.kept_lo, self.kept_hi = -1, -1  # how many sources are kept at each end
        self.side = 0  # which end moved last: -1 lo, +1 hi (Illinois halves a stuck end)
        self.repeats = 0  # how many times in a row the same end moved
        self.last_move = math.inf
        self.previous: Point | None = None
        self.widths: list[float] = []  # log(hi/lo) after each evaluation with both ends known

    @property
    def collapsed(self) -> bool:
        return self.lo > 0 and self.hi / self.lo - 1 < _BRACKET_RTOL

    def straddles_jump(self, budget: float) -> bool:
        """The kept set changes inside the bracket and no ω in it can do much better: the
        ends' costs differ by less than ``_JUMP_GAP`` of the budget, or the bracket is too
        narrow for ω to say more."""
        if self.lo <= 0 or self.kept_lo == self.kept_hi:
            return False
        return (
            self.cost_lo - self.cost_hi <= _JUMP_GAP * budget or self.hi / self.lo - 1 < _JUMP_RTOL
        )

    def add(self, point: Point) -> None:
        f = math.log(point.cost) - self.log_target if point.cost > 0 else -math.inf
        side = -1 if f > 0 else 1
        self.repeats = self.repeats + 1 if side == self.side else 0
        if f > 0:
            self.lo, self.f_lo, self.cost_lo = point.omega, f, point.cost
            self.kept_lo = point.kept_count
            if self.side == -1:
                self.f_hi *= 0.5
            self.side = -1
        else:
            self.hi, self.f_hi, self.cost_hi = point.omega, f, point.cost
            self.kept_hi = point.kept_count
            if self.side == 1:
                self.f_lo *= 0.5
            self.side = 1
        if self.lo > 0:
            self.widths.append(math.log(self.hi / self.lo))

    @property
    def stalling(self) -> bool:
        """The ends alternate yet the bracket did not halve in two steps: a proposal keeps
        landing just past a steep stretch (a source dying as ``y`` nears 1), where neither
        Newton nor regula falsi sees the shape of the curve."""
        widths = self.widths
        return self.smooth and len(widths) >= 3 and widths[-1] > 0.5 * widths[-3]

    def next_omega(self, point: Point) -> float:
        previous, self.previous = self.previous, point
        if previous is not None and previous.kept_count != point.kept_count:
            candidate = self._secant(previous, point)
        else:
            candidate = self._newton(point)
        if self.lo == 0:
            return candidate if 0 < candidate < self.hi else self.hi * 1e-3
        if self.repeats >= 2 or self.stalling:  # creeping: bisect
            self.widths.clear()  # give the next proposals two steps again
            return math.sqrt(self.lo) * math.sqrt(self.hi)
        if self.lo < candidate < self.hi:
            return candidate
        self.last_move = math.inf  # Newton restarts its convergence check after this
        if math.isfinite(self.f_lo) and math.isfinite(self.f_hi):
            a, b = math.log(self.lo), math.log(self.hi)
            candidate = math.exp(b - self.f_hi * (b - a) / (self.f_hi - self.f_lo))
            if self.lo < candidate < self.hi:
                return candidate
        return math.sqrt(self.lo) * math.sqrt(self.hi)  # the product can underflow

    def _step(self, point: Point, elasticity: float) -> float:
        """The ``ω`` where ``log cost`` reaches the target along ``elasticity``. A secant
        through two evaluations sees the kept-set jumps, so it is not held to the trust region
        that keeps Newton's jump-blind first steps near a sample's guess."""
        if not (point.cost > 0 and elasticity < 0):
            return math.nan
        move = -(math.log(point.cost) - self.log_target) / elasticity
        return point.omega * math.exp(max(-MAX_MOVE, min(MAX_MOVE, move)))

    def _secant(self, a: Point, b: Point) -> float:
        ratio = a.omega / b.omega if b.omega > 0 else math.nan
        if a.cost <= 0 or b.cost <= 0 or not (0 < ratio < math.inf) or ratio == 1:
            return math.nan
        elasticity = (math.log(a.cost) - math.log(b.cost)) / math.log(ratio)
        return self._step(b, elasticity)

    def _newton(self, point: Point) -> float:
        """Newton's proposal, or NaN when there is none or it is not converging."""
        if not (point.cost > 0 and point.slope < 0):
            return math.nan
        elasticity = point.slope / point.cost  # d log cost / d log ω
        if not elasticity < 0:  # underflowed to zero: no usable slope
            return math.nan
        move = -(math.log(point.cost) - self.log_target) / elasticity
        move = max(-self.max_move, min(self.max_move, move))
        converging = abs(move) < 0.5 * abs(self.last_move)
        self.last_move = move
        return point.omega * math.exp(move) if converging else math.nan
