"""Interval solver speed: 10^6 sources, vectorised, against a per-source scalar loop.

Prints the median time of ``solve_intervals`` on 10^6 sources (budget above and below the
total new-link rate), and the ratio to a scalar loop of the same algorithm (bisection on ω,
Newton for each source's g⁻¹, the pays-for-itself test), timed on a subset and scaled up
linearly: every step of the algorithm is a pass over all sources, so its time is linear in
their number for a fixed count of outer iterations, which the scalar loop fixes at 60.

Run: python benchmarks/bench_solver.py [--sources 1000000] [--repeat 5] [--subset 2000]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np

from scrapy_echo.model.intervals.solver import solve_intervals


def instance(
    n: int, seed: int = 0, sigma: float | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Heavy-tailed sources: links every ~7 min median, clicks per page ~1 median, click
    half-lives from minutes to days; ``sigma`` sets one spread for all three."""
    rng = np.random.default_rng(seed)
    s_lam, s_prof, s_mu = (1.5, 1.5, 1.0) if sigma is None else (sigma, sigma, sigma)
    return rng.lognormal(-6, s_lam, n), rng.lognormal(0, s_prof, n), rng.lognormal(-8, s_mu, n)


def scalar_g_inv(y: float) -> float:
    if y >= 1.0:
        return math.inf
    x = math.sqrt(2 * y) if y < 0.5 else -math.log(1 - y) + 1.0
    for _ in range(60):
        e = math.exp(-x)
        step = ((1 - y) - (1 + x) * e) / (x * e)
        x = max(x - step, 0.5 * x)
        if abs(step) < 1e-12 * x:
            break
    return x


def scalar_solve(lam: list[float], prof: list[float], mu: list[float], budget: float) -> float:
    """The Lagrangian of the vectorised solver, one source at a time; returns ω."""
    top = max(lr * p / m for lr, p, m in zip(lam, prof, mu, strict=True))
    lo, hi = top * 1e-12, top
    for _ in range(60):
        omega = math.sqrt(lo * hi)
        cost = 0.0
        for lr, p, m in zip(lam, prof, mu, strict=True):
            y = omega * m / (lr * p)
            x = scalar_g_inv(y)
            if math.isfinite(x) and m * math.exp(-x) > lr * y:
                cost += m / x + lr
        if cost > budget:
            lo = omega
        else:
            hi = omega
    return hi


def timed(fn, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sources", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--subset", type=int, default=2000)
    args = parser.parse_args()

    lam, prof, mu = instance(args.sources)
    wide = instance(args.sources, seed=1, sigma=2.0)
    medians = {}
    cases = (
        ("budget 3x new links", (lam, prof, mu), 3.0),
        ("budget 0.3x new links", (lam, prof, mu), 0.3),
        ("σ = 2, budget 0.5x new links", wide, 0.5),
    )
    for label, data, factor in cases:
        budget = factor * float(data[0].sum())
        solve_intervals(*data, budget)  # first touch of the buffers
        times = timed(lambda d=data, b=budget: solve_intervals(*d, b), args.repeat)
        sol = solve_intervals(*data, budget)
        medians[label] = statistics.median(times)
        print(
            f"solver {args.sources:,} sources, {label}: median {medians[label]:.3f} s "
            f"(min {min(times):.3f}, max {max(times):.3f}, {args.repeat} runs; "
            f"{sol.method}, {sol.kept.mean():.1%} kept, budget used {sol.cost / budget:.9f})"
        )

    m = min(args.subset, args.sources)
    sub = [arr[:m].tolist() for arr in (lam, prof, mu)]
    budget = 3.0 * sum(sub[0])
    scalar = statistics.median(timed(lambda: scalar_solve(*sub, budget), 1))
    scaled = scalar * args.sources / m
    vector = medians["budget 3x new links"]
    print(
        f"scalar loop: {m:,}-source subset in {scalar:.2f} s, scaled to {args.sources:,} "
        f"sources: {scaled:.0f} s"
    )
    print(f"ratio scalar / vectorised (budget 3x new links): {scaled / vector:,.0f}x")


if __name__ == "__main__":
    main()
