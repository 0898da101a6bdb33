"""The one-process dupefilter's fingerprints in ``JOBDIR``, so that a restart keeps the same
window: ``echo-requests-seen.txt``.

A header line (``echo-requests-seen 1``), then one line per fingerprint let through, in that
order: its hex and the time it was let through (``<hex> <epoch seconds>``). Text, appended
to, never rewritten in place. Lines are in time order, so the ones whose time to live is over
are a prefix of the file: a restart finds the first live line by bisection and reads from
there, and when the file holds more than twice the lines still live (and
:data:`COMPACT_ABOVE` at least) it is compacted, the expired prefix dropped, by a copy of the
rest to a new file renamed over the old one (a crash leaves one or the other whole).

The file follows the checkpoints (:mod:`scrapy_echo.crawler.jobdir`): the lines of the
requests let through before a checkpoint's capture are appended once that checkpoint is on
disk, by its writer thread. The plain lane is saved only in checkpoints, so a fingerprint on
disk without its request in one would lose that request for a time to live after a crash; the
other way round, a crash between a checkpoint and its lines costs a request fetched twice.

A last line cut short by a crash is cut off at the next start; a damaged line is skipped,
counted and logged once. A file with another header (another format) is moved aside, as an
unreadable checkpoint is, and the window starts empty.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from scrapy_echo.crawler.jobdir import write_atomically

logger = logging.getLogger(__name__)

FILE_NAME = "echo-requests-seen.txt"
HEADER = b"echo-requests-seen 1\n"
# Fewer lines than this are never worth a compaction (a rewrite each checkpoint of a small file).
COMPACT_ABOVE = 10_000
_COPY_BLOCK = 1 << 20


class UnknownFormat(ValueError):
    """The file's header is not one this build writes."""


@dataclass
class Loaded:
    """What a restart read: the live entries, in order, and the damaged lines skipped."""

    entries: list[tuple[bytes, float]]
    damaged: int = 0


class SeenRequestsFile:
    """The file at ``path``; entries are numbered as :class:`SeenRequests` numbers them, and
    ``written`` is the number of the first one not on disk yet."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written = 0
        self.lines = 0  # fingerprint lines in the file, live or not
        self.compactions = 0

    def load(self, cutoff: float) -> Loaded:
        """The entries let through after ``cutoff``; ``UnknownFormat`` for a file of another
        format. A last line cut short is cut off the file."""
        if not self.path.exists():
            return Loaded([])
        with open(self.path, "r+b") as handle:
            if handle.readline() != HEADER:
                raise UnknownFormat(f"{self.path} is not a file of requests seen, version 1")
            start = handle.tell()
            end = _cut_torn_tail(handle, start)
            self.lines = _count_lines(handle, start, end)
            handle.seek(_first_live(handle, start, end, cutoff))
            loaded = Loaded([])
            for line in handle:
                entry = _parse(line)
                if entry is None:
                    loaded.damaged += 1
                elif entry[1] > cutoff:  # (a line the bisection took as live, damaged)
                    loaded.entries.append(entry)
        return loaded

    def set_aside(self, suffix: str) -> Path:
        aside = self.path.with_name(self.path.name + suffix)
        os.replace(self.path, aside)
        return aside

    def append(
        self, first: int, entries: list[tuple[bytes, float]], live: int, cutoff: float
    ) -> None:
        """Write ``entries`` (numbered from ``first``; those on disk already skipped), then
        compact the file if it holds more than twice the ``live`` lines. On the checkpoint's
        writer thread; an ``OSError`` leaves ``written`` where it was, for the next try."""
        skip = max(0, self.written - first)
        fresh = entries[skip:]
        if fresh:
            if not self.path.exists():
                self.path.parent.mkdir(parents=True, exist_ok=True)
                write_atomically(self.path, HEADER)
                self.lines = 0
            text = b"".join(b"%s %r\n" % (fp.hex().encode(), stamp) for fp, stamp in fresh)
            with open(self.path, "ab") as handle:
                handle.write(text)
            self.lines += len(fresh)
        self.written = max(self.written, first + len(entries))
        if self.lines > max(2 * live, COMPACT_ABOVE):
            self.compact(cutoff)

    def compact(self, cutoff: float) -> None:
        """Drop the lines let through at or before ``cutoff``."""
        kept = 0

        def rest() -> Iterator[str]:
            nonlocal kept
            with open(self.path, "rb") as handle:
                handle.readline()
                start = handle.tell()
                handle.seek(_first_live(handle, start, os.fstat(handle.fileno()).st_size, cutoff))
                yield HEADER.decode("ascii")
                while block := handle.read(_COPY_BLOCK):
                    kept += block.count(b"\n")
                    yield block.decode("ascii", errors="replace")

        write_atomically(self.path, rest())
        self.lines = kept
        self.compactions += 1


def _parse(line: bytes) -> tuple[bytes, float] | None:
    hexed, _, stamp = line.partition(b" ")
    try:
        fingerprint, when = bytes.fromhex(hexed.decode("ascii")), float(stamp)
    except ValueError:  # (UnicodeDecodeError is one)
        return None
    return (fingerprint, when) if fingerprint and math.isfinite(when) else None


def _cut_torn_tail(handle: BinaryIO, start: int) -> int:
    """Cut the file after its last newline (a line a crash cut short); its new size."""
    end = handle.seek(0, os.SEEK_END)
    at = end
    while at > start:
        step = min(_COPY_BLOCK, at - start)
        handle.seek(at - step)
        block = handle.read(step)
        newline = block.rfind(b"\n")
        if newline >= 0:
            at = at - step + newline + 1
            break
        at -= step
    if at != end:
        handle.truncate(at)
        logger.warning("%s: a last line cut short (a crash) was cut off", handle.name)
    return at


def _count_lines(handle: BinaryIO, start: int, end: int) -> int:
    handle.seek(start)
    count = 0
    while block := handle.read(min(_COPY_BLOCK, end - handle.tell())):
        count += block.count(b"\n")
    return count


def _first_live(handle: BinaryIO, start: int, end: int, cutoff: float) -> int:
    """Where the first line let through after ``cutoff`` starts (``end``: none), by bisection
    over the file's bytes (lines are in time order; a damaged one counts as live)."""
    low, high = start, end
    while low < high:
        middle = (low + high) // 2
        _, line = _line_from(handle, middle, start)
        entry = _parse(line) if line else None
        if not line or entry is None or entry[1] > cutoff:
            high = middle
        else:
            low = middle + 1
    at, _ = _line_from(handle, low, start)
    return at


def _line_from(handle: BinaryIO, offset: int, start: int) -> tuple[int, bytes]:
    """The first line starting at or after ``offset``, and where it starts."""
    if offset <= start:
        handle.seek(start)
    else:
        handle.seek(offset - 1)
        handle.readline()  # (the rest of the line holding offset - 1: just "\n" if it ends there)
    at = handle.tell()
    return at, handle.readline()
