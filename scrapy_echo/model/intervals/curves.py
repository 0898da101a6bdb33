"""The decay curves of the ECHO model, vectorised and accurate at both ends.

``g(x) = 1 - (1 + x) e^{-x}`` is the stationarity curve of the interval problem
(docs/how-it-works.rst, "The optimal schedule"): a source with ``a = λP/μ`` is recrawled every
``I = g⁻¹(ω / a) / μ`` seconds. ``g`` runs from ``g(0) = 0`` (like ``x²/2``) to ``g(∞) = 1``;
near 0 the direct formula cancels, so the Taylor series takes over there.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

# Below this the direct formula loses digits (relative error ~1e-16/x); the series to x⁵ is
# exact to ~1e-16 there.
_SERIES_X = 1e-4
# Below this g⁻¹ is its own series (error ~s⁵ relative, s = sqrt(2y)).
_SERIES_Y = 1e-6
_MAX_NEWTON = 40
_ROOT_AT_HALF = 1.6783469900166608  # g(x) = 1/2
# Newton converges quadratically: once a step is below 1e-6 relative, the error after it is
# ~1e-12, and near y = 1 rounding keeps steps at ~1e-13 forever, so a tighter stop would spin.
_NEWTON_RTOL = 1e-6


def g_and_exp(x: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``g(x)`` and ``e^{-x}`` in one pass, for callers that need both."""
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(-x)
        out = -np.expm1(-x)
        out -= x * e
    tiny = x < _SERIES_X
    if tiny.any():
        t = x[tiny]
        out[tiny] = (t * t) * (0.5 - t * (1 / 3 - t * (1 / 8 - t / 30)))
    out[np.isinf(x)] = 1.0
    return out, e


def g(x: ArrayLike) -> FloatArray:
    """``1 - (1 + x) e^{-x}`` for ``x >= 0`` (``inf`` gives 1).

    >>> float(g(0.0)), round(float(g(1.0)), 6), float(g(np.inf))
    (0.0, 0.264241, 1.0)
    """
    return g_and_exp(np.atleast_1d(np.asarray(x, dtype=np.float64)))[0].reshape(np.shape(x))


def g_inv(y: ArrayLike, *, start: ArrayLike | None = None) -> FloatArray:
    """Inverse of :func:`g`: the ``x >= 0`` with ``g(x) = y``; ``inf`` for ``y >= 1``.

    Newton's method on ``(1 - y) - (1 + x) e^{-x}`` (which is ``g(x) - y``; its derivative is
    ``x e^{-x}``) from ``start`` when given (a warm start from a nearby solution: the solver's
    outer loop moves ``y`` a little at a time), else from the asymptotic guesses
    ``s + s²/3 + 11s³/72`` (``s = sqrt(2y)``, small ``y``) and ``L + log(1 + L + log(1 + L))``
    (``L = -log(1 - y)``, ``y`` near 1). Below ``y = 1e-6`` the series alone is exact to
    ~1e-11 and Newton would lose digits to cancellation, so the series is the answer there.

    >>> x = g_inv([0.0, 0.25, 0.999999, 1.0])
    >>> bool(np.allclose(g(x[:3]), [0.0, 0.25, 0.999999], rtol=1e-10)), float(x[3])
    (True, inf)
    """
    y = np.asarray(y, dtype=np.float64)
    live = (y >= _SERIES_Y) & (y < 1.0)
    q = np.subtract(1.0, y)
    # Entries outside Newton's range get overwritten below; until then they sit at the
    # root for q = 1/2, so they neither slow nor upset the loop.
    q[~live] = 0.5
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if start is None:
            x = _series(np.minimum(y, 0.5))
            big = -np.log(q)
            big += np.log(1.0 + big + np.log(1.0 + big))
            far = q < 0.5
            x[far] = big[far]
        else:
            x = np.array(start, dtype=np.float64, copy=True)
            x[~(np.isfinite(x) & (x > 0.0))] = 1.0
        x[~live] = _ROOT_AT_HALF
        _newton(x, q)
        tiny = ~live
        if tiny.any():
            x[tiny] = _series(np.maximum(y[tiny], 0.0))
            x[y >= 1.0] = np.inf
    return x


def _series(y: FloatArray) -> FloatArray:
    """``g⁻¹`` by its series in ``s = sqrt(2y)``: exact to ~s⁵ relative."""
    s = np.sqrt(2.0 * y)
    return s * (1.0 + s * (1.0 / 3.0 + s * (11.0 / 72.0 + s * (43.0 / 540.0))))


def _newton(x: FloatArray, q: FloatArray) -> None:
    """Solve ``(1 + x) e^{-x} = q`` for ``x`` in place (in-place ufuncs: at 10^6 sources,
    fresh temporaries cost more than the arithmetic)."""
    e = np.empty_like(x)
    step = np.empty_like(x)
    tmp = np.empty_like(x)
    for _ in range(_MAX_NEWTON):
        np.negative(x, out=e)
        np.exp(e, out=e)
        np.add(x, 1.0, out=step)
        np.multiply(step, e, out=step)
        np.subtract(q, step, out=step)
        np.multiply(x, e, out=tmp)
        np.divide(step, tmp, out=step)
        # Newton from far right of the root can jump below 0; halving keeps x positive.
        np.multiply(x, 0.5, out=tmp)
        np.subtract(x, step, out=x)
        np.maximum(x, tmp, out=x)
        np.abs(step, out=step)
        np.multiply(x, _NEWTON_RTOL, out=tmp)
        if not (step > tmp).any():
            break
