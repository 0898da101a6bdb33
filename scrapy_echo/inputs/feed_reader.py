"""Feed files: files another program appends rows to, read as they grow (the readers of the
click, signal and label feeds build on :class:`FeedReader`: :mod:`scrapy_echo.inputs.clickfeed`).

Two formats: JSON Lines (``.jsonl``, ``.ndjson``, ``.json``), an object a line; CSV (``.csv``),
a header naming the columns (any order, other columns ignored), then a row a line.

:class:`FeedReader` returns the complete rows added since its last read, a batch at most
(:data:`BATCH_LINES` lines, about :data:`BATCH_BYTES` bytes): a backlog is read over several
calls (``backlog`` is true while one is waiting), none of which holds the reactor for long, and
the offset moves by the lines parsed, no more. A line still being written (no newline yet)
waits for the next read. When the file is replaced by another (rotation) or truncated,
reading starts again at the top of the new file; one replaced by a copy that holds what was
read (and more) is read on from where reading stopped: files are told apart by what they
hold, never by their inode. A bad row is skipped and counted
by kind in ``invalid``; the first of each kind is logged with the file and line. Nothing is
half-applied: a row is taken whole or not at all. A file missing or unreadable is logged when
it goes (``missing`` stays true meanwhile) and tried at every read.

A saved position (:meth:`FeedReader.state`) names the feed by what it holds, not by its
inode: the offset, the file's first bytes, a digest of the last bytes before the offset, and
digests of the bytes before a few earlier line ends (each twice as far in as the one before).
Restored over a file that holds those bytes there (the same file, a copy on another host, that
copy grown since), reading goes on from the offset. Over a file shorter than the offset that
holds the same bytes as far as it goes (a replica that lags, as replicas do), reading waits
(``behind``, logged once) until it has grown past the offset: read from its top, its rows
would be counted twice. Over any other file, reading starts from its top.

A CSV file is read a line at a time, so quoted fields cannot span lines; an empty cell counts
as a missing value. The reader follows the path, not an open file: rows written to the old
file after the last read but before it was rotated away are not seen.
"""

from __future__ import annotations

import csv
import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO, ClassVar, Generic, TypeVar

logger = logging.getLogger(__name__)

FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}
_HEAD_BYTES = 64
_TAIL_BYTES = 4096  # the bytes before the offset a file must still hold to be read on from it
_DIGEST_SIZE = 16
_FIRST_MARK = 512  # the first line end past this many bytes is the first mark
# A read parses at most this many lines, about this many bytes: some 10,000 rows, a few tenths
# of a second on the reactor.
BATCH_LINES = 10_000
BATCH_BYTES = 1 << 20


