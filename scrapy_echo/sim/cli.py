"""``python -m scrapy_echo.sim``: write a synthetic trace, compare policies, find needed rates."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from scrapy_echo.model.decisions import ablation
from scrapy_echo.model.decisions.registry import POLICIES
from scrapy_echo.sim import ablate, frontpages, reddit
from scrapy_echo.sim.capacity_greedy import CapacityGreedy
from scrapy_echo.sim.ceiling import Ceiling, ceiling, hindsight_estimates
from scrapy_echo.sim.cli_output import write_plots
from scrapy_echo.sim.options import add_replay_options
from scrapy_echo.sim.rate_errors import rate_errors
from scrapy_echo.sim.replay_args import (
    half_life_of,
    parse_rates,
    replay_policy,
    replay_scored,
    trace_of,
)
from scrapy_echo.sim.results import Score, score, upper_bound
from scrapy_echo.sim.search import needed_rate
from scrapy_echo.sim.sim_policies import SIM_ONLY
from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.tables import coverage_table, profit_table
from scrapy_echo.sim.trace import write_trace
from scrapy_echo.sim.week_ceiling import trace_week, week_fractions

POLICY_ORDER = [
    "echo-newpages",
    "echo-paper",
    "echo-schedule",
    "echo-greedy",
    "fixed-quota",
    "frequency",
    "bfs",
    "greedy",
    "greedy-cis",
    "lds",
    "rr",
    "od-win",
    "greedy-oracle",
]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return int(args.command(args))
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


# -- commands ---------------------------------------------------------------------------
def cmd_synth(args: argparse.Namespace) -> int:
    overrides = dict(_synth_param(spec) for spec in args.param)
    params = replace(SynthParams(sources=args.sources, days=args.days, seed=args.seed), **overrides)
    trace = synthesize(params)
    write_trace(trace, args.out, compress=args.compress)
    summary = trace.summary()
    print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    trace = trace_of(args)
    policies = _policies(args.policies)
    rates = parse_rates(args.rates)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bound, _ = upper_bound(trace, half_life=half_life_of(args))
    scores: list[Score] = []
    for rate in rates:
        for name in policies:
            scores.append(replay_scored(trace, name, rate, args, bound))
    unit = "fresh pages/s (no clicks)" if args.no_clicks else "clicks/s"
    print(profit_table(scores, policies, rates, bound, unit))
    print(coverage_table(scores, policies, rates))
    (out / "results.json").write_text(
        json.dumps([s.as_dict() for s in scores], indent=2) + "\n", encoding="utf-8"
    )
    write_plots(scores, out)
    print(f"\nwrote {out / 'results.json'} and plots in {out}")
    return 0


def cmd_needed_rate(args: argparse.Namespace) -> int:
    trace = trace_of(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bound, _ = upper_bound(trace, half_life=half_life_of(args))
    found = []
    for name in _policies(args.policies):

        def fraction(rate: float, name: str = name) -> float:
            return replay_scored(trace, name, rate, args, bound).fraction_of_upper_bound

        rate = needed_rate(fraction, args.target, low=args.min_rate, high=args.max_rate)
        found.append({"policy": name, "rate": rate, "target": args.target})
        shown = "not reached" if math.isinf(rate) else f"{rate:.4g} crawls/s"
        print(f"{name:<14} {args.target:.0%} of the upper bound at {shown}")
    path = out / "needed_rate.json"
    finite = [{**f, "rate": (None if math.isinf(f["rate"]) else f["rate"])} for f in found]
    path.write_text(json.dumps(finite, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {path}")
    return 0


def cmd_ceiling(args: argparse.Namespace) -> int:
    trace = trace_of(args)
    rates = parse_rates(args.rates)
    est = hindsight_estimates(trace)
    found = ceiling(est, rates=rates, target=args.target)
    sources = int((est.link_rate > 0).sum())
    print(
        f"hindsight estimates: {len(est)} sources, {sources} with new pages, "
        f"{float(est.link_rate.sum()):.4g} new pages/s"
    )
    _print_ceiling(found, "parameters fitted to the whole trace")
    saved = found.as_dict()
    if args.week:
        week = trace_week(trace)
        seen = week.level[week.seconds > 0]
        print(
            f"\nthe trace's week: new pages by hour of the week {seen.min():.2f} to "
            f"{seen.max():.2f} times the mean; each hour's optimal schedule for its own rates, "
            "at the same budget per second"
        )
        by_hour = ceiling(est, rates=rates, target=args.target, fractions=week_fractions(est, week))
        _print_ceiling(by_hour, "every rate following the trace's week")
        saved["week"] = by_hour.as_dict()
    if len(trace.signal_ts):
        print(
            f"the trace's {len(trace.signal_ts)} change signals are not in this model: a "
            "schedule that follows them can pass these figures (run and needed-rate replay them)"
        )
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        path = out / "ceiling.json"
        path.write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {path}")
    return 0


def _print_ceiling(found: Ceiling, how: str) -> None:
    print("\n| crawls/s | optimal schedule | bfs |\n|---|---|---|")
    for rate, best, bfs in zip(found.rates, found.optimal, found.bfs, strict=True):
        print(f"| {rate:g} | {best:.1%} | {bfs:.1%} |")
    print(f"fractions of the model's bound (sum of lambda P), {how}\n")
    for name, rate in (("optimal schedule", found.optimal_needed), ("bfs", found.bfs_needed)):
        shown = "not reached" if math.isinf(rate) else f"{rate:.4g} crawls/s"
        print(f"{name:<17} {found.target:.0%} of the model's bound at {shown}")
    print(f"bfs / optimal schedule: {found.ratio:.2f}")


# -- pieces -----------------------------------------------------------------------------
def cmd_rates(args: argparse.Namespace) -> int:
    trace = trace_of(args)
    replay = replay_policy(trace, args.policies, args.rate, args)
    assert replay.core is not None
    bound, _ = upper_bound(trace, half_life=half_life_of(args))
    caught = score(trace, replay, bound=bound, window=args.window, half_life=half_life_of(args))
    print(f"{args.policies} @ {args.rate:g}/s: {caught.fraction_of_upper_bound:.3%} of the bound")
    print(rate_errors(trace, replay.core, replay.crawls_per_source).text())
    return 0


def _synth_param(spec: str) -> tuple[str, Any]:
    """``NAME=VALUE`` for a field of :class:`SynthParams`, VALUE of the field's type (pairs as
    ``LOW,HIGH``)."""
    name, sep, text = spec.partition("=")
    defaults = SynthParams()
    known = sorted(f for f in defaults.as_dict() if f not in ("sources", "days", "seed"))
    if not sep or name not in known:
        raise ValueError(f"--param must be NAME=VALUE with NAME one of {', '.join(known)}")
    default = getattr(defaults, name)
    try:
        if isinstance(default, tuple):
            value: Any = tuple(type(default[0])(x) for x in text.split(","))
            if len(value) != len(default):
                raise ValueError
        elif isinstance(default, int):
            value = int(text)
        else:
            value = float(text)
        if not all(math.isfinite(v) for v in (value if isinstance(value, tuple) else (value,))):
            raise ValueError
    except ValueError:
        like = ",".join(map(str, default)) if isinstance(default, tuple) else str(default)
        raise ValueError(f"--param {name}: expected a value like {like}, got {text!r}") from None
    return name, value


def _policies(spec: str) -> list[str]:
    if spec == "all":
        return list(POLICY_ORDER)
    names = [p.strip() for p in spec.split(",") if p.strip()]
    unknown = [
        n
        for n in names
        if n not in POLICIES and n not in SIM_ONLY and not n.startswith(ablation.PREFIX)
    ]
    if unknown or not names:
        known = ", ".join([*POLICY_ORDER, CapacityGreedy.name])
        raise ValueError(f"unknown policies {unknown}; choose from {known}")
    return names


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m scrapy_echo.sim",
        description="Replay traces of new links and clicks against crawl policies.",
    )
    sub = parser.add_subparsers(required=True)

    synth = sub.add_parser("synth", help="write a synthetic trace")
    synth.add_argument("--out", required=True, help="directory to write the trace to")
    synth.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    synth.add_argument("--sources", type=int, default=3000, help="content sources (3000)")
    synth.add_argument("--days", type=float, default=21.0, help="trace length in days (21)")
    synth.add_argument("--compress", action="store_true", help="write .csv.gz files")
    synth.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="any other field of scrapy_echo.sim.synth.SynthParams (repeatable), e.g. "
        "profit_sigma=2.0 or news_half_life_hours=6,24; see docs/simulator.rst",
    )
    synth.set_defaults(command=cmd_synth)

    run = sub.add_parser("run", help="compare policies at several crawl rates")
    add_replay_options(run)
    run.add_argument("--rates", default="0.05,0.1,0.2", help="crawls/s, comma separated")
    run.add_argument(
        "--estimators", action="store_true", help="print each replay's candidate estimators' "
        "predictive scores at its end (as scrapy echo-report does for a crawl)",
    )  # fmt: skip
    run.set_defaults(command=cmd_run)

    rates = sub.add_parser(
        "rates", help="estimated against true λ of the hubs crawled less than they fill up"
    )
    add_replay_options(rates)
    rates.add_argument("--rate", type=float, default=0.2, help="crawls/s (0.2)")
    rates.set_defaults(command=cmd_rates, policies="echo-newpages")

    needed = sub.add_parser("needed-rate", help="lowest rate reaching a fraction of the bound")
    add_replay_options(needed)
    needed.add_argument("--target", type=float, default=0.99, help="fraction (0.99)")
    needed.add_argument("--min-rate", type=float, default=0.01, help="crawls/s (0.01)")
    needed.add_argument("--max-rate", type=float, default=8.0, help="crawls/s (8)")
    needed.set_defaults(command=cmd_needed_rate)

    bound = sub.add_parser(
        "ceiling",
        help="what the model allows on a trace with every source's parameters known",
        description="Fit each source's lambda, P and mu to the whole trace (hindsight), then "
        "print the share of the model's bound the optimal schedule and BFS catch at each rate, "
        "and the least rates reaching --target. No replay: these are the model's expected "
        "values, a floor for the rates policies need in needed-rate.",
    )
    bound.add_argument("--trace", required=True, help="trace directory, or 'synthetic'")
    bound.add_argument("--seed", type=int, default=0, help="seed for 'synthetic' (0)")
    bound.add_argument("--rates", default="0.05,0.1,0.2", help="crawls/s, comma separated")
    bound.add_argument("--target", type=float, default=0.99, help="fraction (0.99)")
    bound.add_argument("--out", help="directory to write ceiling.json to")
    bound.add_argument(
        "--week",
        action="store_true",
        help="also with every source's rate following the trace's week, hour by hour",
    )
    bound.set_defaults(command=cmd_ceiling)
    ablate.add_parser(sub)
    frontpages.add_parser(sub)
    reddit.add_parser(sub)
    return parser
