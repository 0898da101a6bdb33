"""Importing a front-page archive kept in git: a real git repository of hourly snapshots, made
here in the shape of ``defgsus/frontpage-archive-2026`` (one JSON file per section page)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from scrapy_echo.sim.frontpages import Skipped, snapshots_in_git, trace_from_snapshots
from scrapy_echo.sim.trace import load_trace, write_trace

HOUR = 3600.0
SITE = "https://news.example"


def snapshot(links: list[str], hour: int, status: int = 200) -> dict[str, object]:
    return {
        "timestamp": f"2026-01-01T{hour:02d}:00:30",
        "url": SITE,
        "response": {"status": status},
        "articles": [{"title": name, "url": f"{SITE}/{name}"} for name in links],
    }


def archive(tmp_path: Path, commits: list[dict[str, dict[str, object]]]) -> Path:
    """A git repository with one commit per item: each file's JSON under docs/snapshots."""
    repo = tmp_path / "archive"
    (repo / "docs" / "snapshots" / "news.example").mkdir(parents=True)
    git = ["git", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    for hour, files in enumerate(commits):
        for name, doc in files.items():
            path = repo / "docs" / "snapshots" / "news.example" / f"{name}.json"
            path.write_text(json.dumps(doc))
        subprocess.run([*git, "add", "-A"], check=True)
        env = {"GIT_COMMITTER_DATE": f"2026-01-01T{hour:02d}:01:00Z", "HOME": str(tmp_path)}
        subprocess.run(
            [*git, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
             "--allow-empty", "-m", f"update {hour}"],
            check=True,
            env={**env, "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
    return repo


def test_an_archive_in_git_becomes_a_trace(tmp_path) -> None:
    repo = archive(
        tmp_path,
        [
            {"index": snapshot(["x", "y"], 0), "world": snapshot(["y", "w"], 0)},
            # y leaves the index; the world page failed this hour: it still shows what it did
            {"index": snapshot(["z", "x"], 1), "world": snapshot([], 1, status=500)},
            {"index": snapshot(["z", "y"], 2), "world": snapshot(["w", "v"], 2)},  # y is back
            {},  # nothing changed: the files were not scraped again (no new snapshot)
        ],
    )
    skipped = Skipped()
    snapshots = list(snapshots_in_git(repo, "docs/snapshots", skipped))
    assert skipped.counts == {"error_status": 1}
    assert len(snapshots) == 5
    trace = trace_from_snapshots(snapshots, warmup=HOUR)
    assert trace.source_ids == ["news.example/index", "news.example/world"]
    # to one typical gap past the last snapshot: the median of the pages' own gaps (the
    # index is taken hourly, the world page, failing once, two hours apart)
    assert trace.duration == 3.5 * HOUR
    links = {
        (trace.source_ids[s][13:], trace.page_urls[p][len(SITE) + 1 :], a / HOUR, d / HOUR)
        for s, p, a, d in zip(
            trace.link_source, trace.link_page, trace.link_appeared, trace.link_disappeared,
            strict=True,
        )
    }  # fmt: skip
    assert links == {
        ("index", "x", 0, 2), ("index", "y", 0, 1), ("index", "z", 1, math.inf),
        ("index", "y", 2, math.inf),
        ("world", "y", 0, 2), ("world", "w", 0, math.inf), ("world", "v", 2, math.inf),
    }  # fmt: skip
    created = dict(zip(trace.page_urls, trace.page_created / HOUR, strict=True))
    assert created == {f"{SITE}/{n}": h for n, h in [("x", 0), ("y", 0), ("w", 0), ("z", 1),
                                                     ("v", 2)]}  # fmt: skip
    assert trace.source_shows.tolist() == [2, 2] and trace.click_ts.size == 0
    write_trace(trace, tmp_path / "trace")
    back = load_trace(tmp_path / "trace")  # (the loader's checks pass)
    assert back.link_source.size == 7 and back.warmup == HOUR


def test_a_folder_that_is_not_an_archive_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ValueError, match="git log"):
        list(snapshots_in_git(tmp_path, "docs/snapshots", Skipped()))
    with pytest.raises(ValueError, match="no readable snapshot"):
        trace_from_snapshots([])
