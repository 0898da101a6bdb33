"""A small worked example: optimal recrawl intervals for six sources at three budgets.

Run: python -m scrapy_echo.model
"""

from __future__ import annotations

import numpy as np

from scrapy_echo.model.intervals.solver import solve_intervals

SOURCES = [
    # name, new links per hour, clicks per new page, click half-life (hours)
    ("front page", 12.0, 40.0, 3.0),
    ("politics", 6.0, 25.0, 6.0),
    ("sport", 8.0, 10.0, 2.0),
    ("opinion blog", 0.5, 30.0, 48.0),
    ("weather", 2.0, 1.0, 1.0),
    ("archive", 0.1, 0.5, 500.0),
]


def main() -> None:
    names = [s[0] for s in SOURCES]
    lam = np.array([s[1] for s in SOURCES]) / 3600
    prof = np.array([s[2] for s in SOURCES])
    mu = np.log(2) / (np.array([s[3] for s in SOURCES]) * 3600)
    print(f"{len(names)} sources publishing {lam.sum() * 3600:.1f} new pages per hour in all\n")
    for per_hour in (60.0, 30.0, 12.0):
        sol = solve_intervals(lam, prof, mu, per_hour / 3600)
        print(
            f"budget {per_hour:.0f} crawls/hour: {sol.objective * 3600:.1f} clicks/hour "
            f"expected, value of one crawl {sol.omega:.2f} clicks ({sol.method})"
        )
        for name, interval, kept in zip(names, sol.intervals, sol.kept, strict=True):
            if not kept:
                when = "dropped: its new pages are not worth the crawls"
            elif np.isinf(interval):
                when = "kept, never recrawled"
            else:
                when = f"recrawl every {interval / 60:6.1f} min"
            print(f"  {name:<13} {when}")
        print()


if __name__ == "__main__":
    main()
