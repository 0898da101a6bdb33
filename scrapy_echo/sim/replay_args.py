"""What the simulator's commands share: a trace, rates and one replay made from their command
line options (:func:`~scrapy_echo.sim.options.add_replay_options`)."""

from __future__ import annotations

import argparse
import math
import time

from scrapy_echo.model.estimation.scoreboard import estimator_scores, estimator_text
from scrapy_echo.sim.cli_output import Progress
from scrapy_echo.sim.engine import Replay, SimSettings, simulate
from scrapy_echo.sim.freshness import freshness
from scrapy_echo.sim.results import Score, score
from scrapy_echo.sim.sim_policies import make_sim_policy
from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.trace import Trace, load_trace


def trace_of(args: argparse.Namespace) -> Trace:
    """``--trace``: a trace directory, or ``synthetic`` (the default trace of ``--seed``)."""
    if args.trace == "synthetic":
        return synthesize(SynthParams(seed=args.seed))
    return load_trace(args.trace)


def half_life_of(args: argparse.Namespace) -> float | None:
    """The no-click metric's half-life, or ``None`` for the paper's click metric."""
    return float(args.half_life) if args.no_clicks else None


def parse_rates(spec: str) -> list[float]:
    """``--rates``: positive crawls/s separated by commas; ``ValueError`` saying so."""
    try:
        rates = [float(r) for r in spec.split(",") if r.strip()]
    except ValueError:
        raise ValueError(f"--rates must be numbers separated by commas, got {spec!r}") from None
    if not rates or any(not (math.isfinite(r) and r > 0) for r in rates):
        raise ValueError(f"--rates must be positive numbers, got {spec!r}")
    return rates


def replay_scored(
    trace: Trace, name: str, rate: float, args: argparse.Namespace, bound: float
) -> Score:
    """Policy ``name`` replayed at ``rate`` and scored against ``bound``; with ``--estimators``,
    its candidate estimators' scores printed too (as ``scrapy echo-report`` prints them)."""
    replay = replay_policy(trace, name, rate, args)
    if trace.update_ts.size:
        print(f"{name} @ {rate:g}/s: {freshness(trace, replay).text()}")
    if getattr(args, "estimators", False) and replay.core is not None:
        scores = estimator_text(estimator_scores(replay.core.state.learner)) or " none scored"
        print(f"{name} @ {rate:g}/s, its candidate estimators at the end:{scores}")
    return score(trace, replay, bound=bound, window=args.window, half_life=half_life_of(args))


def replay_policy(trace: Trace, name: str, rate: float, args: argparse.Namespace) -> Replay:
    """Policy ``name`` replayed at ``rate`` with the options' settings (the crawl's)."""
    settings = SimSettings(
        crawl_rate=rate,
        resolve_interval=args.resolve_interval,
        click_push_period=args.click_push_period,
        history_size=args.history_size,
        click_bin=args.click_bin,
        click_bins=args.click_bins,
        default_profit=args.default_profit,
        default_half_life=args.half_life,
        clicks_before_crawl=not args.search_log,
        clicks=not args.no_clicks,
        signals=not args.no_signals,
        refresh_share=args.refresh_share,
        refresh_stale_cost=args.refresh_stale_cost,
        backlog=args.backlog,
    )
    started = time.monotonic()
    bar = Progress(f"{name} @ {rate:g}/s")
    policy = make_sim_policy(name, seed=args.seed)
    replay = simulate(trace, policy, settings, progress=bar)
    bar.done(time.monotonic() - started)
    return replay


__all__ = ["half_life_of", "parse_rates", "replay_policy", "replay_scored", "trace_of"]
