"""A front-page archive kept in git, as a trace: each commit a snapshot of some section pages.

Archives such as ``defgsus/frontpage-archive-2026`` on GitHub commit, every hour, one JSON file
per section page (``<site>/<section>.json``: ``timestamp``, ``url`` and ``articles``, a list
of objects with a ``url``). Read as a trace (docs/trace-format.rst): each file is a source;
a link appeared at the first snapshot that shows it, and disappeared at the first snapshot of
that page that no longer does (it came back: a new link row); a hub shows at most the most it
ever showed. A page was created when any source first showed it. There are no clicks: replay
it with ``--no-clicks``.

What hourly snapshots cannot tell (docs/simulator.rst, "Real traces"): when within the hour a
link appeared (every appearance is put on a snapshot), and the links that came and went
between two snapshots (never seen). A crawler polling a hub more often than hourly gains
nothing measurable here, and the first snapshot's links are the backlog, so the warm-up
should cover at least a day.

A snapshot that cannot be read (not JSON, no ``articles`` list, an error status) is skipped
and counted: its page is taken to have shown what it showed before, not to have emptied.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from scrapy_echo.sim.git_files import GitFiles, git
from scrapy_echo.sim.trace import Trace, write_trace

SNAPSHOTS = "docs/snapshots"
_DAY = 86400.0


@dataclass
class Snapshot:
    """One section page's listing at one time."""

    source: str  # its path under the snapshots folder, without ".json"
    url: str
    t: float  # seconds since the epoch
    links: list[str]


