"""Stationary intervals of many sources at one ``ω``, fast enough to evaluate 10^6 of them
several times per solve.

At multiplier ``ω`` source ``i`` (scale ``a_i = λ_i P_i / μ_i``) sits at ``x_i = μ_i I_i`` with
``g(x_i) = y_i = ω / a_i``. Everything the solver's search needs follows from ``x`` alone,
because at the root ``g(x) = y`` exactly:

- it pays for its new pages iff ``μ e^{-x} > λ y``;
- it spends ``μ/x + λ`` crawls per second;
- ``ω dx/dω = y / (x e^{-x})``, which gives the search its Newton slope and this class a
  first-order prediction of ``x`` at the next ``ω`` (one Newton step then restores full
  precision, instead of four or five from a cold guess).

All arithmetic runs in preallocated buffers: at 10^6 sources the page faults of fresh
temporaries cost more than the arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray, g_inv

BoolArray = NDArray[np.bool_]
IntArray = NDArray[np.intp]

_NEWTON_RTOL = 1e-7
# Newton runs on y clipped to this range: below, its formula cancels and the series takes
# over; above, the source is dead (y >= 1) and only needs some finite x.
_Y_MIN = 1e-6
_Y_MAX = 1.0 - 1e-12
_X_AT_Y_MIN = 0.001414880661479091  # g⁻¹(_Y_MIN)
_X_AT_Y_MAX = 31.099896029035452  # g⁻¹(_Y_MAX): where a dead source's x waits
_MAX_NEWTON = 30
# Warm starts are used when log ω moved less than this; further, a cold guess is better.
_WARM_LOG_STEP = 0.3
_TRUST_PREDICTION = 1e-5


class StationaryPoints:
    """Evaluates the stationary schedule of fixed sources at any ``ω``.

    Sources with ``y >= 1`` are *dead* at this ``ω`` (never worth recrawling: ``I = inf``);
    their ``x`` is kept finite (``g⁻¹(1 - 1e-12)``) only so that the next warm start
    stays finite.

    Parameters
    ----------
    link_rate, decay, inv_scale : ndarray
        ``λ``, ``μ > 0`` and ``1/a = μ/(λP) > 0`` of the sources, all of one length.
    """

    def __init__(self, link_rate: FloatArray, decay: FloatArray, inv_scale: FloatArray) -> None:
        self.lam = link_rate
        self.mu = decay
        self.inv_scale = inv_scale
        n = inv_scale.size
        self.x = np.empty(n)
        self.y = np.empty(n)
        self.e = np.empty(n)
        self.rate = np.empty(n)  # μ/x, 0 for dead sources
        self.sensitivity = np.zeros(n)  # ω dx/dω
        self.kept = np.empty(n, dtype=bool)
        self.alive = np.empty(n, dtype=bool)
        self._y_solved = np.empty(n)
        self._target = np.empty(n)
        self._buf = np.empty(n)
        self._buf2 = np.empty(n)
        self.omega = math.nan
        self.evaluations = 0

    def at(self, omega: float) -> None:
        """Move to ``ω``: fills ``x``, ``y``, ``e = e^{-x}``, ``rate``, ``kept``, ``alive``."""
        self.evaluations += 1
        with np.errstate(over="ignore"):  # y = inf is a dead source, as it should be
            np.multiply(self.inv_scale, omega, out=self.y)
        # A source that comes alive at this ω has no prediction (its sensitivity was 0 while
        # dead, so its stale x would look trusted): Newton must run.
        revived = bool(np.any(self.y < 1.0, where=~self.alive)) if self.evaluations > 1 else True
        np.less(self.y, 1.0, out=self.alive)
        np.clip(self.y, _Y_MIN, _Y_MAX, out=self._y_solved)
        step = math.log(omega / self.omega) if omega > 0 and self.omega > 0 else math.inf
        warm = abs(step) < _WARM_LOG_STEP
        if warm:
            # First-order prediction, its move capped to [-x/2, +x]: near y = 1 the
            # sensitivity is huge and a raw step would overshoot far past the root.
            np.multiply(self.sensitivity, step, out=self._buf)
            np.minimum(self._buf, self.x, out=self._buf)
            np.multiply(self.x, -0.5, out=self._buf2)
            np.maximum(self._buf, self._buf2, out=self._buf)
            np.add(self.x, self._buf, out=self.x)
            np.maximum(self.x, 1e-300, out=self.x)
        # When the prediction moves every x by less than _TRUST_PREDICTION (relative), its
        # error (~that squared) is below what Newton would fix: the search's last, polishing
        # step takes this path. Near y = 1 the sensitivity is huge and Newton must run.
        trusted = warm and not revived and self._largest_relative_move() < _TRUST_PREDICTION
        tiny = self.y < _Y_MIN
        few_tiny = tiny.any()
        if few_tiny:
            # Newton solves these at the clip, y = _Y_MIN; starting them at that root keeps
            # them from holding the whole loop back. The series gives their real x below.
            self.x[tiny] = _X_AT_Y_MIN
        if not (warm and (trusted or self._polish())):
            self._cold()
        if few_tiny:  # Newton loses digits there; the series is exact
            self.x[tiny] = g_inv(self.y[tiny])
        self.omega = omega
        self._derive()

    def _cold(self) -> None:
        """``x`` from scratch. A dead source only needs a finite ``x``, and Newton near
        ``y = 1`` is what made a cold pass slow, so only live sources are solved."""
        live = self.alive
        if live.all():
            self.x[:] = g_inv(self._y_solved)
            return
        self.x.fill(_X_AT_Y_MAX)
        self.x[live] = g_inv(self._y_solved[live])

    def subset(self, chosen: IntArray) -> StationaryPoints:
        """The sources at positions ``chosen`` alone, carrying this one's warm start (``x`` and
        its sensitivity at the current ``ω``), so the next move stays a cheap polish."""
        inner = StationaryPoints(
            self.lam.take(chosen), self.mu.take(chosen), self.inv_scale.take(chosen)
        )
        self.x.take(chosen, out=inner.x)
        self.sensitivity.take(chosen, out=inner.sensitivity)
        self.alive.take(chosen, out=inner.alive)
        inner.omega = self.omega
        inner.evaluations = self.evaluations
        return inner

    def _largest_relative_move(self) -> float:
        """``max |Δx| / x`` of the prediction just applied (``_buf`` holds ``Δx``)."""
        np.abs(self._buf, out=self._buf2)
        np.divide(self._buf2, self.x, out=self._buf2)
        return float(self._buf2.max(initial=0.0))

    def _polish(self) -> bool:
        """Newton from the predicted ``x``; False if it did not converge."""
        np.subtract(1.0, self._y_solved, out=self._target)
        np.log(self._target, out=self._target)
        np.negative(self._target, out=self._target)
        with np.errstate(all="ignore"):
            return _newton(self._target, self.x, self._buf, self._buf2)

    def _derive(self) -> None:
        with np.errstate(all="ignore"):
            self._derive_unguarded()
        # At x = 0 (y underflowed) the interval is as short as a double can say: no recrawl
        # rate is representable, so count none rather than inf.
        self.rate[~np.isfinite(self.rate)] = 0.0
        self.sensitivity[~np.isfinite(self.sensitivity)] = 0.0

    def _derive_unguarded(self) -> None:
        x, e = self.x, self.e
        np.negative(x, out=e)
        np.exp(e, out=e)
        np.divide(self.mu, x, out=self.rate)
        self.rate[~self.alive] = 0.0
        np.multiply(x, e, out=self._buf)
        np.divide(self.y, self._buf, out=self.sensitivity)
        self.sensitivity[~self.alive] = 0.0
        # Pays for its new pages at this interval (module docstring).
        np.multiply(self.mu, e, out=self._buf)
        np.multiply(self.lam, self.y, out=self._buf2)
        np.greater(self._buf, self._buf2, out=self.kept)
        self.kept &= self.alive

    def spend(self, mask: BoolArray | None = None) -> tuple[float, float]:
        """Crawls per second of the sources in ``mask`` (default: those that pay), and
        ``ω d/dω`` of it (the jumps of a changing kept set left out)."""
        keep = self.kept if mask is None else mask
        cost = float(np.sum(self.rate, where=keep)) + float(np.sum(self.lam, where=keep))
        with np.errstate(all="ignore"):
            np.multiply(self.rate, self.sensitivity, out=self._buf2)
            np.divide(self._buf2, self.x, out=self._buf2)
        slope = -float(np.sum(self._buf2, where=keep & np.isfinite(self._buf2)))
        return cost, slope

    def intervals(self) -> FloatArray:
        """``I = x/μ``; ``inf`` for dead sources."""
        with np.errstate(over="ignore"):
            out = self.x / self.mu
        out[~self.alive] = np.inf
        return out


def _newton(target: FloatArray, x: FloatArray, f: FloatArray, d: FloatArray) -> bool:
    """Newton on ``x - log(1 + x) = target`` (``target = -log(1 - y)``, the log form of
    ``g(x) = y``) in place; False if it did not converge.

    The log form is convex in ``x``, so Newton never oscillates: from the right of the root it
    descends monotonically, from the left it lands right of it first. Its cancellation at small
    ``x`` costs ~1e-10 relative at ``y = 1e-6``, the bottom of the range it is used on.
    """
    for _ in range(_MAX_NEWTON):
        np.add(x, 1.0, out=d)
        np.log(d, out=f)
        np.subtract(x, f, out=f)
        np.subtract(f, target, out=f)
        np.multiply(f, d, out=f)
        np.divide(f, x, out=f)
        np.subtract(x, f, out=x)
        np.maximum(x, 1e-300, out=x)
        np.abs(f, out=f)
        np.divide(f, x, out=f)
        worst = f.max(initial=0.0)
        if not worst > _NEWTON_RTOL:  # also stops on NaN; the caller then goes cold
            return bool(worst == worst)
    return False
