"""Fig. 3 and Fig. 4 of Busa-Fekete et al., *A Scalable Crawling Algorithm Utilizing Noisy
Change-Indicating Signals* (WWW 2025), on synthetic pages: the accuracy of the discrete
policies at each budget, next to the continuous optimum they approach.

- Fig. 3, signals unused: GREEDY and LDS (the low-discrepancy order of the optimal no-signal
  rates) against the optimum without signals;
- Fig. 4, signals used: GREEDY, GREEDY-CIS and GREEDY-NCIS against the optimum with signals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from scrapy_echo.model.decisions.freshness_policies import (
    Greedy,
    GreedyCis,
    GreedyNcis,
    Lds,
    SlotPolicy,
)
from scrapy_echo.model.refetch.signal_optimum import signal_optimum
from scrapy_echo.model.refetch.signal_renewal import SignalPages
from scrapy_echo.sim.signal_freshness import WindowResult, simulate

SLOTS = 30_000  # crawl slots per run, whatever the budget: the same number of decisions
WARMUP = 0.2  # share of the run left out of the measurement (every page starts just crawled)


@dataclass(frozen=True)
class BudgetRow:
    """One budget's figures: ``optimum`` and ``optimum_plain`` the continuous optima with and
    without signals; ``runs`` each policy's measured window by name."""

    budget: float
    optimum: float
    optimum_plain: float
    runs: dict[str, WindowResult]


def figure_rows(
    pages: SignalPages,
    budgets: Sequence[float],
    *,
    seed: int,
    slots: int = SLOTS,
    warmup: float = WARMUP,
) -> list[BudgetRow]:
    """Every policy of both figures at every budget (one simulation each, seeded by ``seed``
    and the budget's position: the policies at one budget see the same signals and first
    changes, while later changes come from the shared stream in the order each policy's
    crawls ask for them, so they differ between policies)."""
    if slots < 10:
        raise ValueError(f"slots must be >= 10, got {slots!r}")
    if not 0 <= warmup < 1:
        raise ValueError(f"warmup must be in [0, 1), got {warmup!r}")
    ncis = GreedyNcis(pages)  # the table is the costly part, and it holds for any budget
    rows = []
    for position, budget in enumerate(budgets):
        plain = signal_optimum(pages.without_signals(), budget)
        best = signal_optimum(pages, budget)
        horizon = slots / budget
        window = [(warmup * horizon, horizon)]
        policies: list[SlotPolicy] = [Greedy(pages), Lds(plain.rates), GreedyCis(pages), ncis]
        runs = {
            policy.name: simulate(
                pages,
                policy,
                budget=[(0.0, budget)],
                horizon=horizon,
                windows=window,
                seed=seed + position,
            )[0]
            for policy in policies
        }
        rows.append(BudgetRow(budget, best.accuracy, plain.accuracy, runs))
    return rows


__all__ = ["SLOTS", "WARMUP", "BudgetRow", "figure_rows"]
