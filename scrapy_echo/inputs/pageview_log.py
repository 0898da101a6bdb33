"""Page-view logs read whole into numpy arrays, for ranking sites
(:mod:`scrapy_echo.model.temporal_sites`; docs/how-it-works.rst, "Ranking sites by how
temporal they are").

A page-view log is a finished click feed (:mod:`scrapy_echo.inputs.clickfeed`): JSON Lines or CSV
rows ``url, ts, clicks``, ``clicks`` being the page's views in the bin starting at ``ts``.
The rows' rules are the feed's, checked by its own code: a bad row is skipped, counted by kind
in :attr:`PageViewLog.invalid`, and the first of each kind is logged with its line; a row is
taken whole or not at all. Two differences, since the file is complete rather than growing:
a last line without a newline is read, and a missing file is an error.

Logs run to tens of millions of rows, so CSV is read in blocks, column by column: the URL of
each distinct raw cell is canonicalised once (a dict remembers it), times and views go through
``float`` straight into arrays. A block with any row this fast path cannot take whole (a bad
row, an ISO time, a blank line) is read row by row by the feed reader's own code instead.
JSON Lines is always read row by row, a few times slower.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "views.csv"
>>> _ = path.write_text("url,ts,clicks\\nhttps://A.example/x,0,3\\nhttps://a.example/x#c,86400,1\\n")
>>> log = read_page_views(path)
>>> log.page, log.ts, log.views, log.urls
(array([0, 0]), array([    0., 86400.]), array([3., 1.]), ['https://a.example/x'])
"""

from __future__ import annotations

import csv
import gc
import math
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from urllib.parse import urlsplit

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.core.identity import site_of
from scrapy_echo.inputs.clickfeed import LATEST_SECONDS, check_timestamp, check_url, parse_click
from scrapy_echo.inputs.feed_reader import FeedReader, InvalidClickRow

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.intp]

BLOCK_BYTES = 1 << 22
_FIRST_BLOCK = 1 << 16  # small: the lines up to the CSV header are read row by row
_TIME_CACHE = 1 << 20  # distinct ISO time strings remembered (a log has one per bin)


@dataclass(frozen=True)
class PageViewLog:
    """The rows taken: ``page[i]`` indexes ``urls`` (canonical, in order of first sight)."""

    page: IntArray
    ts: FloatArray  # epoch seconds
    views: FloatArray
    urls: list[str]
    invalid: Counter[str]

    @property
    def rows(self) -> int:
        return int(self.page.size)


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    # Millions of short-lived lists and strings, none in a cycle: the collector would
    # rescan them all every few thousand rows (it more than doubles the reading time).
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class _PageViewReader(FeedReader[tuple[int, float, float]]):
    what = "page-view"
    columns = ("url", "ts", "clicks")

    def __init__(self, path: str | os.PathLike[str], *, fmt: str | None = None) -> None:
        super().__init__(path, fmt=fmt)
        self.urls: list[str] = []
        self._by_url: dict[str, int] = {}  # canonical URL -> page
        self._by_raw: dict[str, int] = {}  # the URL as written -> page
        self._times: dict[str, float] = {}
        self._parts: list[tuple[IntArray, FloatArray, FloatArray]] = []

    def parse(self, values: Mapping[str, object]) -> tuple[int, float, float]:
        url, ts, clicks = (values.get(name) for name in self.columns)
        if url is None or ts is None or clicks is None:
            parse_click(url, ts, clicks)  # raises the feed's missing_field
        canonical = self._canonical(url)
        when = self._time(ts)
        views = _plain_number(clicks)
        if views is None or not (math.isfinite(views) and views >= 0):
            views = parse_click(canonical, when, clicks).clicks  # the feed's rule decides
        return self._register(str(url), canonical), when, views

    def _canonical(self, url: object) -> str:
        if isinstance(url, str) and (page := self._by_raw.get(url)) is not None:
            return self.urls[page]
        return check_url(url)  # raises bad_url

    def _register(self, raw: str, canonical: str) -> int:
        """The page of a row being taken (only then: a skipped row leaves no page behind)."""
        page = self._by_url.setdefault(canonical, len(self._by_url))
        if page == len(self.urls):
            self.urls.append(canonical)
        self._by_raw[raw] = page
        return page

    def _time(self, value: object) -> float:
        if not isinstance(value, str):
            return check_timestamp(value)
        when = self._times.get(value)
        if when is None:
            when = check_timestamp(value)
            if len(self._times) < _TIME_CACHE:
                self._times[value] = when
        return when

    def read_all(self) -> PageViewLog:
        with open(self.path, "rb") as handle, _no_cycle_collection():
            pending, size = b"", _FIRST_BLOCK
            while block := handle.read(size):
                data, size = pending + block, BLOCK_BYTES
                cut = data.rfind(b"\n") + 1
                self._block(data[:cut])
                pending = data[cut:]
            if pending:
                self._block(pending + b"\n")
        if self._parts:
            page, ts, views = (np.concatenate(arrays) for arrays in zip(*self._parts, strict=True))
        else:
            page, ts, views = np.zeros(0, np.intp), np.zeros(0), np.zeros(0)
        return PageViewLog(page.astype(np.intp), ts, views, self.urls, self.invalid)

    def _block(self, data: bytes) -> None:
        if self.fmt == "csv" and self._header is not None:
            try:
                if self._columns(data.decode("utf-8").split("\n")[:-1]):
                    return
            except UnicodeDecodeError:
                pass
        self._rows(data)

    def _rows(self, data: bytes) -> None:
        taken = []
        for raw in data.split(b"\n")[:-1]:
            self._line += 1
            row = self._row(raw)  # the feed reader's own: decoding, header, checks, counts
            if row is not None:
                taken.append(row)
        if taken:
            page, ts, views = zip(*taken, strict=True)
            self._add(np.array(page, np.intp), np.array(ts, float), np.array(views, float))

    def _columns(self, lines: list[str]) -> bool:
        """Take CSV lines whole, column by column; ``False`` (nothing taken) when any of them
        needs reading row by row."""
        header = self._header
        if header is None or not set(self.columns) <= set(header):
            return False
        try:
            rows = list(csv.reader(lines))
        except csv.Error:
            return False
        widths = set(map(len, rows))
        if len(rows) != len(lines) or not widths <= {0, len(header)}:
            return False  # a quoted field ran into the next line, or a row is malformed
        if 0 in widths:
            rows = [row for row in rows if row]  # blank lines, skipped as the feed does
        url, ts, clicks = (itemgetter(header.index(name)) for name in self.columns)
        raw = list(map(url, rows))
        known = self._by_raw
        try:
            new = {text: self._canonical(text) for text in dict.fromkeys(raw) if text not in known}
            views = np.fromiter(map(float, map(clicks, rows)), np.float64, len(rows))
            cells = list(map(ts, rows))
            try:
                times = np.fromiter(map(float, cells), np.float64, len(rows))
            except ValueError:  # ISO 8601 times
                times = np.fromiter(map(self._time, cells), np.float64, len(rows))
        except (ValueError, InvalidClickRow):
            return False
        # (The feed's own rule for times, as a range: NaN is outside it.)
        in_range = ((times >= 0) & (times < LATEST_SECONDS)).all()
        if not (in_range and np.isfinite(views).all() and (views >= 0).all()):
            return False
        for text, canonical in new.items():  # every row is good: now the pages exist
            self._register(text, canonical)
        self._line += len(lines)
        self._add(np.fromiter(map(known.__getitem__, raw), np.intp, len(raw)), times, views)
        return True

    def _add(self, page: IntArray, ts: FloatArray, views: FloatArray) -> None:
        self._parts.append((page, ts, views))
        self.rows_read += int(page.size)


