"""Reddit's top posts per subreddit, as a trace with a real value signal.

``umbrae/reddit-top-2.5-million`` on GitHub (public domain, PDDL) holds, per subreddit, its
1,000 all-time top posts as of mid-August 2013 (``data/<subreddit>.csv``: ``created_utc``,
``score``, ``permalink``, ...). Read as a trace (docs/trace-format.rst): each subreddit is a
source, its ``/new`` listing a hub showing its latest ``--shows`` posts; a post appeared at its
``created_utc``; its value is its ``score``, spread over its first two days as votes that
halve every ``--half-life-hours`` (the data has the final score only, not when the votes
came: the decay is assumed, the same for every post).

What it can and cannot tell (docs/simulator.rst, "Real traces"): only posts that became top
posts are in it, so a source's rate is that of its valuable posts (a crawler reading ``/new``
sees more, and more links leave a listing between two crawls), and the value of a post is
real but its timing is not. It keeps the real spread of sources' rates and values, their
bursts and quiet hours, and appearance times to the second.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from scrapy_echo.sim.git_files import GitFiles, git
from scrapy_echo.sim.trace import Trace, write_trace

_HOUR = 3600.0
# The ages (hours) at whose ends a post's votes are written as clicks: finer where most come.
_AGES = (0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 48.0)


def posts_in_git(repo: Path, start: float, end: float) -> dict[str, list[tuple[float, str, float]]]:
    """Per subreddit file, its posts created in ``[start, end)``: (time, URL, score). A row
    that cannot be read is skipped (and a file too large for the archive's copy)."""
    listing = git(repo, "ls-tree", "-r", "--name-only", "HEAD", "--", "data")
    out: dict[str, list[tuple[float, str, float]]] = {}
    with GitFiles(repo) as files:
        for name in (n for n in listing.split("\n") if n.endswith(".csv")):
            data = files.read(f"HEAD:{name}")
            text = "" if data is None else data.decode("utf-8", "replace")
            posts = list(_posts(text, start, end))
            if posts:
                out[name.rsplit("/", 1)[-1][: -len(".csv")]] = posts
    return out


def _posts(data: str, start: float, end: float) -> Any:
    for row in csv.DictReader(io.StringIO(data)):
        try:
            t, score = float(row["created_utc"]), float(row["score"])
        except (KeyError, TypeError, ValueError):
            continue
        link = row.get("permalink") or ""
        if start <= t < end and math.isfinite(score) and link.startswith("http"):
            yield t, link, score


def trace_from_posts(
    posts: dict[str, list[tuple[float, str, float]]],
    start: float,
    end: float,
    *,
    min_posts: int = 20,
    shows: int = 100,
    half_life: float = 6 * _HOUR,
    warmup: float = 7 * 86400.0,
    name: str = "",
) -> Trace:
    """The trace of the subreddits with at least ``min_posts`` posts in ``[start, end)``."""
    kept = sorted(sub for sub, rows in posts.items() if len(rows) >= min_posts)
    if not kept:
        raise ValueError(f"no subreddit has {min_posts} posts in the window")
    rows = sorted(
        (t - start, s, url, score) for s, sub in enumerate(kept) for t, url, score in posts[sub]
    )
    page_urls = list(dict.fromkeys(url for _, _, url, _ in rows))
    index = {url: i for i, url in enumerate(page_urls)}
    first: dict[str, tuple[float, int]] = {}
    for t, s, url, _ in rows:  # (a post is in one subreddit: its first row is its link)
        first.setdefault(url, (t, s))
    pages = np.array([index[url] for url in first], dtype=np.intp)
    appeared = np.array([t for t, _ in first.values()])
    source = np.array([s for _, s in first.values()], dtype=np.intp)
    score = {url: sc for _, _, url, sc in rows}
    decay = math.log(2.0) / half_life
    ages = np.array(_AGES) * _HOUR
    share = np.diff(np.concatenate([[0.0], -np.expm1(-decay * ages)]))
    share[-1] += math.exp(-decay * ages[-1])  # (the votes after two days, at its end)
    click_page: list[int] = []
    click_ts: list[float] = []
    click_count: list[float] = []
    for url, (t, _) in first.items():
        value = score[url]
        if value <= 0:
            continue
        click_page.extend([index[url]] * len(ages))
        click_ts.extend(t + ages)
        click_count.extend(value * share)
    duration = end - start
    order = np.argsort(click_ts, kind="stable")
    return Trace(
        duration=duration,
        source_ids=kept,
        source_urls=[f"https://www.reddit.com/r/{sub}/new/" for sub in kept],
        page_urls=page_urls,
        page_created=appeared[np.argsort(pages)],
        link_source=source,
        link_page=pages,
        link_appeared=appeared,
        link_disappeared=np.full(pages.size, math.inf),
        click_page=np.array(click_page, dtype=np.intp)[order],
        click_ts=np.array(click_ts)[order],
        click_count=np.array(click_count)[order],
        warmup=min(warmup, duration / 2),
        name=name,
        description=(
            "Reddit's top posts per subreddit (umbrae/reddit-top-2.5-million): a post's "
            f"score as clicks, halving every {half_life / _HOUR:g} h (assumed)"
        ),
        source_shows=np.full(len(kept), shows, dtype=np.intp),
        extra_meta={"started": start, "clicks": "score, decay assumed"},
    )


def _day(text: str) -> float:
    try:
        return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        raise ValueError(f"{text!r} is not a date (YYYY-MM-DD)") from None


def cmd_import(args: argparse.Namespace) -> int:
    start, end = _day(args.start), _day(args.end)
    if not end > start:
        raise ValueError("--end must come after --start")
    posts = posts_in_git(Path(args.repo), start, end)
    trace = trace_from_posts(
        posts, start, end,
        min_posts=args.min_posts, shows=args.shows, half_life=args.half_life_hours * _HOUR,
        warmup=args.warmup_days * 86400.0, name=f"reddit-top {args.start} to {args.end}",
    )  # fmt: skip
    write_trace(trace, args.out, compress=args.compress)
    summary = trace.summary()
    print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    return 0


def add_parser(sub: Any) -> None:
    """``import-reddit-top``, a command of ``python -m scrapy_echo.sim``."""
    command = sub.add_parser(
        "import-reddit-top", help="Reddit's top posts per subreddit (a git copy) as a trace"
    )
    command.add_argument("repo", help="a clone of umbrae/reddit-top-2.5-million (bare or not)")
    command.add_argument("--out", required=True, help="directory to write the trace to")
    command.add_argument("--start", default="2013-07-15", help="first day (2013-07-15)")
    command.add_argument("--end", default="2013-08-12", help="day after the last (2013-08-12)")
    command.add_argument("--min-posts", type=int, default=20, help="posts a source needs (20)")
    command.add_argument("--shows", type=int, default=100, help="posts a listing shows (100)")
    command.add_argument("--half-life-hours", type=float, default=6.0, help="votes halve every (6)")
    command.add_argument("--warmup-days", type=float, default=7.0, help="days not scored (7)")
    command.add_argument("--compress", action="store_true", help="write .csv.gz files")
    command.set_defaults(command=cmd_import)


__all__ = ["add_parser", "posts_in_git", "trace_from_posts"]
