"""Simulator speed: one policy over the default synthetic trace (3000 sources, 3 weeks).

Prints the wall time of ECHO-newpages at 1 crawl/s (the target: at most 60 s on a 2-core
machine), and of BFS on the same trace in the same run, whose decisions cost next to nothing:
the ratio shows what the policy's decisions add to the replay itself.

Run: python benchmarks/bench_sim.py [--rate 1.0] [--days 21] [--policies echo-newpages,bfs]
"""

from __future__ import annotations

import argparse
import time

from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import PAPER_SETUP, SimSettings, simulate
from scrapy_echo.sim.results import score, upper_bound
from scrapy_echo.sim.synth import SynthParams, synthesize


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=1.0)
    parser.add_argument("--days", type=float, default=21.0)
    parser.add_argument("--policies", default="echo-newpages,bfs")
    args = parser.parse_args()

    started = time.perf_counter()
    trace = synthesize(SynthParams(days=args.days))
    print(f"synthetic trace: {trace.summary()} in {time.perf_counter() - started:.1f} s")
    bound, _ = upper_bound(trace)
    times = {}
    for name in args.policies.split(","):
        started = time.perf_counter()
        replay = simulate(
            trace, make_policy(name), SimSettings(crawl_rate=args.rate, **PAPER_SETUP)
        )
        times[name] = time.perf_counter() - started
        result = score(trace, replay, bound=bound)
        slots = replay.source_crawls + replay.page_crawls + replay.idle_slots
        print(
            f"{name} at {args.rate:g} crawls/s: {times[name]:.1f} s for {slots:,} crawl slots "
            f"({slots / times[name]:,.0f} slots/s), {result.fraction_of_upper_bound:.1%} "
            "of the upper bound"
        )
    if "bfs" in times and len(times) > 1:
        for name, seconds in times.items():
            if name != "bfs":
                print(f"{name} / bfs time: {seconds / times['bfs']:.2f}x")


if __name__ == "__main__":
    main()
