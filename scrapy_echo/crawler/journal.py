"""A journal of what the crawl observed since its last ``JOBDIR`` checkpoint, so that a
``kill -9`` loses about a second of the crawl, not a checkpoint period.

Checkpoints (:mod:`scrapy_echo.crawler.jobdir`) come every ``ECHO_CHECKPOINT_INTERVAL``, a
minute by default. Alone, a crash loses what was found and fetched since the last one, and the
restart fetches those pages again: duplicate items in the user's pipeline. So every event the
crawl applies (:mod:`scrapy_echo.core.events`: a source crawl and the links it showed, a 304, a
failure, a page fetched, a source added or removed) is appended here too, as one line of its
JSON form (:func:`~scrapy_echo.core.events.to_json`), to ``echo-journal-<n>.jsonl`` in
``JOBDIR``. The reactor encodes the line and lists it; a thread writes the list, flushes and
syncs it every ``ECHO_JOURNAL_INTERVAL`` seconds (sooner when many lines wait).

Segments follow checkpoints. Each checkpoint starts a new segment and names it in its snapshot
(``journal``); once that checkpoint is on disk the older segments are deleted, so the journal
holds one checkpoint period at most. At start the checkpoint is restored, then the events of
the segment it names and of the later ones are applied again, through the core's one door
(:meth:`CrawlCore.replay <scrapy_echo.core.crawl.CrawlCore.replay>`); with no checkpoint yet,
every segment is replayed on an empty state. A restarted crawl writes a new segment, never
one it replayed.

A record cut short by the kill (a last line without its newline), or damaged, is skipped,
counted (``echo/journal/skipped/<why>``) and logged, never raised. Click and signal rows are
not journaled: their feeds are read again from the position the checkpoint saved.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import threading
from collections import Counter, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy_echo.core.events import (
    ClicksArrived,
    Event,
    PageFetched,
    SignalsArrived,
    SourceBlocked,
    SourceFailed,
    SourceFetched,
    SourceNotModified,
    from_json,
    to_json,
)

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from scrapy_echo.core.crawl import CrawlCore
    from scrapy_echo.core.view import CrawlView

logger = logging.getLogger(__name__)

_SEGMENT = re.compile(r"echo-journal-(\d+)\.jsonl")
# A list this long goes to the writer at once, before the interval is up: a burst (a sitemap
# of thousands of links) is neither held long nor written in one huge piece.
_EARLY_BATCH = 1000
# Records held while the disk refuses them (a full disk); past this the oldest are let go,
# counted: a crash then fetches their pages again, as it would without a journal.
_MAX_HELD = 200_000

# The events that end a source's crawl.
_SOURCE_OUTCOMES = (SourceFetched, SourceNotModified, SourceFailed, SourceBlocked)

Batch = list[tuple[int, str]]  # (segment, an event's line), in the order they were applied


def segment_name(number: int) -> str:
    return f"echo-journal-{number}.jsonl"


@dataclass
class Replayed:
    """What a replay did: events applied, records skipped by why (``torn``, ``damaged``,
    ``refused``, ``unreadable``), and the URLs of the sources whose crawl ended and of the
    pages fetched again (a request the checkpoint saved in flight for one of them is done)."""

    events: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    finished: set[str] = field(default_factory=set)


class Journal:
    """The journal in ``directory`` (a crawl's ``JOBDIR``). Not ``recording``
    (``ECHO_JOURNAL_INTERVAL = 0``), it still replays what an earlier run wrote, and its
    checkpoints delete it, but it writes nothing."""

    def __init__(
        self, directory: Path, stats: StatsCollector | None = None, *, recording: bool = True
    ) -> None:
        self.directory = directory
        self.stats = stats
        self.recording = recording
        self.segment = 0  # where new records go: set by replay, moved on by each checkpoint
        self._pending: Batch = []  # the reactor's, until a flush hands it over
        self._queued: deque[Batch] = deque()  # handed over, for the writer, oldest first
        self._held = 0  # records in _queued
        self._queue_lock = threading.Lock()  # _queued and _held: the reactor adds, the writer takes
        self._file_lock = threading.Lock()  # one writer or deleter of the files at a time
        self._draining = False  # a thread is writing: the next waits its turn (order)
        self._covered = 0  # the segments below this are in a checkpoint on disk
        self._fd: int | None = None
        self._fd_segment = -1
        self._size = 0  # the open segment's length up to its last whole batch
        # Counted by the writer, put in the stats on the reactor.
        self.records = self.syncs = self.bytes = self.dropped = 0
        self.failed_writes = 0
        self._failure_logged = False

    # -- writing ---------------------------------------------------------------------------
    def record(self, event: Event) -> None:
        """Journal ``event``, just applied (on the reactor: encoded and listed here)."""
        if isinstance(event, (ClicksArrived, SignalsArrived)):
            return  # (their feeds are read again from the checkpoint's position)
        # Encoded now, and the event let go: held for the writer as an event, its objects would
        # live long enough to be promoted, and bring the collector's full passes over the whole
        # crawl state sooner (60 ms stalls at 1000 events/s in benchmarks/bench_journal.py);
        # a line of text is no work for the collector. (About 4 us for a page fetched, 24 us
        # for a hub crawl of 40 links: a tenth of what applying it takes.)
        line = json.dumps(to_json(event), separators=(",", ":"))
        self._pending.append((self.segment, line))
        if len(self._pending) >= _EARLY_BATCH:
            self.flush()

    def rotate(self) -> int:
        """A checkpoint is captured now: what comes next goes to a new segment, whose number
        the checkpoint keeps (on the reactor, in the same step as the capture)."""
        self.segment += 1
        return self.segment

    def flush(self) -> Deferred[None] | None:
        """Hand what was recorded to a thread that appends, flushes and syncs it; that work,
        if it started (one at a time, so that batches reach the file in order; a failure is
        logged and counted, and the batch tried again next time)."""
        self._hand_over()
        if self._draining or not self._queued:
            return None
        from twisted.internet.threads import deferToThread  # (no reactor at import time)

        self._draining = True
        drained: Deferred[None] = deferToThread(self._drain)
        drained.addCallbacks(self._drained, self._drain_failed)
        return drained

    def flush_now(self) -> None:
        """Write what was recorded before returning (at close)."""
        self._hand_over()
        try:
            self._drain()
        except OSError as exc:
            self._failed(exc)
        self._publish()

    def close(self) -> None:
        with self._file_lock:
            self._close_file()

    def checkpointed(self, first: int) -> None:
        """A checkpoint naming segment ``first`` is on disk: the older segments are in it, and
        go (on the checkpoint's thread, or at close)."""
        with self._file_lock:
            if first <= self._covered:
                return
            self._covered = first
            if self._fd_segment < first:
                self._close_file()
            for number in self.segments():
                if number >= first:
                    continue
                try:
                    (self.directory / segment_name(number)).unlink(missing_ok=True)
                except OSError as exc:  # (the next checkpoint, or the restart, tries again)
                    logger.warning("ECHO journal segment %d not deleted: %s", number, exc)

    def segments(self) -> list[int]:
        """The numbers of the segments on disk, in order."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return sorted(int(m.group(1)) for m in map(_SEGMENT.fullmatch, names) if m is not None)

    def _hand_over(self) -> None:
        if self._pending:
            with self._queue_lock:
                self._queued.append(self._pending)
                self._held += len(self._pending)
            self._pending = []

    def _drain(self) -> None:
        """Write the batches handed over, oldest first; raise at the first that fails (it
        stays first, written again next time)."""
        with self._file_lock:
            while True:
                with self._queue_lock:
                    if not self._queued:
                        return
                    batch = self._queued[0]
                try:
                    self._write(batch)
                except OSError:
                    self._let_go_beyond_limit()
                    raise
                with self._queue_lock:
                    self._queued.popleft()
                    self._held -= len(batch)

    def _write(self, batch: Batch) -> None:
        """Append ``batch`` and sync it; a segment at a time, each written is taken out of
        the batch (a failure in the next one does not write it twice)."""
        for segment, group in itertools.groupby(list(batch), key=lambda record: record[0]):
            lines = [line for _, line in group]
            if segment >= self._covered:  # (else in a checkpoint on disk already)
                lines.append("")
                data = "\n".join(lines).encode()
                lines.pop()
                fd = self._open(segment)
                try:
                    _write_all(fd, data)
                    os.fsync(fd)
                except OSError:
                    self._abandon_file()
                    raise
                self._size += len(data)
                self.records += len(lines)
                self.bytes += len(data)
                self.syncs += 1
            del batch[: len(lines)]
            with self._queue_lock:
                self._held -= len(lines)

    def _open(self, segment: int) -> int:
        if self._fd is not None and self._fd_segment == segment:
            return self._fd
        self._close_file()
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(
            self.directory / segment_name(segment), os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o666
        )
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                os.write(fd, b"\n")  # a record cut short by a failed write: a line of its own
                size += 1
            if not size:  # a new file: its name must reach the disk too
                _sync_directory(self.directory)
        except OSError:
            os.close(fd)
            raise
        self._fd, self._fd_segment, self._size = fd, segment, size
        return fd

    def _abandon_file(self) -> None:
        """After a failed write: cut what it left, if the disk lets us, and close the file."""
        if self._fd is not None:
            # (If it cannot, the file gets a newline when reopened: see _open.)
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
        self._close_file()

    def _close_file(self) -> None:
        if self._fd is not None:
            fd, self._fd, self._fd_segment = self._fd, None, -1
            os.close(fd)

    def _let_go_beyond_limit(self) -> None:
        with self._queue_lock:
            while self._held > _MAX_HELD and len(self._queued) > 1:
                oldest = self._queued.popleft()
                self._held -= len(oldest)
                self.dropped += len(oldest)

    def _drained(self, _: object) -> None:
        self._draining = False
        if self._failure_logged:
            self._failure_logged = False
            logger.info("ECHO journal written again to %s", self.directory)
        self._publish()

    def _drain_failed(self, failure: Failure) -> None:
        self._draining = False
        self._failed(failure.getErrorMessage())
        self._publish()

    def _failed(self, why: object) -> None:
        # A full disk must not stop a monitor: the records wait, and the next flush tries
        # again; meanwhile a crash loses them, as it would without a journal.
        self.failed_writes += 1
        if not self._failure_logged:
            self._failure_logged = True
            logger.error("ECHO journal in %s cannot be written (%s); trying again, "
                         "further failures only counted", self.directory, why)  # fmt: skip

    def _publish(self) -> None:
        stats = self.stats
        if stats is None:
            return
        for name in ("records", "syncs", "bytes", "failed_writes", "dropped"):
            value = getattr(self, name)
            if value:
                stats.set_value(f"echo/journal/{name}", value)

    # -- replaying -------------------------------------------------------------------------
    def replay(self, core: CrawlCore, first: int) -> Replayed:
        """Apply the events of segment ``first`` and of the later ones to ``core``, just
        restored from the checkpoint that names ``first`` (0: no checkpoint), and delete the
        older segments (a crash came between their checkpoint and their deletion). New
        records go to a segment after all of these."""
        replayed = Replayed()
        present = self.segments()
        for number in present:
            path = self.directory / segment_name(number)
            if number < first:
                path.unlink(missing_ok=True)
            else:
                self._replay_segment(path, core, replayed)
        if replayed.events:
            core.replayed()
        self.segment = max([first - 1, *present]) + 1
        self._covered = first
        self._report(replayed)
        return replayed

    def _replay_segment(self, path: Path, core: CrawlCore, replayed: Replayed) -> None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            replayed.skipped["unreadable"] += 1
            logger.error("ECHO journal segment %s unreadable, not replayed: %s", path, exc)
            return
        *lines, tail = data.split(b"\n")
        if tail:  # the last record, cut short by the crash
            replayed.skipped["torn"] += 1
        for line in lines:
            if not line:
                continue
            try:
                event = from_json(json.loads(line))
            except (ValueError, RecursionError):  # (InvalidEvent is a ValueError)
                replayed.skipped["damaged"] += 1
                continue
            try:
                core.replay(event)
            except Exception as exc:  # one event the state refuses must not stop a restart
                if not replayed.skipped["refused"]:
                    logger.error("ECHO journal %s: an event not replayed (%r: %s)",
                                 path, event, exc)  # fmt: skip
                replayed.skipped["refused"] += 1
                continue
            replayed.events += 1
            if isinstance(event, PageFetched):
                if event.refresh:
                    replayed.finished.add(event.url)
            elif isinstance(event, _SOURCE_OUTCOMES):
                replayed.finished.add(event.url)

    def _report(self, replayed: Replayed) -> None:
        stats = self.stats
        if stats is not None and replayed.events:
            stats.set_value("echo/journal/replayed", replayed.events)
        skipped = sum(replayed.skipped.values())
        if not skipped:
            return
        if stats is not None:
            stats.set_value("echo/journal/skipped", skipped)
            for why, count in replayed.skipped.items():
                stats.set_value(f"echo/journal/skipped/{why}", count)
        whys = ", ".join(f"{count} {why}" for why, count in sorted(replayed.skipped.items()))
        # A torn last record is what a kill leaves, not a fault: a warning, not an error.
        logger.warning("ECHO journal in %s: %d records skipped (%s)", self.directory, skipped,
                       whys)  # fmt: skip


def finished_requests(plain: deque[Request], replayed: Replayed, state: CrawlView) -> int:
    """Take out of ``plain`` (the lane a checkpoint restored, its requests in flight first)
    the ECHO requests the journal says ended after the checkpoint: a page fetched (under any
    of its URLs), a source crawled, a refetch done. Returns how many."""
    kept: deque[Request] = deque()
    for request in plain:
        echo = request.meta.get("echo")
        if isinstance(echo, dict) and _ended(echo, request.url, replayed, state):
            continue
        kept.append(request)
    gone = len(plain) - len(kept)
    if gone:
        plain.clear()
        plain.extend(kept)
    return gone


def _ended(echo: dict[str, Any], url: str, replayed: Replayed, state: CrawlView) -> bool:
    kind = echo.get("kind")
    if kind == "page":
        return state.already_fetched(str(echo.get("page") or url))
    if kind == "source":
        return echo.get("url", url) in replayed.finished
    return kind == "refresh" and echo.get("page", url) in replayed.finished


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _sync_directory(directory: Path) -> None:
    handle = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)
