"""Policies on webs whose hosts decide the crawl (scrapy_echo.sim.host_scenarios).

Slow valuable hosts: per seed, each policy's fraction of the upper bound and its ratio to BFS
paced per host (as stock Scrapy paces it) in the same run, with its hub crawls on the slow
hosts. Bursty paginated hubs: the share of the bursts' pages found, with and without next
pages. Each replay runs the crawl's short loop (FAST_LOOP) under the hosts' delays. Daily
bursts: budgets of 4 to 36 crawls a day, far fewer than the new pages, on seeds' first three.

Run: python benchmarks/bench_hosts.py [--seeds 1,2,3,4,5] [--rate 4] [--duration 600]
[--history 0] [--warmup 60] [--backlog crawl]; the live check's shape (its 90 s scored from the
start, hubs full of the 30 s before it): --duration 90 --history 30 --warmup 0.
"""

from __future__ import annotations

import argparse
from urllib.parse import urlsplit

import numpy as np

from scrapy_echo.sim.engine import SimSettings, simulate
from scrapy_echo.sim.host_scenarios import (
    FAST_LOOP,
    bursty_paginated_hubs,
    daily_bursts,
    slow_valuable_hosts,
)
from scrapy_echo.sim.results import score
from scrapy_echo.sim.sim_policies import make_sim_policy

POLICIES = ("bfs", "echo-paper", "echo-newpages", "echo-host-priced", "capacity-greedy")


def slow_hosts(
    seeds: list[int], rate: float, duration: float, history: float, warmup: float, backlog: str
) -> None:
    print(f"slow valuable hosts, {rate:g} requests/s, {duration:g} s ({history:g} s published "
          f"before, {warmup:g} s unscored, backlog {backlog}): fraction of the bound "
          "(ratio to BFS) [hub crawls on the slow hosts]")  # fmt: skip
    ratios: dict[str, list[float]] = {policy: [] for policy in POLICIES}
    for seed in seeds:
        trace = slow_valuable_hosts(seed, duration=duration, history=history, warmup=warmup)
        slow = {
            i for i, url in enumerate(trace.source_urls) if "news" in (urlsplit(url).hostname or "")
        }
        cells = []
        base = 0.0
        for policy in POLICIES:
            settings = SimSettings(rate, backlog=backlog, **FAST_LOOP)
            replay = simulate(trace, make_sim_policy(policy), settings)
            fraction = score(trace, replay).fraction_of_upper_bound
            base = base or fraction
            ratios[policy].append(fraction / base)
            hubs = sum(replay.crawls_per_source[i] for i in slow)
            cells.append(f"{policy} {fraction:.4f} ({fraction / base:.2f}x) [{hubs}]")
        print(f"  seed {seed}: " + "; ".join(cells), flush=True)
    for policy in POLICIES[1:]:
        print(f"  {policy} / bfs: median {np.median(ratios[policy]):.2f}x, "
              f"min {min(ratios[policy]):.2f}x over seeds {seeds}")  # fmt: skip


def bursts(seeds: list[int]) -> None:
    print("bursty paginated hubs (12 pages within 1 s every 30 s, 5 a page), 2 requests/s: "
          "pages found, first page only -> with up to 5 next pages")  # fmt: skip
    for seed in seeds:
        trace = bursty_paginated_hubs(seed)
        window = (trace.page_created >= trace.warmup) & (trace.page_created < trace.duration - 30)
        cells = []
        for policy in POLICIES:
            found = []
            for pages in (0, 5):
                settings = SimSettings(2.0, max_next_pages=pages, **FAST_LOOP)
                replay = simulate(trace, make_sim_policy(policy), settings)
                found.append(float(np.isfinite(replay.discovered[window]).mean()))
            cells.append(f"{policy} {found[0]:.1%} -> {found[1]:.1%}")
        print(f"  seed {seed}: " + "; ".join(cells), flush=True)


def daily(seeds: list[int]) -> None:
    print("daily bursts (20 hubs changing once a day, about 84 new items a day, hubs of 10): "
          "fraction of the bound at a few crawls a day, the crawl's settings")  # fmt: skip
    policies = ("bfs", "echo-paper", "echo-newpages", "capacity-greedy")
    for seed in seeds:
        trace = daily_bursts(seed)
        for per_day in (4, 9, 18, 36):
            settings = SimSettings(per_day / 86400.0)
            cells = []
            for policy in policies:
                replay = simulate(trace, make_sim_policy(policy), settings)
                cells.append(f"{policy} {score(trace, replay).fraction_of_upper_bound:.2%}")
            print(f"  seed {seed}, {per_day}/day: " + "; ".join(cells), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--rate", type=float, default=4.0)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--history", type=float, default=0.0, help="s published before start")
    parser.add_argument("--warmup", type=float, default=60.0, help="s not scored")
    parser.add_argument("--backlog", choices=("crawl", "skip"), default="crawl")
    parser.add_argument("--slow-hosts-only", action="store_true")
    args = parser.parse_args()
    seeds = [int(seed) for seed in args.seeds.split(",")]
    slow_hosts(seeds, args.rate, args.duration, args.history, args.warmup, args.backlog)
    if args.slow_hosts_only:
        return
    bursts(seeds)
    daily(seeds[:3])


if __name__ == "__main__":
    main()
