"""Per-host capacity: the limited solve against the single-budget solve on the same sources.

Sources as in ``bench_solver.py`` spread over hosts at random; each host's capacity is the
given quantile of what the unlimited schedule spends per host, so that share of the hosts
binds (0.5: half of them). Prints the median time of ``solve_intervals`` and of
``solve_with_limits``, their ratio, and what the limits cost in objective.

Run: python benchmarks/bench_limits.py [--sources 100000] [--hosts 2000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from bench_solver import instance  # (run as a script: its folder is on the path)

from scrapy_echo.model.intervals.limits import ScheduleLimits, solve_with_limits
from scrapy_echo.model.intervals.solver import solve_intervals


def timed(call, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = call()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=100_000)
    parser.add_argument("--hosts", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    lam, prof, mu = instance(args.sources)
    host = np.random.default_rng(1).integers(0, args.hosts, args.sources).astype(np.intp)
    budget = 1.5 * float(lam.sum())
    single_time, single = timed(lambda: solve_intervals(lam, prof, mu, budget), args.repeat)
    with np.errstate(divide="ignore"):
        spend = np.where(single.kept, 1 / single.intervals + lam, 0.0)
    per_host = np.bincount(host, weights=spend, minlength=args.hosts)
    print(f"{args.sources:,} sources on {args.hosts:,} hosts, budget 1.5x new links")
    print(f"single budget: {single_time:.3f} s")
    for quantile in (0.99, 0.9, 0.5):
        capacity = np.full(args.hosts, float(np.quantile(per_host, quantile)))
        limits = ScheduleLimits(host, capacity)
        took, sol = timed(
            lambda limits=limits: solve_with_limits(lam, prof, mu, budget, limits), args.repeat
        )
        print(
            f"capacity at the {quantile:.2f} quantile ({np.mean(per_host > capacity):.0%} of "
            f"hosts bind): {took:.3f} s, {took / single_time:.2f}x the single budget; "
            f"objective {sol.objective / single.objective:.4f} of the unlimited one"
        )


if __name__ == "__main__":
    main()
