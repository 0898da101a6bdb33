"""ECHO-newpages against echo-paper (and the production anchor, ``adaptive``) on real traces and
on the six synthetic full-hub traces of ``bench_full_hubs.py``: the test a change to the
default must pass (it may lose to echo-paper on no real trace, at no budget).

Each trace is replayed at each rate ``--repeats`` times, the re-solve period spread over ±20%
(one replay moves by a point with any change of plan at a low budget), and each policy's mean
fraction of the upper bound is printed with ECHO-newpages' mean difference from echo-paper,
± its standard error (replays paired by period). ``--trace NAME=DIR[:no-clicks]`` adds an
imported trace (docs/simulator.rst, "Real traces"); ``--seeds`` the synthetic ones (cached
under ``--cache``).

Run: python benchmarks/bench_vs_paper.py [--trace NAME=DIR[:no-clicks] ...] [--seeds 0-5]
[--rates 0.05,0.1,0.2] [--repeats 1] [--jobs 2] [--cache DIR] [--policies ...]
"""

from __future__ import annotations

import argparse
import math
import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from bench_full_hubs import trace_dir

from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import PAPER_SETUP, SimSettings, simulate
from scrapy_echo.sim.results import score, upper_bound
from scrapy_echo.sim.trace import load_trace

HALF_LIFE = 6 * 3600.0  # the no-click objective's (ECHO_DEFAULT_HALF_LIFE)


def replay(job: tuple[str, bool, str, float, float]) -> float:
    path, no_clicks, policy, rate, period = job
    trace = load_trace(path)
    half_life = HALF_LIFE if no_clicks else None
    settings = SimSettings(
        crawl_rate=rate, resolve_interval=period, clicks=not no_clicks, **PAPER_SETUP
    )
    result = simulate(trace, make_policy(policy), settings)
    bound, _ = upper_bound(trace, half_life=half_life)
    return 100.0 * score(trace, result, bound=bound, half_life=half_life).fraction_of_upper_bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", action="append", default=[], help="NAME=DIR[:no-clicks]")
    parser.add_argument("--seeds", default="", help="synthetic full-hub seeds, e.g. 0-5")
    parser.add_argument("--rates", default="0.05,0.1,0.2")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--cache", default=None)
    parser.add_argument("--policies", default="echo-newpages,echo-paper,adaptive")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",")]
    policies = args.policies.split(",")
    if not {"echo-newpages", "echo-paper"} <= set(policies):
        parser.error("--policies must name echo-newpages and echo-paper (the difference)")
    traces: list[tuple[str, str, bool]] = []
    for spec in args.trace:
        name, _, rest = spec.partition("=")
        path, _, flag = rest.partition(":")
        traces.append((name, path, flag == "no-clicks"))
    if args.seeds:
        cache = Path(args.cache or tempfile.mkdtemp(prefix="bench-vs-paper-"))
        first, _, last = args.seeds.partition("-")
        for seed in range(int(first), int(last or first) + 1):
            traces.append((f"seed {seed}", str(trace_dir(cache, seed)), False))
    periods = (
        [1800.0]
        if args.repeats == 1
        else [1800.0 * (0.8 + 0.4 * i / (args.repeats - 1)) for i in range(args.repeats)]
    )
    jobs = [
        (path, no_clicks, policy, rate, period)
        for _, path, no_clicks in traces
        for rate in rates
        for period in periods
        for policy in policies
    ]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = dict(zip(jobs, pool.map(replay, jobs), strict=True))
    print("| trace | crawls/s | " + " | ".join(policies) + " | newpages - paper |")
    print("|---|---|" + "---|" * (len(policies) + 1))
    for name, path, no_clicks in traces:
        for rate in rates:
            runs = {p: [results[(path, no_clicks, p, rate, t)] for t in periods] for p in policies}
            means = " | ".join(f"{statistics.mean(runs[p]):.2f}%" for p in policies)
            diff = [a - b for a, b in zip(runs["echo-newpages"], runs["echo-paper"], strict=True)]
            error = statistics.stdev(diff) / math.sqrt(len(diff)) if len(diff) > 1 else math.nan
            print(f"| {name} | {rate:g} | {means} | {statistics.mean(diff):+.2f} ± {error:.2f} |")


if __name__ == "__main__":
    main()
