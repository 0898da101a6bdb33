"""Traces: sources, the links to new pages that appear and disappear on them, and clicks.

A trace is a directory (docs/trace-format.rst):

- ``sources.csv``: ``source_id,url``, optional ``shows`` (the hub shows only its latest
  ``shows`` links: a link whose ``disappeared`` is empty leaves when the ``shows``-th link
  after it appears) and ``dated`` (1: its listing states each link's publication time)
- ``links.csv``: ``source_id,page_url,appeared,disappeared`` (seconds from the start; an empty
  ``disappeared`` means until the end)
- ``pages.csv`` (optional): ``page_url,created`` (default: the page's first ``appeared``)
- ``clicks.csv``: ``page_url,ts,clicks``
- ``signals.csv`` (optional): ``source_id,ts``, a change-indicating signal naming a source (a
  ping, a sitemap's ``lastmod``, a feed's ``updated``): noisy, it may come without a new link
  and a new link may come without one
- ``updates.csv`` (optional): ``page_url,ts``, the page's content changed at ``ts`` (a
  correction, a live blog's new entry): a copy fetched before is stale from then on
- ``meta.json``: ``{"duration": seconds}``, optional ``name``, ``description``, ``warmup``

Any CSV may be gzip-compressed (``NAME.csv.gz``). Every value is checked on load; an error
names the file, the line (the header is line 1) and the column.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.sim.trace_files import (
    IntArray,
    TraceError,
    csv_rows,
    find_file,
    load_meta,
    load_signals,
    load_updates,
    push_out,
)
from scrapy_echo.sim.web_hosts import WebHosts, host_of, load_hosts, write_hosts

# Pages keep being clicked after the trace ends; clicks later than this past the end are
# almost surely a unit mistake (milliseconds for seconds).
CLICKS_AFTER_END = 7 * 86400.0


@dataclass(frozen=True)
class Trace:
    """A trace in memory: everything indexed by integers, clicks sorted by time."""

    duration: float
    source_ids: list[str]
    source_urls: list[str]
    page_urls: list[str]
    page_created: FloatArray
    link_source: IntArray
    link_page: IntArray
    link_appeared: FloatArray
    link_disappeared: FloatArray  # inf: until the end
    click_page: IntArray
    click_ts: FloatArray
    click_count: FloatArray
    warmup: float = 0.0
    name: str = ""
    description: str = ""
    skipped_clicks: int = 0  # clicks on pages no link points to: never findable
    extra_meta: dict[str, Any] = field(default_factory=dict)
    # Change-indicating signals, sorted by time: which source each names, and when it came.
    signal_source: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    signal_ts: FloatArray = field(default_factory=lambda: np.zeros(0))
    # Per source (empty: none): how many links its hub shows (0: all), and whether its
    # listing states each link's publication time (the page's ``created``).
    source_shows: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    source_dated: NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))
    # When pages changed after they appeared, sorted by page, then time.
    update_page: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.intp))
    update_ts: FloatArray = field(default_factory=lambda: np.zeros(0))
    # What its hosts do to requests (hosts.csv): delays, outages, hub pages; None: nothing.
    hosts: WebHosts | None = None

    def dated(self, source: int) -> bool:
        return bool(self.source_dated.size) and bool(self.source_dated[source])

    @property
    def n_sources(self) -> int:
        return len(self.source_ids)

    @property
    def n_pages(self) -> int:
        return len(self.page_urls)

    def summary(self) -> dict[str, object]:
        created = (self.page_created >= 0) & (self.page_created < self.duration)
        return {
            "sources": self.n_sources,
            "pages": self.n_pages,
            "links": int(self.link_source.size),
            "clicks": float(self.click_count.sum()),
            "days": round(self.duration / 86400, 2),
            "new pages per second": round(float(created.sum()) / self.duration, 4),
            "signals": int(self.signal_ts.size),
            "updates": int(self.update_ts.size),
        }


def load_trace(path: str | Path) -> Trace:
    """Read and validate the trace in directory ``path``."""
    root = Path(path)
    if not root.is_dir():
        raise TraceError(f"{root}: not a trace directory")
    meta = load_meta(root)
    duration = meta["duration"]

    source_ids: list[str] = []
    source_urls: list[str] = []
    index: dict[str, int] = {}
    shows: list[int] = []
    dated: list[bool] = []
    for row in csv_rows(root, "sources", ("source_id", "url")):
        sid = row.text("source_id")
        if sid in index:
            raise row.error("source_id", f"{sid!r} is listed twice")
        index[sid] = len(source_ids)
        source_ids.append(sid)
        source_urls.append(row.text("url"))
        shows.append(row.count("shows"))
        dated.append(row.flag("dated"))

    pages: dict[str, int] = {}
    link_source: list[int] = []
    link_pages: list[int] = []
    appeared_at: list[float] = []
    disappeared_at: list[float] = []
    left_open: list[bool] = []  # empty cells: until the end, or until pushed out of a hub
    for row in csv_rows(root, "links", ("source_id", "page_url", "appeared", "disappeared")):
        source = row.source(index)
        appeared = row.time("appeared", duration)
        disappeared = row.number("disappeared", low=0.0, empty=math.nan)
        left_open.append(math.isnan(disappeared))
        disappeared = math.inf if math.isnan(disappeared) else disappeared
        if disappeared < appeared:
            raise row.error("disappeared", f"{disappeared!r} is before appeared ({appeared!r})")
        if disappeared >= duration:  # there at the end: the same as until the end
            disappeared = math.inf
        link_source.append(source)
        link_pages.append(pages.setdefault(row.text("page_url"), len(pages)))
        appeared_at.append(appeared)
        disappeared_at.append(disappeared)
    link_page = np.array(link_pages, dtype=np.intp)
    link_appeared = np.array(appeared_at, dtype=np.float64)
    link_source_array = np.array(link_source, dtype=np.intp)
    shows_array = np.array(shows, dtype=np.intp)
    link_disappeared = np.array(disappeared_at, dtype=np.float64)
    push_out(link_source_array, link_appeared, link_disappeared, np.array(left_open), shows_array)
    first = np.full(len(pages), np.inf)
    np.minimum.at(first, link_page, link_appeared)
    created = first.copy()
    if find_file(root, "pages", required=False) is not None:
        for row in csv_rows(root, "pages", ("page_url", "created")):
            page_id = pages.get(row.text("page_url"))
            if page_id is None:
                continue  # a page no link points to: nothing to find, nothing to score
            value = row.number("created", low=-math.inf)
            if value > first[page_id]:
                raise row.error(
                    "created", f"{value!r} is after the page's first link ({first[page_id]!r})"
                )
            created[page_id] = value

    click_page: list[int] = []
    click_ts: list[float] = []
    click_count: list[float] = []
    skipped = 0
    for row in csv_rows(root, "clicks", ("page_url", "ts", "clicks")):
        ts = row.number("ts", low=0.0)
        if ts > duration + CLICKS_AFTER_END:
            raise row.error("ts", f"{ts!r} is more than a week after the end ({duration!r})")
        count = row.number("clicks", low=0.0)
        if count <= 0:
            raise row.error("clicks", f"{count!r} must be > 0")
        page_id = pages.get(row.text("page_url"))
        if page_id is None:
            skipped += 1
            continue
        click_page.append(page_id)
        click_ts.append(ts)
        click_count.append(count)
    order = np.argsort(np.array(click_ts, dtype=np.float64), kind="stable")
    signal_source, signal_ts = load_signals(root, index, duration)
    update_page, update_ts = load_updates(root, pages, created, duration)
    hosts = load_hosts(root, {host_of(url) for url in source_urls})
    return Trace(
        duration=duration,
        warmup=meta["warmup"],
        name=meta["name"],
        description=meta["description"],
        source_ids=source_ids,
        source_urls=source_urls,
        page_urls=list(pages),
        page_created=created,
        link_source=link_source_array,
        link_page=link_page,
        link_appeared=link_appeared,
        link_disappeared=link_disappeared,
        click_page=np.array(click_page, dtype=np.intp)[order],
        click_ts=np.array(click_ts, dtype=np.float64)[order],
        click_count=np.array(click_count, dtype=np.float64)[order],
        skipped_clicks=skipped,
        extra_meta=meta["extra"],
        signal_source=signal_source,
        signal_ts=signal_ts,
        source_shows=shows_array if shows_array.any() else np.zeros(0, dtype=np.intp),
        source_dated=np.array(dated) if any(dated) else np.zeros(0, dtype=bool),
        update_page=update_page,
        update_ts=update_ts,
        hosts=hosts,
    )


def write_trace(trace: Trace, path: str | Path, *, compress: bool = False) -> None:
    """Write ``trace`` to directory ``path`` in the trace format."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    meta = {
        **trace.extra_meta,
        "name": trace.name,
        "description": trace.description,
        "duration": trace.duration,
        "warmup": trace.warmup,
    }
    (root / "meta.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    with _writer(root, "sources", compress) as out:
        n = trace.n_sources
        shows = trace.source_shows.tolist() if trace.source_shows.size else [0] * n
        dated = [int(trace.dated(s)) for s in range(n)]
        out.writerow(["source_id", "url", "shows", "dated"])
        for row in zip(trace.source_ids, trace.source_urls, shows, dated, strict=True):
            out.writerow([row[0], row[1], row[2] or "", row[3]])
    urls = trace.page_urls
    limited = trace.source_shows.tolist() if trace.source_shows.size else [0] * trace.n_sources
    # On a hub that shows its latest links, an empty cell means "until pushed out": a link
    # there to the end says so with the end time.
    end = repr(trace.duration)
    with _writer(root, "links", compress) as out:
        out.writerow(["source_id", "page_url", "appeared", "disappeared"])
        for s, p, a, d in zip(
            trace.link_source.tolist(),
            trace.link_page.tolist(),
            trace.link_appeared.tolist(),
            trace.link_disappeared.tolist(),
            strict=True,
        ):
            gone = (end if limited[s] else "") if math.isinf(d) else repr(d)
            out.writerow([trace.source_ids[s], urls[p], repr(a), gone])
    with _writer(root, "pages", compress) as out:
        out.writerow(["page_url", "created"])
        out.writerows(zip(urls, map(repr, trace.page_created.tolist()), strict=True))
    with _writer(root, "clicks", compress) as out:
        out.writerow(["page_url", "ts", "clicks"])
        for p, t, c in zip(
            trace.click_page.tolist(),
            trace.click_ts.tolist(),
            trace.click_count.tolist(),
            strict=True,
        ):
            out.writerow([urls[p], repr(t), repr(c)])
    stale = [root / "signals.csv", root / "signals.csv.gz"]
    if trace.signal_ts.size:
        with _writer(root, "signals", compress) as out:
            out.writerow(["source_id", "ts"])
            ids = trace.source_ids
            out.writerows(
                [ids[s], repr(t)]
                for s, t in zip(trace.signal_source.tolist(), trace.signal_ts.tolist(), strict=True)
            )
    else:  # (a trace without signals written over one with them)
        for path in stale:
            path.unlink(missing_ok=True)
    if trace.update_ts.size:
        with _writer(root, "updates", compress) as out:
            out.writerow(["page_url", "ts"])
            pairs = zip(trace.update_page.tolist(), trace.update_ts.tolist(), strict=True)
            out.writerows([urls[p], repr(t)] for p, t in pairs)
    else:
        for path in (root / "updates.csv", root / "updates.csv.gz"):
            path.unlink(missing_ok=True)
    write_hosts(trace.hosts, root)


class _writer:  # a context manager used like a function, hence the name
    def __init__(self, root: Path, name: str, compress: bool) -> None:
        self.path = root / (f"{name}.csv.gz" if compress else f"{name}.csv")
        other = root / (f"{name}.csv" if compress else f"{name}.csv.gz")
        other.unlink(missing_ok=True)  # never leave both forms behind

    def __enter__(self) -> Any:
        if self.path.suffix == ".gz":
            self.handle: IO[str] = io.TextIOWrapper(
                gzip.open(self.path, "wb"), encoding="utf-8", newline=""
            )
        else:
            self.handle = self.path.open("w", encoding="utf-8", newline="")
        return csv.writer(self.handle)

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


__all__ = ["CLICKS_AFTER_END", "Trace", "TraceError", "load_trace", "write_trace"]
