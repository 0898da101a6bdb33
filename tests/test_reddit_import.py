"""Importing Reddit's top posts per subreddit (umbrae/reddit-top-2.5-million's layout) from a
real git repository made here: a trace whose clicks are the posts' scores."""

from __future__ import annotations

import csv
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from scrapy_echo.sim.reddit import posts_in_git, trace_from_posts
from scrapy_echo.sim.trace import load_trace, write_trace

DAY = 86400.0
FIELDS = ["created_utc", "score", "domain", "id", "title", "permalink"]


def subreddit(path: Path, posts: list[tuple[float, int]]) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(FIELDS)
        for i, (t, score) in enumerate(posts):
            link = f"http://www.reddit.com/r/{path.stem}/comments/{i}/"
            writer.writerow([t, score, "self", str(i), "a title, with a comma", link])
        writer.writerow(["not a time", 5, "", "", "", "http://x"])  # (skipped)


def test_top_posts_in_git_become_a_trace_with_their_scores(tmp_path: Path) -> None:
    repo = tmp_path / "reddit"
    (repo / "data").mkdir(parents=True)
    subreddit(repo / "data" / "busy.csv", [(DAY + 60 * i, 10 * i) for i in range(5)])
    subreddit(repo / "data" / "quiet.csv", [(DAY + 5.0, 7), (3 * DAY, 3)])  # one outside
    subreddit(repo / "data" / "old.csv", [(10.0, 100)])  # none inside the window
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run(
        [*git, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "data"], check=True
    )
    posts = posts_in_git(repo, DAY, 2 * DAY)
    assert {name: len(rows) for name, rows in posts.items()} == {"busy": 5, "quiet": 1}
    trace = trace_from_posts(posts, DAY, 2 * DAY, min_posts=1, shows=3, warmup=0.0)
    assert trace.source_ids == ["busy", "quiet"] and trace.source_shows.tolist() == [3, 3]
    assert trace.n_pages == 6 and trace.duration == DAY
    assert sorted(trace.page_created.tolist()) == [0.0, 5.0, 60.0, 120.0, 180.0, 240.0]
    # Each post's score, all of it, as clicks after it appeared; a score of 0 is none.
    totals = np.bincount(trace.click_page, weights=trace.click_count, minlength=6)
    by_url = dict(zip(trace.page_urls, totals, strict=True))
    assert math.isclose(by_url["http://www.reddit.com/r/busy/comments/4/"], 40.0)
    assert by_url["http://www.reddit.com/r/busy/comments/0/"] == 0.0
    assert (trace.click_ts >= trace.page_created[trace.click_page]).all()
    assert np.all(np.diff(trace.click_ts) >= 0)
    write_trace(trace, tmp_path / "trace")
    assert load_trace(tmp_path / "trace").n_pages == 6  # (the loader's checks pass)
    with pytest.raises(ValueError, match="no subreddit has 9 posts"):
        trace_from_posts(posts, DAY, 2 * DAY, min_posts=9)
