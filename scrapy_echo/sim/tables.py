"""The simulator's Markdown tables: a row per policy, a column per crawl rate."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from scrapy_echo.sim.results import Score


def profit_table(
    scores: list[Score], policies: list[str], rates: list[float], bound: float, unit: str
) -> str:
    def cell(s: Score) -> str:
        return f"{s.profit_per_second:.4g} ({s.fraction_of_upper_bound:.1%})"

    note = f"\nprofit per second (fraction of the upper bound, {bound:.4g} {unit})"
    return _grid(scores, policies, rates, cell) + note


def coverage_table(scores: list[Score], policies: list[str], rates: list[float]) -> str:
    """Pham et al.'s coverage: the share of new pages found within 1 h, 4 h and at all."""

    def cell(s: Score) -> str:
        return f"{s.coverage_1h:.1%} / {s.coverage_4h:.1%} / {s.coverage:.1%}"

    note = "\nnew pages found within 1 h / within 4 h / at all (Pham et al.'s coverage)"
    return "\n" + _grid(scores, policies, rates, cell) + note


def ablation_table(scores: list[Score], variants: list[str], rates: list[float]) -> str:
    """Per variant and rate, the mean share of the bound over its replays, and its mean
    difference from the first variant's (the default) in points, ± its standard error
    (replays paired by their order: the same re-solve period)."""
    runs: dict[tuple[str, float], list[float]] = {}
    for s in scores:
        runs.setdefault((s.policy, s.rate), []).append(s.fraction_of_upper_bound)

    def cell(s: Score) -> str:
        mine = np.array(runs[(s.policy, s.rate)])
        diff = 100 * (mine - np.array(runs[(variants[0], s.rate)]))
        if diff.size < 2:  # (one replay: no spread to tell)
            return f"{mine.mean():.4f} ({diff.mean():+.2f})"
        error = diff.std(ddof=1) / math.sqrt(diff.size)
        return f"{mine.mean():.4f} ({diff.mean():+.2f} ± {error:.2f})"

    note = (
        "\nmean fraction of the upper bound over the replays (mean difference from the "
        "default in points ± its standard error)"
    )
    return _grid(scores, variants, rates, cell) + note


def _grid(
    scores: list[Score], policies: list[str], rates: list[float], cell: Callable[[Score], str]
) -> str:
    """A Markdown table: a row per policy, a column per rate."""
    by = {(s.policy, s.rate): s for s in scores}
    head = "| policy | " + " | ".join(f"{r:g} crawls/s" for r in rates) + " |"
    rule = "|---|" + "---|" * len(rates)
    rows = [
        f"| {name} | " + " | ".join(cell(by[(name, r)]) for r in rates) + " |" for name in policies
    ]
    return "\n".join([head, rule, *rows])


__all__ = ["coverage_table", "profit_table"]
