"""Reading a trace's files: typed CSV rows whose errors name file, line and column, and the
optional files (docs/trace-format.rst). :func:`scrapy_echo.sim.trace.load_trace` uses them."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray

IntArray = NDArray[np.intp]


class TraceError(ValueError):
    """A trace that cannot be loaded; the message names file, line and column."""


def push_out(
    source: IntArray,
    appeared: FloatArray,
    disappeared: FloatArray,
    left_open: NDArray[np.bool_],
    shows: IntArray,
) -> None:
    """Close, in ``disappeared``, the links left open on a hub that shows only its latest
    ``K`` links: when the ``K``-th link after them on that hub appears."""
    limited = shows[source] > 0
    open_ = left_open & limited
    if not open_.any():
        return
    order = np.lexsort((appeared, source))
    src, times = source[order], appeared[order]
    ends = np.searchsorted(src, src, side="right")  # past each link's hub's last link
    later = np.arange(src.size) + shows[src]
    pushed = np.where(
        (later < ends) & limited[order], times[np.minimum(later, src.size - 1)], np.inf
    )
    closed = np.empty_like(disappeared)
    closed[order] = pushed
    disappeared[open_] = closed[open_]


def load_signals(root: Path, index: dict[str, int], duration: float) -> tuple[IntArray, FloatArray]:
    """The optional ``signals.csv``, sorted by time."""
    if find_file(root, "signals", required=False) is None:
        return np.zeros(0, dtype=np.intp), np.zeros(0)
    sources: list[int] = []
    times: list[float] = []
    for row in csv_rows(root, "signals", ("source_id", "ts")):
        sources.append(row.source(index))
        times.append(row.time("ts", duration))
    ts_array = np.array(times, dtype=np.float64)
    order = np.argsort(ts_array, kind="stable")
    return np.array(sources, dtype=np.intp)[order], ts_array[order]


def load_updates(
    root: Path, pages: dict[str, int], created: FloatArray, duration: float
) -> tuple[IntArray, FloatArray]:
    """The optional ``updates.csv``, sorted by page, then time; updates of pages no link
    points to are skipped (nothing to refetch)."""
    if find_file(root, "updates", required=False) is None:
        return np.zeros(0, dtype=np.intp), np.zeros(0)
    page_ids: list[int] = []
    times: list[float] = []
    for row in csv_rows(root, "updates", ("page_url", "ts")):
        page = pages.get(row.text("page_url"))
        ts = row.time("ts", duration)
        if page is None:
            continue
        if ts < created[page]:
            raise row.error("ts", f"{ts!r} is before the page was created ({created[page]!r})")
        page_ids.append(page)
        times.append(ts)
    page_array = np.array(page_ids, dtype=np.intp)
    ts_array = np.array(times, dtype=np.float64)
    order = np.lexsort((ts_array, page_array))
    return page_array[order], ts_array[order]


# -- reading ------------------------------------------------------------------------------
class _Row:
    """One CSV row, with typed getters whose errors name file, line and column."""

    def __init__(self, file: str, line: int, values: dict[str, str]) -> None:
        self.file, self.line, self.values = file, line, values

    def error(self, column: str, message: str) -> TraceError:
        return TraceError(f"{self.file} line {self.line}, column {column!r}: {message}")

    def source(self, index: dict[str, int]) -> int:
        """The row's ``source_id``, as an index into ``sources.csv``."""
        sid = self.text("source_id")
        if sid not in index:
            raise self.error("source_id", f"{sid!r} is not in sources.csv")
        return index[sid]

    def time(self, column: str, duration: float) -> float:
        """A time in ``[0, duration]``."""
        value = self.number(column, low=0.0)
        if value > duration:
            raise self.error(column, f"{value!r} is after the end ({duration!r})")
        return value

    def count(self, column: str) -> int:
        """An optional whole number ``>= 1`` (0 when the column is missing or empty)."""
        raw = (self.values.get(column) or "").strip()
        if not raw:
            return 0
        if not raw.isdigit() or int(raw) < 1:
            raise self.error(column, f"{raw!r} is not a whole number >= 1")
        return int(raw)

    def flag(self, column: str) -> bool:
        """An optional ``0`` or ``1`` (False when the column is missing or empty)."""
        raw = (self.values.get(column) or "").strip()
        if raw not in ("", "0", "1"):
            raise self.error(column, f"{raw!r} is not 0 or 1")
        return raw == "1"

    def text(self, column: str) -> str:
        value = (self.values.get(column) or "").strip()
        if not value:
            raise self.error(column, "is empty")
        return value

    def number(self, column: str, *, low: float, empty: float | None = None) -> float:
        raw = (self.values.get(column) or "").strip()
        if not raw and empty is not None:
            return empty
        try:
            value = float(raw)
        except ValueError:
            raise self.error(column, f"{raw!r} is not a number") from None
        if not math.isfinite(value):
            raise self.error(column, f"{raw!r} is not a finite number")
        if value < low:
            raise self.error(column, f"{value!r} is negative")
        return value


def find_file(root: Path, name: str, *, required: bool = True) -> Path | None:
    plain, packed = root / f"{name}.csv", root / f"{name}.csv.gz"
    if plain.exists() and packed.exists():
        raise TraceError(f"{root}: both {plain.name} and {packed.name}; keep one")
    for candidate in (plain, packed):
        if candidate.exists():
            return candidate
    if required:
        raise TraceError(f"{root}: missing {name}.csv (or {name}.csv.gz)")
    return None


def csv_rows(root: Path, name: str, columns: tuple[str, ...]) -> Iterator[_Row]:
    path = find_file(root, name)
    assert path is not None
    with _open(path) as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in columns if c not in header]
        if missing:
            raise TraceError(f"{path.name} line 1: missing column(s) {', '.join(missing)}")
        for values in reader:
            yield _Row(path.name, reader.line_num, values)


def _open(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def load_meta(root: Path) -> dict[str, Any]:
    path = root / "meta.json"
    if not path.exists():
        raise TraceError(f"{root}: missing meta.json")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise TraceError(f"meta.json line {exc.lineno}: {exc.msg}") from None
    if not isinstance(meta, dict):
        raise TraceError("meta.json: must be a JSON object")
    duration = meta.get("duration")
    if not isinstance(duration, int | float) or not (0 < duration < math.inf):
        raise TraceError(f"meta.json: 'duration' must be a number of seconds > 0, got {duration!r}")
    warmup = meta.get("warmup", 0.0)
    if not isinstance(warmup, int | float) or not (0 <= warmup < duration):
        raise TraceError(f"meta.json: 'warmup' must be in [0, duration), got {warmup!r}")
    known = {"duration", "warmup", "name", "description"}
    return {
        "duration": float(duration),
        "warmup": float(warmup),
        "name": str(meta.get("name", root.name)),
        "description": str(meta.get("description", "")),
        "extra": {k: v for k, v in meta.items() if k not in known},
    }