class InvalidClickRow(ValueError):
    """A feed row (clicks, or signals: :mod:`scrapy_echo.inputs.signalfeed`) that cannot be used;
    ``kind`` names the problem (a stats key part)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


Row = TypeVar("Row")


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=_DIGEST_SIZE).hexdigest()


def _before(before: bytes, data: bytes, end: int) -> bytes:
    """The bytes (up to ``_TAIL_BYTES``) before position ``end`` of ``data``, which ``before``
    precedes in the file."""
    if end >= _TAIL_BYTES:
        return data[end - _TAIL_BYTES : end]
    return (before + data[:end])[-_TAIL_BYTES:]


def _marks(saved: object, offset: int) -> list[tuple[int, str]]:
    """Saved marks, checked (``ValueError`` if they are not ascending ends up to ``offset``
    with a digest each)."""
    if not isinstance(saved, list):
        raise ValueError("marks are not a list")
    marks: list[tuple[int, str]] = []
    for mark in saved:
        if not (isinstance(mark, list) and len(mark) == 2):
            raise ValueError("a mark is not [end, digest]")
        end, digest = mark
        last = marks[-1][0] if marks else 0
        if not (isinstance(end, int) and last < end <= offset and isinstance(digest, str)):
            raise ValueError("marks out of order")
        if len(bytes.fromhex(digest)) != _DIGEST_SIZE:
            raise ValueError("not a digest")
        marks.append((end, digest))
    return marks


class FeedReader(Generic[Row]):
    """Reads the rows a feed file gained since the last :meth:`read` (subclasses name the
    columns and check a row).

    Parameters
    ----------
    path : str or os.PathLike
        The feed file.
    fmt : str, optional
        ``"jsonl"`` or ``"csv"``; by default from the file's suffix (:data:`FORMATS`).
    batch_lines, batch_bytes : int
        At most this many lines, and about this many bytes (a longer line is read whole), a
        :meth:`read` parses: a backlog is read over several calls, each short enough not to
        hold up the reactor (:attr:`backlog` says another batch is waiting).
    """

    what: ClassVar[str]  # "click", "signal": in messages
    columns: ClassVar[tuple[str, ...]]

    def parse(self, values: Mapping[str, object]) -> Row:
        """One row from its columns' values (``None``: missing); raises
        :class:`InvalidClickRow`."""
        raise NotImplementedError

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fmt: str | None = None,
        batch_lines: int = BATCH_LINES,
        batch_bytes: int = BATCH_BYTES,
    ) -> None:
        self.path = Path(path)
        if fmt is None:
            fmt = FORMATS.get(self.path.suffix.lower())
        if fmt not in ("jsonl", "csv"):
            raise ValueError(
                f"{self.what} feed {str(self.path)!r}: cannot tell its format; name it with one of "
                f"the suffixes {', '.join(FORMATS)} or pass fmt='jsonl' or fmt='csv'"
            )
        if batch_lines < 1 or batch_bytes < 1:
            raise ValueError(
                f"batch_lines ({batch_lines!r}) and batch_bytes ({batch_bytes!r}) must be >= 1"
            )
        self.fmt = fmt
        self.batch_lines = batch_lines
        self.batch_bytes = batch_bytes
        self.invalid: Counter[str] = Counter()
        self._invalid_reported: Counter[str] = Counter()
        self.rows_read = 0
        self.missing = False  # the last read found no file it could read
        self.behind = False  # the last read found a copy still short of the position
        self.backlog = False  # the last read stopped at its batch size, with more to come
        self._offset = 0
        self._line = 0
        # The file read last, (device, inode): on this host another one at the path is a
        # rotation. None before the first read and after a restore, where only the bytes can
        # tell (the inodes of the host that saved the position mean nothing here).
        self._identity: tuple[int, int] | None = None
        self._header: list[str] | None = None
        self._head = b""  # the file's first bytes, to notice it was rewritten
        # A digest of the bytes before the offset (up to _TAIL_BYTES).
        self._tail = _digest(b"")
        # Earlier line ends, each at least twice as far in as the one before, with a digest of
        # the bytes before each: a copy shorter than the offset is told from another file by
        # the ones it reaches.
        self._marks: list[tuple[int, str]] = []

    def read(self) -> list[Row]:
        """The complete rows the file gained since the last read, a batch at most
        (``batch_lines``, ``batch_bytes``); :attr:`backlog` is then true."""
        self.backlog = False
        try:
            with open(self.path, "rb") as handle:
                unread = self._unread(handle)
        except OSError as exc:  # missing, or unreadable (permissions, a directory, EIO)
            self._unavailable(exc)
            return []
        if self.missing:
            self.missing = False
            logger.info("%s feed %s can be read again", self.what.capitalize(), self.path)
        if unread is None:
            return []  # a copy still short of what was read: nothing new in it yet
        before, data = unread
        lines = data.split(b"\n")[:-1]  # a last line without its newline is not done yet
        if len(lines) > self.batch_lines:
            del lines[self.batch_lines :]
            self.backlog = True
        rows = []
        taken = 0  # the bytes of ``data`` parsed
        next_mark = max(_FIRST_MARK, 2 * self._marks[-1][0]) if self._marks else _FIRST_MARK
        for raw in lines:
            self._line += 1
            row = self._row(raw)
            if row is not None:
                rows.append(row)
            taken += len(raw) + 1
            if self._offset + taken >= next_mark:
                next_mark = 2 * (self._offset + taken)
                self._marks.append((self._offset + taken, _digest(_before(before, data, taken))))
        if len(self._head) < _HEAD_BYTES and taken:
            self._head = (self._head + data[: min(taken, _HEAD_BYTES)])[:_HEAD_BYTES]
        self._tail = _digest(_before(before, data, taken))
        self._offset += taken
        self.rows_read += len(rows)
        return rows

    def _unread(self, handle: BinaryIO) -> tuple[bytes, bytes] | None:
        """The last bytes read already (up to ``_TAIL_BYTES``), and a batch of the bytes after
        them; from the top of the file if it no longer holds what was read; ``None`` for a copy
        of what was read still short of the offset."""
        stat = os.fstat(handle.fileno())
        identity = (stat.st_dev, stat.st_ino)
        restored = self._identity is None
        if restored and stat.st_size < self._offset and self._is_short_copy(handle, stat.st_size):
            # A copy on another host (replicas lag) holds the rows counted so far only in part:
            # read from its top, they would be counted twice.
            if not self.behind:
                logger.info(
                    "%s feed %s holds %d bytes, fewer than the %d read from the copy its "
                    "position was saved on, and the same ones: a copy still catching up; its "
                    "rows are read once it has grown past that point",
                    self.what.capitalize(),
                    self.path,
                    stat.st_size,
                    self._offset,
                )
            self.behind = True
            return None
        self.behind = False
        # Whether this is the feed read so far is told by what it holds, not by its inode: a
        # copy moved over it (rsync without --inplace, ``cp tmp && mv``, an exporter that
        # writes atomically) holds the same bytes and goes on from the offset; a rotated or
        # rewritten file does not, and is read from its top.
        held = True
        if self._head:
            # A file truncated and refilled past the offset keeps its size: its first bytes,
            # and the last ones before the offset, tell it apart.
            handle.seek(0)
            held = handle.read(len(self._head)) == self._head
        behind = min(self._offset, _TAIL_BYTES)
        handle.seek(self._offset - behind)
        before = handle.read(behind)
        if held and len(before) == behind and self._tail == _digest(before):
            self._identity = identity
            return before, self._batch(handle)
        if self._identity is not None or self._offset:
            logger.info(
                "%s feed %s does not hold what was read from it (rotated, truncated, or another "
                "file than the saved position's); reading it from the top",
                self.what.capitalize(),
                self.path,
            )
        self._start_over()
        self._identity = identity
        handle.seek(0)
        return b"", self._batch(handle)

    def _is_short_copy(self, handle: BinaryIO, size: int) -> bool:
        """Whether a file of ``size`` bytes, fewer than the offset, holds what was read as far
        as it goes: the same first bytes, and the same bytes before each mark it reaches. (A
        file cut back to part of what was read, or rewritten alike up to there, passes too,
        and is read from its top once it has grown past the offset.)"""
        handle.seek(0)
        if handle.read(min(size, len(self._head))) != self._head[:size]:
            return False
        for end, digest in self._marks:
            if end > size:
                break
            start = max(0, end - _TAIL_BYTES)
            handle.seek(start)
            if _digest(handle.read(end - start)) != digest:
                return False
        return True

    def _batch(self, handle: BinaryIO) -> bytes:
        """The next ``batch_bytes`` bytes, or up to the end of a line longer than that (a
        batch that stopped inside it would never get past it); sets :attr:`backlog` when the
        file may hold more."""
        chunks = [handle.read(self.batch_bytes)]
        while len(chunks[-1]) == self.batch_bytes and b"\n" not in chunks[-1]:
            chunks.append(handle.read(self.batch_bytes))
        self.backlog = len(chunks[-1]) == self.batch_bytes
        return b"".join(chunks)

    def _unavailable(self, exc: OSError) -> None:
        self.behind = False
        if not self.missing:
            logger.warning(
                "%s feed %s cannot be read (%s): no %s rows are taken until it can; it is tried "
                "again at every read, from where reading stopped",
                self.what.capitalize(),
                self.path,
                exc.strerror or exc,
                self.what,
            )
        self.missing = True

    def new_invalid(self) -> Counter[str]:
        """The bad rows by kind skipped since the last call (for stats: the reader logs the
        first of each kind itself)."""
        new = self.invalid - self._invalid_reported
        self._invalid_reported = self.invalid.copy()
        return new

    def state(self) -> dict[str, object]:
        """Where reading stands, as JSON-able data for :meth:`restore`: the offset, and what
        the file holds before it, which any host can check."""
        return {
            "kind": self.what,
            "offset": self._offset,
            "line": self._line,
            "header": self._header,
            "head": self._head.hex(),
            "tail": self._tail,
            "marks": [[end, digest] for end, digest in self._marks],
        }

    def restore(self, state: Mapping[str, object]) -> None:
        """Resume from :meth:`state`, checked at the next read: a file that holds the same
        bytes before the offset (the same file, or a copy, grown or not) is read on from it;
        a copy that holds them only in part (shorter, the same bytes as far as it goes) is
        waited for until it has grown past the offset; any other file is read from its
        start."""
        if not isinstance(state, Mapping):
            state = {"damaged": state}
        offset, line, tail = state.get("offset"), state.get("line"), state.get("tail")
        head, header = state.get("head", ""), state.get("header")
        try:
            if not (
                isinstance(offset, int)
                and isinstance(line, int)
                and offset >= 0
                and line >= 0
                and isinstance(head, str)
                and (header is None or isinstance(header, list))
                and isinstance(tail, str)
            ):
                raise ValueError("unexpected shape")
            head_bytes = bytes.fromhex(head)
            if len(bytes.fromhex(tail)) != _DIGEST_SIZE:
                raise ValueError("not a digest")
            marks = _marks(state.get("marks", []), offset)
        except ValueError:
            # A damaged saved state must not stop the crawl; the file is read again instead.
            logger.warning(
                "%s feed %s: saved position %r unusable; reading from the top",
                self.what.capitalize(),
                self.path,
                dict(state),
            )
            self.rewind()
            return
        # The bytes decide (the same file or a copy of it, on any host), not its inode.
        self._identity = None
        self._tail = tail
        self._offset, self._line, self._head = offset, line, head_bytes
        self._header = [str(name) for name in header] if header is not None else None
        self._marks = marks
        self.behind = False

    def rewind(self) -> None:
        """Read the file from its top next time (a restored crawl state counted none of it)."""
        self._start_over()
        self._identity = None
        self.behind = False

    def _start_over(self) -> None:
        self._offset = 0
        self._line = 0
        self._header = None
        self._head = b""
        self._tail = _digest(b"")
        self._marks = []

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
