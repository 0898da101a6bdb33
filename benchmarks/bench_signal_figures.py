"""Fig. 3 and Fig. 4 of Busa-Fekete et al., *A Scalable Crawling Algorithm Utilizing Noisy
Change-Indicating Signals* (WWW 2025), reproduced in their freshness model on synthetic pages
(scrapy_echo.sim.signal_figures). Prints two tables of accuracy, the share of requests served
fresh, with each discrete policy's fraction of the matching continuous optimum.

    PYTHONPATH=. python benchmarks/bench_signal_figures.py [--pages 100] [--seed 2025]
"""

from __future__ import annotations

import argparse
import time

from scrapy_echo.sim.signal_figures import SLOTS, BudgetRow, figure_rows
from scrapy_echo.sim.signal_population import signal_population

BUDGETS = (5.0, 10.0, 20.0, 40.0, 80.0)  # crawls per unit time, for pages of median rate 1


def table(rows: list[BudgetRow], optimum: str, policies: tuple[str, ...]) -> str:
    head = f"{'R':>6} {'optimum':>9} " + " ".join(f"{name:>20}" for name in policies)
    lines = [head]
    for row in rows:
        best = row.optimum if optimum == "with" else row.optimum_plain
        cells = []
        for name in policies:
            got = row.runs[name].accuracy
            cells.append(f"{got:.4f} ({100 * got / best:5.1f}%)".rjust(20))
        lines.append(f"{row.budget:>6g} {best:>9.4f} " + " ".join(cells))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--seed", type=int, default=2025)
    parser.add_argument("--slots", type=int, default=SLOTS)
    args = parser.parse_args()
    started = time.perf_counter()
    pages = signal_population(args.pages, seed=args.seed)
    rows = figure_rows(pages, BUDGETS, seed=args.seed, slots=args.slots)
    print(f"{args.pages} pages, seed {args.seed}, {args.slots} slots per run (first 20% warm-up)")
    print("\nFig. 3: signals unused; optimum = continuous optimum without signals")
    print(table(rows, "without", ("GREEDY", "LDS")))
    print("\nFig. 4: signals used; optimum = continuous optimum with signals")
    print(table(rows, "with", ("GREEDY", "GREEDY-CIS", "GREEDY-NCIS")))
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
