"""Click feeds: files another program appends click rows to, read as they grow.

Two formats, with the same columns:

- JSON Lines (``.jsonl``, ``.ndjson``, ``.json``): ``{"url": ..., "ts": ..., "clicks": ...}``
  a line;
- CSV (``.csv``): a header naming ``url``, ``ts`` and ``clicks`` (any order, other columns
  ignored), then a row a line.

``ts`` is epoch seconds or an ISO 8601 time (naive means UTC); ``clicks`` a finite number
``>= 0``; ``url`` an absolute http(s) URL, canonicalised so it matches the crawler's links.

:class:`ClickFeedReader` returns the complete rows added since its last read. A line still
being written (no newline yet) waits for the next read. When the file is replaced (rotation:
another file at the path) or truncated, reading starts again at the top of the new file. A bad
row is skipped and counted by kind in ``invalid``; the first of each kind is logged with the
file and line. Nothing is half-applied: a row is taken whole or not at all.

In JSON Lines ``ts`` and ``clicks`` may also be numeric strings, as in CSV. A CSV file is read a
line at a time, so quoted fields cannot span lines; an empty cell counts as a missing value.
The reader follows the path, not an open file: rows written to the old file after the last
read but before it was rotated away are not seen.

>>> parse_click("https://Example.com/a?b=1&a=2", "1970-01-01T00:01:00Z", 3)
ClickRow(url='https://example.com/a?a=2&b=1', ts=60.0, clicks=3.0)
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Generic, TypeVar
from urllib.parse import urlsplit

from scrapy_echo.published import parse_time
from scrapy_echo.urls import canonical_url

logger = logging.getLogger(__name__)

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}
_COLUMNS = ("url", "ts", "clicks")
_HEAD_BYTES = 64


class InvalidClickRow(ValueError):
    """A feed row (clicks, or signals: :mod:`scrapy_echo.signalfeed`) that cannot be used;
    ``kind`` names the problem (a stats key part)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


Row = TypeVar("Row")


@dataclass(frozen=True)
class ClickRow:
    url: str  # canonical
    ts: float  # epoch seconds
    clicks: float


def parse_click(url: object, ts: object, clicks: object) -> ClickRow:
    """Check one row's values; raises :class:`InvalidClickRow`."""
    if url is None or ts is None or clicks is None:
        missing = [n for n, v in zip(_COLUMNS, (url, ts, clicks), strict=True) if v is None]
        raise InvalidClickRow("missing_field", f"missing {', '.join(missing)}")
    return ClickRow(check_url(url), check_timestamp(ts), _clicks(clicks))


def check_url(url: object) -> str:
    """``url`` canonicalised, if it is an absolute http(s) URL; else :class:`InvalidClickRow`."""
    if not isinstance(url, str):
        raise InvalidClickRow("bad_url", f"url {url!r} is not a string")
    url = url.strip()
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if parts.scheme.lower() not in ("http", "https") or not host:
            raise ValueError("not an absolute http(s) URL")
        if any(c.isspace() or not c.isprintable() for c in host):
            raise ValueError("bad host name")
        canonical = canonical_url(url)
    # w3lib raises whatever the URL parsing underneath it raises; a feed row must not stop
    # the reader, so any failure here is just a bad URL.
    except Exception as exc:
        raise InvalidClickRow("bad_url", f"url {url!r}: {exc}") from None
    return canonical


def check_timestamp(value: object) -> float:
    """Epoch seconds from a number or an ISO 8601 time; else :class:`InvalidClickRow`."""
    number = _number(value)
    if number is None and isinstance(value, str):
        # Every offset form (Z, +00:00, +0000) on every Python (scrapy_echo.published).
        number = parse_time(value)
    if number is None or not math.isfinite(number):
        raise InvalidClickRow("bad_ts", f"ts {value!r} is not epoch seconds or ISO 8601")
    return number


def _clicks(value: object) -> float:
    number = _number(value)
    if number is None or not math.isfinite(number) or number < 0:
        raise InvalidClickRow("bad_clicks", f"clicks {value!r} is not a finite number >= 0")
    return number


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if not isinstance(value, (int, float, str)):
        return None
    try:
        return float(value)
    except (ValueError, OverflowError):  # OverflowError: a JSON integer beyond float range
        return None


