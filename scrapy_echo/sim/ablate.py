"""``python -m scrapy_echo.sim ablate``: the default with each addition past the paper switched
off alone, and all of them, against the default and echo-paper (docs/benchmarks.rst)."""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from scrapy_echo.model.decisions import ablation
from scrapy_echo.sim.options import add_replay_options
from scrapy_echo.sim.replay_args import half_life_of, parse_rates, replay_scored, trace_of
from scrapy_echo.sim.results import Score, upper_bound
from scrapy_echo.sim.tables import ablation_table
from scrapy_echo.sim.trace import Trace

# A worker process's replay inputs, set once by _start_worker (the trace is large).
_worker: tuple[Trace, argparse.Namespace, float] | None = None


def cmd_ablate(args: argparse.Namespace) -> int:
    """Each variant replayed ``--repeats`` times with the re-solve period spread over ±20%:
    one replay moves by a point with any change of plan at a low budget, so a difference
    counts only against that spread. ``--jobs`` replays run at once, in processes."""
    if args.jobs < 1:
        raise ValueError(f"--jobs must be at least 1, got {args.jobs}")
    rates = parse_rates(args.rates)
    variants = ["echo-newpages", "echo-paper", *_switched_off(args.additions)]
    trace = trace_of(args)  # (after the options' checks: a synthetic trace takes seconds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bound, _ = upper_bound(trace, half_life=half_life_of(args))
    periods = spread(args.resolve_interval, args.repeats)
    jobs = [(name, rate, period) for period in periods for rate in rates for name in variants]
    if args.jobs == 1:
        _start_worker(trace, args, bound)
        scores = [_replay_job(job) for job in jobs]
    else:
        # Each worker gets the trace once, when it starts (copied by fork, not pickled).
        with ProcessPoolExecutor(
            args.jobs, initializer=_start_worker, initargs=(trace, args, bound)
        ) as pool:
            scores = list(pool.map(_replay_job, jobs))  # (in the jobs' order: paired by period)
    print(ablation_table(scores, variants, rates))
    saved = [
        {**s.as_dict(), "resolve_interval": period}
        for s, (_, _, period) in zip(scores, jobs, strict=True)
    ]
    (out / "ablation.json").write_text(json.dumps(saved, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out / 'ablation.json'}")
    return 0


def spread(period: float, repeats: int) -> list[float]:
    """``repeats`` re-solve periods spread evenly over ``period`` ± 20%."""
    if repeats < 1:
        raise ValueError(f"--repeats must be at least 1, got {repeats}")
    if repeats == 1:
        return [period]
    return [period * (0.8 + 0.4 * i / (repeats - 1)) for i in range(repeats)]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ablate = sub.add_parser(
        "ablate", help="the default with each addition past the paper switched off alone"
    )
    add_replay_options(ablate)
    ablate.add_argument("--rates", default="0.05,0.1,0.2", help="crawls/s, comma separated")
    ablate.add_argument(
        "--repeats", type=int, default=5, help="replays per variant and rate, re-solve periods "
        "spread over ±20%% (5)",
    )  # fmt: skip
    ablate.add_argument(
        "--additions", default="all", help="the additions to switch off one at a time, comma "
        f"separated, or 'all' ({', '.join(ablation.ADDITIONS)}); the last row switches off "
        "every one of them in any case",
    )  # fmt: skip
    ablate.add_argument("--jobs", type=int, default=1, help="replays run at once (1)")
    ablate.set_defaults(command=cmd_ablate)


def _switched_off(spec: str) -> list[str]:
    """The variants of ``--additions``: each named addition off alone, then all of them."""
    names = list(ablation.ADDITIONS) if spec == "all" else [n.strip() for n in spec.split(",")]
    unknown = [n for n in names if n not in ablation.ADDITIONS]
    if unknown or not names:
        raise ValueError(
            f"--additions: unknown addition {unknown[0] if unknown else spec!r}; known: "
            f"{', '.join(ablation.ADDITIONS)} (or all)"
        )
    return [ablation.PREFIX + n for n in names] + [ablation.PREFIX + "all"]


def _start_worker(trace: Trace, args: argparse.Namespace, bound: float) -> None:
    global _worker
    _worker = (trace, args, bound)


def _replay_job(job: tuple[str, float, float]) -> Score:
    assert _worker is not None, "_start_worker runs first"
    trace, args, bound = _worker
    name, rate, period = job
    replayed = argparse.Namespace(**{**vars(args), "resolve_interval": period})
    return replay_scored(trace, name, rate, replayed, bound)


__all__ = ["add_parser", "cmd_ablate", "spread"]