@dataclass
class Skipped:
    """What an import left out, by reason."""

    counts: dict[str, int] = field(default_factory=dict)

    def add(self, reason: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1


def read_snapshot(source: str, data: bytes, committed: float) -> tuple[Snapshot | None, str]:
    """The snapshot a file holds (``None`` and why, if it cannot be read); ``committed``
    dates it when it states no time of its own."""
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        return None, "not_json"
    if not isinstance(doc, dict) or not isinstance(doc.get("articles"), list):
        return None, "no_articles"
    status = (doc.get("response") or {}).get("status", 200)
    if status != 200:
        return None, "error_status"
    links = []
    for article in doc["articles"]:
        url = article.get("url") if isinstance(article, dict) else None
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            links.append(url)
    if not links:
        return None, "empty"
    t = _time(doc.get("timestamp"), committed)
    stated = doc.get("url")
    url = stated if isinstance(stated, str) else source
    return Snapshot(source, url, t, list(dict.fromkeys(links))), ""


def _time(stamp: Any, fallback: float) -> float:
    """An archive's ``timestamp`` (ISO 8601, UTC when it names no zone) in epoch seconds."""
    if not isinstance(stamp, str):
        return fallback
    try:
        parsed = datetime.fromisoformat(stamp)
    except ValueError:
        return fallback
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def snapshots_in_git(repo: Path, under: str, skipped: Skipped) -> Iterator[Snapshot]:
    """Every readable snapshot file under ``under`` in each commit of ``repo``'s ``HEAD``,
    oldest commit first. A file unchanged since the last commit (the same blob) was not
    scraped again: it is no new snapshot."""
    commits = git(repo, "log", "--reverse", "--format=%H %ct", "HEAD").split("\n")
    read: dict[str, tuple[Snapshot | None, str]] = {}
    last: dict[str, str] = {}  # by path, its blob at the last commit
    with GitFiles(repo) as files:
        for line in filter(None, commits):
            commit, committed = line.split()
            listing = git(repo, "ls-tree", "-r", commit, "--", under)
            for entry in filter(None, listing.split("\n")):
                meta, path = entry.split("\t", 1)
                blob = meta.split()[2]
                if not path.endswith(".json") or last.get(path) == blob:
                    continue
                last[path] = blob
                source = path[len(under) :].strip("/")[: -len(".json")]
                if blob not in read:
                    data = files.read(blob)
                    read[blob] = (
                        (None, "missing")
                        if data is None
                        else read_snapshot(source, data, float(committed))
                    )
                snapshot, why = read[blob]
                if snapshot is None:
                    skipped.add(why)
                    continue
                if snapshot.source != source:  # (the same bytes under another name)
                    snapshot = Snapshot(source, snapshot.url, snapshot.t, snapshot.links)
                yield snapshot


def trace_from_snapshots(
    snapshots: list[Snapshot], *, warmup: float = _DAY, name: str = "", description: str = ""
) -> Trace:
    """The trace the ``snapshots`` (any order) make: times from the first snapshot, to one
    typical gap between two snapshots of a page past the last (the median over pages: the
    archive takes each page at its own minute of the hour, so all snapshots together are
    minutes apart)."""
    if not snapshots:
        raise ValueError("no readable snapshot")
    snapshots = sorted(snapshots, key=lambda s: (s.t, s.source))
    start = snapshots[0].t
    times = np.unique([s.t for s in snapshots])
    taken: dict[str, list[float]] = {}
    for snapshot in snapshots:
        taken.setdefault(snapshot.source, []).append(snapshot.t)
    gaps = [float(np.median(np.diff(ts))) for ts in taken.values() if len(ts) > 1]
    gap = float(np.median(gaps)) if gaps else 3600.0
    duration = snapshots[-1].t - start + gap
    sources: dict[str, int] = {}
    urls: list[str] = []
    shows: list[int] = []
    pages: dict[str, int] = {}
    created: list[float] = []
    rows: list[tuple[int, int, float, float]] = []
    shown: list[dict[int, float]] = []  # per source: page -> appeared, while it shows it
    for snapshot in snapshots:
        t = snapshot.t - start
        source = sources.setdefault(snapshot.source, len(sources))
        if source == len(urls):
            urls.append(snapshot.url)
            shows.append(0)
            shown.append({})
        shows[source] = max(shows[source], len(snapshot.links))
        now = set()
        for link in snapshot.links:
            page = pages.setdefault(link, len(pages))
            if page == len(created):
                created.append(t)
            now.add(page)
            shown[source].setdefault(page, t)
        for page in [p for p in shown[source] if p not in now]:
            rows.append((source, page, shown[source].pop(page), t))
    for source, still in enumerate(shown):
        rows.extend((source, page, appeared, math.inf) for page, appeared in still.items())
    rows.sort(key=lambda row: (row[2], row[0], row[1]))
    table = np.array(rows, dtype=np.float64).reshape(-1, 4)
    return Trace(
        duration=duration,
        source_ids=list(sources),
        source_urls=urls,
        page_urls=list(pages),
        page_created=np.array(created, dtype=np.float64),
        link_source=table[:, 0].astype(np.intp),
        link_page=table[:, 1].astype(np.intp),
        link_appeared=table[:, 2].copy(),
        link_disappeared=table[:, 3].copy(),
        click_page=np.zeros(0, dtype=np.intp),
        click_ts=np.zeros(0),
        click_count=np.zeros(0),
        warmup=min(warmup, duration / 2),
        name=name,
        description=description,
        source_shows=np.array(shows, dtype=np.intp),
        extra_meta={"started": start, "snapshots": int(times.size), "clicks": "none"},
    )


def cmd_import(args: argparse.Namespace) -> int:
    repo = Path(args.repo)
    skipped = Skipped()
    snapshots = list(snapshots_in_git(repo, args.under, skipped))
    description = (
        f"front-page snapshots from {repo.name}: a link appeared at the first snapshot "
        "showing it; no clicks"
    )
    trace = trace_from_snapshots(
        snapshots, warmup=args.warmup_days * _DAY, name=repo.name, description=description
    )
    write_trace(trace, args.out, compress=args.compress)
    summary = trace.summary()
    print(f"wrote {args.out}: " + ", ".join(f"{k} {v}" for k, v in summary.items()))
    if skipped.counts:
        print("skipped snapshots: " + ", ".join(f"{k} {v}" for k, v in skipped.counts.items()))
    return 0


def add_parser(sub: Any) -> None:
    """``import-frontpages``, a command of ``python -m scrapy_echo.sim``."""
    command = sub.add_parser(
        "import-frontpages",
        help="a front-page archive in git (one JSON file per section page) as a trace",
    )
    command.add_argument("repo", help="a clone of the archive (bare or not)")
    command.add_argument("--out", required=True, help="directory to write the trace to")
    command.add_argument("--under", default=SNAPSHOTS, help=f"the snapshots' folder ({SNAPSHOTS})")
    command.add_argument("--warmup-days", type=float, default=1.0, help="days scores leave out (1)")
    command.add_argument("--compress", action="store_true", help="write .csv.gz files")
    command.set_defaults(command=cmd_import)


__all__ = ["Snapshot", "add_parser", "read_snapshot", "snapshots_in_git", "trace_from_snapshots"]