class FeedReader(Generic[Row]):
    """Reads the rows a feed file gained since the last :meth:`read` (subclasses name the
    columns and check a row)."""

    what: ClassVar[str]  # "click", "signal": in messages
    columns: ClassVar[tuple[str, ...]]

    def parse(self, values: Mapping[str, object]) -> Row:
        """One row from its columns' values (``None``: missing); raises
        :class:`InvalidClickRow`."""
        raise NotImplementedError

    def __init__(self, path: str | os.PathLike[str], *, fmt: str | None = None) -> None:
        self.path = Path(path)
        if fmt is None:
            fmt = FORMATS.get(self.path.suffix.lower())
        if fmt not in ("jsonl", "csv"):
            raise ValueError(
                f"{self.what} feed {str(self.path)!r}: cannot tell its format; name it with one of "
                f"the suffixes {', '.join(FORMATS)} or pass fmt='jsonl' or fmt='csv'"
            )
        self.fmt = fmt
        self.invalid: Counter[str] = Counter()
        self._invalid_reported: Counter[str] = Counter()
        self.rows_read = 0
        self._offset = 0
        self._line = 0
        self._identity: tuple[int, int] | None = None  # (device, inode) being read
        self._header: list[str] | None = None
        self._head = b""  # the file's first bytes, to notice it was rewritten

    def read(self) -> list[Row]:
        try:
            with open(self.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                replaced = (stat.st_dev, stat.st_ino) != self._identity
                # A file truncated and refilled past our offset between two reads keeps its
                # size; its first bytes tell it apart.
                if (
                    replaced
                    or stat.st_size < self._offset
                    or handle.read(len(self._head)) != self._head
                ):
                    self._start_over((stat.st_dev, stat.st_ino))
                handle.seek(self._offset)
                data = handle.read()
        except FileNotFoundError:
            return []
        complete = data.rfind(b"\n") + 1  # a last line without its newline is not done yet
        rows = []
        for raw in data[:complete].split(b"\n")[:-1]:
            self._line += 1
            row = self._row(raw)
            if row is not None:
                rows.append(row)
        if len(self._head) < _HEAD_BYTES and complete:
            self._head = (self._head + data[:complete])[:_HEAD_BYTES]
        self._offset += complete
        self.rows_read += len(rows)
        return rows

    def new_invalid(self) -> Counter[str]:
        """The bad rows by kind skipped since the last call (for stats: the reader logs the
        first of each kind itself)."""
        new = self.invalid - self._invalid_reported
        self._invalid_reported = self.invalid.copy()
        return new

    def state(self) -> dict[str, object]:
        """Where reading stands, as JSON-able data for :meth:`restore`."""
        return {
            "offset": self._offset,
            "line": self._line,
            "identity": list(self._identity) if self._identity else None,
            "header": self._header,
            "head": self._head.hex(),
        }

    def restore(self, state: Mapping[str, object]) -> None:
        """Resume from :meth:`state`; a file replaced since is read from its start."""
        identity, offset, line = state.get("identity"), state.get("offset"), state.get("line")
        head, header = state.get("head", ""), state.get("header")
        try:
            if not (
                isinstance(identity, list)
                and len(identity) == 2
                and all(isinstance(n, int) for n in identity)
                and isinstance(offset, int)
                and isinstance(line, int)
                and offset >= 0
                and line >= 0
                and isinstance(head, str)
                and (header is None or isinstance(header, list))
            ):
                raise ValueError("unexpected shape")
            head_bytes = bytes.fromhex(head)
        except ValueError:
            # A damaged saved state must not stop the crawl; the file is read again instead.
            logger.warning(
                "%s feed %s: saved position %r unusable; reading from the top",
                self.what.capitalize(),
                self.path,
                dict(state),
            )
            return
        self._identity = (identity[0], identity[1])
        self._offset, self._line, self._head = offset, line, head_bytes
        self._header = [str(name) for name in header] if header is not None else None

    def _start_over(self, identity: tuple[int, int]) -> None:
        if self._identity is not None:
            logger.info(
                "%s feed %s was rotated or truncated; reading it from the top",
                self.what.capitalize(),
                self.path,
            )
        self._identity = identity
        self._offset = 0
        self._line = 0
        self._header = None
        self._head = b""

    def _row(self, raw: bytes) -> Row | None:
        try:
            text = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            self._skip("encoding", "not UTF-8")
            return None
        if self._line == 1:
            text = text.lstrip("\ufeff")  # spreadsheet programs start files with a BOM
        if not text:
            return None
        try:
            if self.fmt == "jsonl":
                return self._json_row(text)
            return self._csv_row(text)
        except InvalidClickRow as exc:
            self._skip(exc.kind, str(exc))
            return None

    def _json_row(self, text: str) -> Row:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
            raise InvalidClickRow("json", f"not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise InvalidClickRow("not_object", "not a JSON object")
        return self.parse({name: value.get(name) for name in self.columns})

    def _csv_row(self, text: str) -> Row | None:
        """The row, or ``None`` for the header line."""
        try:
            fields = next(csv.reader([text]))
        except csv.Error as exc:  # e.g. a field beyond csv's size limit
            raise InvalidClickRow("csv_columns", f"unreadable CSV line ({exc})") from None
        if self._header is None:
            self._header = [name.strip().lower() for name in fields]
            return None
        if not set(self.columns) <= set(self._header):
            needed = ", ".join(self.columns)
            raise InvalidClickRow("csv_columns", f"header {self._header} lacks {needed}")
        if len(fields) != len(self._header):
            raise InvalidClickRow(
                "csv_columns", f"{len(fields)} fields, header has {len(self._header)}"
            )
        # An empty cell is a missing value, not a malformed one.
        row = {
            name: value.strip() or None for name, value in zip(self._header, fields, strict=True)
        }
        return self.parse(row)

    def _skip(self, kind: str, message: str) -> None:
        if not self.invalid[kind]:
            logger.warning(
                "Bad %s row skipped (%s, line %d): %s; further %r rows are only counted",
                self.what,
                self.path,
                self._line,
                message,
                kind,
            )
        self.invalid[kind] += 1


class ClickFeedReader(FeedReader[ClickRow]):
    """Reads the click rows a click feed file gained since the last :meth:`read`."""

    what = "click"
    columns = _COLUMNS

    def parse(self, values: Mapping[str, object]) -> ClickRow:
        return parse_click(values.get("url"), values.get("ts"), values.get("clicks"))
