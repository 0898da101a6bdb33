"""g and its inverse against exact arithmetic, over the whole range the solver uses."""

from __future__ import annotations

from decimal import Decimal, getcontext

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.model.intervals.curves import g, g_inv

getcontext().prec = 60


def g_exact(x: float) -> float:
    d = Decimal(x)
    if d < Decimal("1e-6"):  # the series, to terms far below double precision here
        return float(sum((-1) ** k * (k - 1) * d**k / _factorial(k) for k in range(2, 9)))
    return float(1 - (1 + d) * (-d).exp())


def _factorial(k: int) -> int:
    out = 1
    for i in range(2, k + 1):
        out *= i
    return out


def test_g_matches_exact_arithmetic_from_tiny_to_huge() -> None:
    xs = np.logspace(-12, np.log10(700), 3000)
    exact = np.array([g_exact(float(x)) for x in xs])
    assert np.max(np.abs(g(xs) - exact) / exact) < 1e-11


def test_g_limits() -> None:
    assert g(0.0) == 0.0
    assert g(np.inf) == 1.0
    assert np.isclose(g(1.0), 1 - 2 / np.e, rtol=1e-15)


def test_g_inv_round_trips_over_the_whole_range() -> None:
    ys = np.concatenate([np.logspace(-300, -1, 2000), 1 - np.logspace(-1, -15, 2000)])
    x = g_inv(ys)
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    back = np.array([g_exact(float(v)) for v in x])
    assert np.max(np.abs(back - ys) / ys) < 1e-9


def test_g_inv_edges() -> None:
    x = g_inv([0.0, 1.0, 2.0, 0.5])
    assert x[0] == 0.0
    assert np.isinf(x[1]) and np.isinf(x[2])
    assert np.isclose(g(x[3]), 0.5, rtol=1e-12)


def test_g_inv_warm_start_gives_the_same_answer() -> None:
    y = np.random.default_rng(0).uniform(1e-6, 1 - 1e-9, 1000)
    cold = g_inv(y)
    warm = g_inv(y * 0.999, start=cold)
    assert np.allclose(warm, g_inv(y * 0.999), rtol=1e-10)


@given(st.floats(1e-200, 0.999999), st.floats(1e-200, 0.999999))
def test_g_inv_is_monotone(a: float, b: float) -> None:
    lo, hi = sorted((a, b))
    x = g_inv([lo, hi])
    assert x[0] <= x[1]
