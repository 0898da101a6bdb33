"""The options of the ``sim`` commands that replay a trace (``run``, ``rates``,
``needed-rate``, ``ablate``)."""

from __future__ import annotations

import argparse

from scrapy_echo.sim.engine import PAPER_SETUP


def add_replay_options(p: argparse.ArgumentParser) -> None:
    """The options of every command that replays a trace: its settings are the crawl's."""
    p.add_argument("--trace", required=True, help="trace directory, or 'synthetic'")
    p.add_argument("--policies", default="all", help="'all' or names separated by commas")
    p.add_argument("--out", required=True, help="directory for results and plots")
    p.add_argument("--seed", type=int, default=0, help="seed for 'synthetic' and BFS (0)")
    # The crawl settings' names (ECHO_RESOLVE_INTERVAL -> --resolve-interval); the
    # first build's names still work.
    p.add_argument(
        "--resolve-interval",
        "--resolve-period",
        type=float,
        default=1800.0,
        help="s between re-solves (1800)",
    )
    p.add_argument(
        "--click-push-period",
        "--push-period",
        type=float,
        default=3600.0,
        help="s between click log deliveries (3600)",
    )
    p.add_argument("--history-size", "--history", type=int, default=7, help="crawls behind λ (7)")
    p.add_argument("--click-bin", type=float, default=1200.0, help="age bin, s (1200)")
    p.add_argument("--click-bins", type=int, default=72, help="age bins fitted (72)")
    p.add_argument("--default-profit", type=float, default=1.0,
                   help="P before any click data (1)")  # fmt: skip
    p.add_argument(
        "--search-log",
        action="store_true",
        help="the learner sees a page's clicks only from its crawl on (a search engine's "
        "own log); default: all its clicks once crawled (site analytics)",
    )
    p.add_argument("--window", type=float, default=86400.0, help="dynamic profit, s (1 day)")
    p.add_argument(
        "--no-clicks",
        action="store_true",
        help="the crawler gets no click log (a monitor without a click feed), and a "
        "page is scored 1 crawled at once, halving every --half-life seconds of delay",
    )
    p.add_argument(
        "--no-signals",
        action="store_true",
        help="the crawler gets none of the trace's change-indicating signals "
        "(signals.csv); default: each as its time comes",
    )
    p.add_argument(
        "--refresh-share",
        type=float,
        default=PAPER_SETUP["refresh_share"],
        help="the refresh lane's share of the budget, as ECHO_REFRESH_SHARE (0: none, the "
        "paper's set-up; the crawl's default is 0.05)",
    )
    p.add_argument(
        "--backlog",
        choices=("skip", "crawl"),
        default=PAPER_SETUP["backlog"],
        help="what a source lists at its first crawl, as ECHO_BACKLOG (skip: old, the "
        "paper's set-up; the crawl's default is crawl)",
    )
    p.add_argument(
        "--refresh-stale-cost",
        type=float,
        default=1.0,
        help="what a click on a stale copy loses, as ECHO_REFRESH_STALE_COST (1)",
    )
    p.add_argument(
        "--half-life",
        type=float,
        default=6 * 3600.0,
        help="s: the value of a page without click data halves in (21600, as "
        "ECHO_DEFAULT_HALF_LIFE)",
    )


__all__ = ["add_replay_options"]