def _plain_number(value: object) -> float | None:
    # What the feed takes as a number, without its error path: bool is not a number.
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def read_page_views(path: str | os.PathLike[str], *, fmt: str | None = None) -> PageViewLog:
    """Every usable row of a page-view log; ``fmt`` ``"csv"`` or ``"jsonl"`` (default: from
    the file's suffix). ``FileNotFoundError`` for a missing file, ``ValueError`` for an
    unknown format."""
    reader = _PageViewReader(path, fmt=fmt)
    if not reader.path.is_file():
        raise FileNotFoundError(f"page-view log {str(reader.path)!r} is not a file")
    return reader.read_all()


SITE_LEVELS = ("host", "domain", "folder")
SITE_LEVEL = "host"  # Wang et al. (2008)'s sites are hosts (news.sohu.com)


def folder_of(url: str) -> str:
    """A canonical URL's folder: its host and the first segment of its path when the path
    goes on below it (``news.example/world`` for ``https://news.example/world/a.html``),
    else the host's root (``news.example/`` for ``https://news.example/a.html``); the query
    and the scheme play no part.

    >>> folder_of("https://news.example/world/a.html"), folder_of("http://news.example/a?x=1")
    ('news.example/world', 'news.example/')
    """
    rest = url.split("://", 1)[-1].split("#", 1)[0].split("?", 1)[0]
    host, _, path = rest.partition("/")
    first, slash, _ = path.partition("/")
    return f"{host.lower()}/{first}" if slash and first else f"{host.lower()}/"


def sites_of_pages(urls: list[str], *, level: str = SITE_LEVEL) -> tuple[IntArray, list[str]]:
    """Each page's site index and the sites' names, sites in order of first sight. ``level``:
    ``"host"`` (the URL's host, the paper's site), ``"domain"`` (its registered domain,
    :func:`scrapy_echo.core.identity.site_of`) or ``"folder"`` (:func:`folder_of`, the finer
    level the paper leaves to future work).

    >>> sites_of_pages(["https://news.a.co.uk/x/1", "https://www.a.co.uk/2", "https://news.a.co.uk/3"])
    (array([0, 1, 0]), ['news.a.co.uk', 'www.a.co.uk'])
    >>> sites_of_pages(["https://news.a.co.uk/x/1", "https://www.a.co.uk/2"], level="domain")[1]
    ['a.co.uk']
    """
    if level not in SITE_LEVELS:
        raise ValueError(f"level ({level!r}) must be one of {', '.join(SITE_LEVELS)}")
    by_key: dict[str, int] = {}  # a URL's site depends on its host (and folder) alone
    index: dict[str, int] = {}
    site = np.empty(len(urls), np.intp)
    for i, url in enumerate(urls):
        key = (
            folder_of(url)
            if level == "folder"
            else url.split("/", 3)[2]
            if url.count("/") >= 2
            else url
        )
        number = by_key.get(key)
        if number is None:
            name = site_of(url) if level == "domain" else key
            if level == "host":
                name = urlsplit(url).hostname or key
            number = by_key[key] = index.setdefault(name, len(index))
        site[i] = number
    return site, list(index)
