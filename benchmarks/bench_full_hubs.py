"""What the censoring-aware rate and the full-hub model are worth, trace by trace: ECHO-newpages
against the same policy with the paper's count (no censoring, no full hubs) on full-hub traces.

Each trace is ``synth --param hub_items=10,10 --param listing_share=0 --param dated_share=1
--seed S`` (every hub shows its latest 10 links, dated), cached under ``--cache``. Prints each
replay's fraction of the upper bound, then per rate the difference on each seed, its mean with
its standard error, its median and how many seeds went up. One replay of a trace moves by a few
tenths of a point with any change of plan, and traces differ by more (docs/benchmarks.rst,
"Which sites to watch, and rates we can trust"), so only the figures over several seeds say
anything.

Run: python benchmarks/bench_full_hubs.py [--seeds 0-5] [--rates 0.05,0.1,0.2] [--jobs 2]
[--cache DIR]. The defaults make 36 replays: 51 minutes on this machine, two at a time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import ClassVar

from scrapy_echo.model.decisions.echo_newpages import EchoNewPages
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import PAPER_SETUP, SimSettings, simulate
from scrapy_echo.sim.results import score, upper_bound
from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.trace import load_trace, write_trace

POLICIES = ("echo-newpages", "paper's count")


class PapersCount(EchoNewPages):
    """ECHO-newpages as it was before issue 17: the rate of a hub that overflowed counted as
    found, every hub planned as showing every link."""

    name = "echo-papers-count"
    censoring_aware = False
    plans_full_hubs: ClassVar[bool] = False


def trace_dir(cache: Path, seed: int) -> Path:
    path = cache / f"full-hubs-{seed}"
    if not path.exists():
        params = SynthParams(seed=seed, hub_items=(10, 10), listing_share=0.0, dated_share=1.0)
        part = path.with_name(path.name + ".part")
        write_trace(synthesize(params), part)
        part.rename(path)  # a cut-short run leaves no half trace behind
    return path


def replay(job: tuple[Path, str, float]) -> float:
    path, policy, rate = job
    trace = load_trace(path)
    chosen = make_policy("echo-newpages") if policy == POLICIES[0] else PapersCount()
    result = simulate(trace, chosen, SimSettings(crawl_rate=rate, **PAPER_SETUP))
    bound, _ = upper_bound(trace)
    return 100.0 * score(trace, result, bound=bound).fraction_of_upper_bound


def seeds_of(text: str) -> list[int]:
    if "-" in text:
        low, high = (int(part) for part in text.split("-"))
        return list(range(low, high + 1))
    return [int(part) for part in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-5", help="trace seeds: 0-5 or 0,3,4")
    parser.add_argument("--rates", default="0.05,0.1,0.2", help="crawls/s, comma-separated")
    parser.add_argument("--jobs", type=int, default=2, help="replays at once")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "echo-bench")
    args = parser.parse_args()
    seeds, rates = seeds_of(args.seeds), [float(r) for r in args.rates.split(",")]
    dirs = {seed: trace_dir(args.cache, seed) for seed in seeds}
    jobs = [(dirs[s], p, r) for r in rates for s in seeds for p in POLICIES]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        fractions = dict(zip(jobs, pool.map(replay, jobs), strict=True))
    for rate in rates:
        print(f"{rate:g} crawls/s  seed  {POLICIES[0]:>13}  {POLICIES[1]:>13}  difference")
        differences = []
        for seed in seeds:
            ours, before = (fractions[(dirs[seed], p, rate)] for p in POLICIES)
            differences.append(ours - before)
            print(f"{'':13}{seed:>4}  {ours:12.2f}%  {before:12.2f}%  {ours - before:+10.2f}")
        mean = statistics.fmean(differences)
        spread = statistics.stdev(differences) if len(differences) > 1 else float("nan")
        print(
            f"{'':13}mean {mean:+.2f} ± {spread / len(differences) ** 0.5:.2f} (standard error),"
            f" median {statistics.median(differences):+.2f},"
            f" up on {sum(d > 0 for d in differences)} of {len(differences)}"
        )


if __name__ == "__main__":
    main()
