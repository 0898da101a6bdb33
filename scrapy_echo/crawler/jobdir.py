"""Crash-safe checkpoints of a crawl's ECHO state in ``JOBDIR``.

What is saved: sources and their crawl times, validators and failures, seen links, everything
the learner knows (crawl histories, click tables, pending clicks), the waiting new pages and the
plain lane, the requests in flight (:mod:`scrapy_echo.crawler.in_flight`; saved at the head of the
plain lane), and the click feed's read position: one :mod:`scrapy_echo.core.snapshot`, the format
Redis and ``scrapy echo-report`` use too (versioned plain data, no pickle). Taken every
``ECHO_CHECKPOINT_INTERVAL`` seconds and at close, and written (on a
thread, but at close) to a temporary file that is flushed, synced and renamed over the old
one: a ``kill -9`` leaves the previous checkpoint whole. What the crawl observed since is in
the journal (:mod:`scrapy_echo.crawler.journal`), replayed on top of it at restart: a crash
loses about a second (``ECHO_JOURNAL_INTERVAL``), not a period.

A checkpoint that cannot be read at all is moved aside (``echo-state.json.unreadable-<time>``,
its journal with it) and the crawl starts afresh, with an error in the log; a saved request
that no longer fits the spider (a renamed callback, a damaged entry) is skipped, counted and
logged once per reason, and the rest is restored. A waiting page is data: its request, built
when it leaves, goes to this run's page callback; so does a page in flight whose callback is
gone (its link is seen, nothing else would fetch it). A checkpoint of another format version
(an earlier build's) is moved aside the same way, the error naming its version.

Files that must not run ahead of the checkpoints follow them (:class:`FollowsCheckpoints`): the
dupefilter's fingerprints of the spider's own requests
(:mod:`scrapy_echo.crawler.seen_requests_file`) are written once the checkpoint holding those
requests is, and go aside with it.
"""

from __future__ import annotations

import io
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from scrapy_echo.core import snapshot as snapshots
from scrapy_echo.core.collector import collector_paused
from scrapy_echo.crawler.in_flight import LET_GO_AFTER, InFlight
from scrapy_echo.crawler.journal import Journal, finished_requests, segment_name
from scrapy_echo.model.decisions.registry import make_policy

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from twisted.internet.defer import Deferred
    from twisted.python.failure import Failure

    from scrapy_echo.crawler.runtime import EchoRuntime

logger = logging.getLogger(__name__)

FILE_NAME = "echo-state.json"
_WRITE_BUFFER = 16 << 20


class PlainLane(Protocol):
    """The scheduler as a checkpoint sees it: the spider, the plain lane, and its codec."""

    spider: Spider | None
    plain: deque[Request]

    def encode(self, request: Request) -> str: ...

    def decode(self, payload: bytes | str) -> Request: ...


class FollowsCheckpoints(Protocol):
    """A file written in step with the checkpoints (the dupefilter's fingerprints: they must
    never be on disk before the plain-lane requests they name are)."""

    def capture(self) -> Callable[[], None]:
        """Called on the reactor as a checkpoint is captured; what it returns runs on the
        writer thread once that checkpoint is written (not if a newer one was written
        instead: the newer one's capture covers it)."""
        ...

    def set_aside(self, suffix: str) -> None:
        """The checkpoint was unreadable and went aside, with ``suffix``."""
        ...


def write_atomically(path: Path, data: bytes | Iterable[str]) -> None:
    """Replace ``path`` with ``data`` (bytes, or text in pieces) so that a crash leaves either
    the old or the new file."""
    temporary = path.with_name(path.name + ".tmp")
    # A large buffer: few write calls. A thread writing in Python's usual 8 KiB pieces gives
    # up and takes back the interpreter at every one, and the reactor thread waiting for it
    # was seen to starve for up to 0.8 s (a known trait of CPython's lock hand-over).
    with open(temporary, "wb", buffering=_WRITE_BUFFER) as handle:
        if isinstance(data, bytes):
            handle.write(data)
        else:
            text = io.TextIOWrapper(handle, encoding="utf-8")
            text.writelines(data)
            text.flush()
            text.detach()  # (the file stays open, ours to sync and close)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself must reach the disk
    finally:
        os.close(directory)


class Checkpointer:
    """Saves and restores one crawl's state; does nothing without ``JOBDIR``."""

    def __init__(self, path: Path | None, runtime: EchoRuntime, scheduler: PlainLane):
        self.path = path
        self.runtime = runtime
        self.scheduler = scheduler
        self.saves = 0
        self.failed_saves = 0
        self._captures = 0  # checkpoints taken, in order
        self._written = 0  # the newest one written
        self._writing = threading.Lock()
        self._unsaved_requests = 0
        self._saved_in_flight = 0
        settings, stats = runtime.crawler.settings, runtime.crawler.stats
        timeout = settings.getfloat("DOWNLOAD_TIMEOUT", 180.0)
        self.in_flight = InFlight(LET_GO_AFTER * timeout, stats)
        recording = runtime.config.journal_interval > 0
        self.journal = None if path is None else Journal(path.parent, stats, recording=recording)
        self.followers: list[FollowsCheckpoints] = []

    @classmethod
    def from_crawler(
        cls, crawler: Crawler, runtime: EchoRuntime, scheduler: PlainLane
    ) -> Checkpointer:
        jobdir = crawler.settings.get("JOBDIR")
        return cls(Path(jobdir) / FILE_NAME if jobdir else None, runtime, scheduler)

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def handed(self, request: Request) -> None:
        """The scheduler handed ``request`` to the engine."""
        if self.path is not None:
            self.in_flight.handed(request, self.runtime.clock())

    def save(self) -> Deferred[bool] | None:
        """Take a checkpoint: the state is captured here, on the reactor (cheap: see
        :func:`scrapy_echo.core.snapshot.capture`), and encoded and written on a thread, so a big
        state never stalls the crawl. Returns when the file is written (the checkpoint loop
        waits for it: saves never overlap)."""
        captured = self._capture()
        if captured is None:
            return None
        from twisted.internet.threads import deferToThread  # (no reactor at import time)

        started = time.perf_counter()
        written: Deferred[bool] = deferToThread(self._write, *captured)
        how = (captured[0], started)
        written.addCallbacks(self._saved, self._save_failed, how, errbackArgs=how)
        return written

    def save_now(self) -> None:
        """Take a checkpoint and write it before returning (at close: nothing runs after)."""
        captured = self._capture()
        if captured is not None:
            started = time.perf_counter()
            self._saved(self._write(*captured), captured[0], started)

    def close(self) -> None:
        """At close: the journal written (if the last checkpoint fails, it still holds what
        came since the one before), then the last checkpoint."""
        if self.journal is not None:
            self.journal.flush_now()
        self.save_now()
        if self.journal is not None:
            self.journal.close()

    def _capture(
        self,
    ) -> tuple[int, snapshots.Captured, int, list[Callable[[], None]]] | None:
        """The state now, the journal segment that starts here and what the followers write
        once it is on disk (a checkpoint's number, its capture, the segment, the writes)."""
        if self.path is None or self.scheduler.spider is None:
            return None
        self._captures += 1
        journal = self.journal.rotate() if self.journal is not None else 0
        # Requests in flight go first: they were taken before anything still waiting.
        in_flight = self.in_flight.holding(self.runtime.clock())
        self._saved_in_flight = len(in_flight)
        runtime = self.runtime
        captured = snapshots.capture(
            runtime.core,
            runtime.clock(),
            self.scheduler.encode,
            [*in_flight, *self.scheduler.plain],
            extra={"feeds": runtime.feed_state(), "journal": journal},
        )
        return (
            self._captures,
            captured,
            journal,
            [follower.capture() for follower in self.followers],
        )

    def _write(
        self,
        number: int,
        captured: snapshots.Captured,
        journal: int = 0,
        followers: Iterable[Callable[[], None]] = (),
    ) -> bool:
        """Write a capture unless a newer one was written meanwhile; whether it was. The
        journal's segments before ``journal`` are in it, and go once it is on disk; then the
        ``followers`` write theirs."""
        assert self.path is not None
        with self._writing:  # one writer of the file at a time, the newest capture last
            if number <= self._written:
                return False
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with collector_paused():
                write_atomically(self.path, captured.chunks())
            self._written = number
            if self.journal is not None:
                self.journal.checkpointed(journal)
            for write in followers:
                write()
        self._unsaved_requests = captured.skipped
        return True

    def _saved(self, written: bool, number: int, started: float) -> None:
        assert self.path is not None
        if not written:
            return
        self.saves += 1
        stats = self.runtime.crawler.stats
        if stats is not None:
            stats.set_value("echo/jobdir/saves", self.saves)
            stats.set_value("echo/jobdir/unsaved_requests", self._unsaved_requests)
            stats.set_value("echo/jobdir/in_flight", self._saved_in_flight)
        logger.debug(
            "ECHO checkpoint %d written in %.3f s: %d sources, %d waiting pages",
            number,
            time.perf_counter() - started,
            len(self.runtime.state.sources),
            len(self.runtime.state.frontier),
        )

    def _save_failed(self, failure: Failure, number: int, started: float) -> None:
        # A full disk or a vanished directory must not stop a monitor: the previous checkpoint
        # is still whole, and the next period tries again.
        self.failed_saves += 1
        stats = self.runtime.crawler.stats
        if stats is not None:
            stats.set_value("echo/jobdir/failed_saves", self.failed_saves)
        logger.error("ECHO checkpoint %d to %s failed: %s", number, self.path, failure.value)

    def restore(self, spider: Spider) -> bool:
        """Load the last checkpoint, if any, and replay the journal on top of it; ``True`` if
        either restored anything. The crawl starts now: from here on, the checkpoints follow
        the requests in flight, and the journal the events."""
        if self.path is None or self.journal is None:
            return False
        # The one-machine scheduler is the one listener (distributed mode has its own).
        self.runtime.on_done = self.in_flight.done
        first = self._load(self.path)
        replayed = self.journal.replay(self.runtime.core, first or 0)
        # (Also a page whose fetch the checkpoint itself saw, taken while it was reported.)
        ended = finished_requests(self.scheduler.plain, replayed, self.runtime.state)
        if replayed.events:
            state = self.runtime.state
            logger.info(
                "ECHO resumed from the journal in %s: %d events since the %s replayed (%d "
                "saved requests had ended since): %d sources, %d waiting pages",
                self.journal.directory,
                replayed.events,
                "start" if first is None else "checkpoint",
                ended,
                len(state.sources),
                len(state.frontier),
            )
        if self.journal.recording:
            self.runtime.journal = self.journal.record
        return first is not None or replayed.events > 0

    def _load(self, path: Path) -> int | None:
        """Restore the checkpoint at ``path``; the journal segment it names, or ``None`` if
        there is none, or none readable (then it goes aside with its journal)."""
        if not path.exists():
            return None
        saved = SavedRequests(self.scheduler.decode, self._page_callback_name())
        try:
            snapshot = snapshots.read(path.read_bytes())
            first = snapshot.get("journal", 0)  # (a snapshot not from a JOBDIR has none)
            if type(first) is not int or first < 0:
                raise ValueError(f"journal must be a segment number, got {first!r:.40}")
            policy = make_policy(self.runtime.config.policy)  # takes what the saved one kept
            restored, plain, refused = snapshots.restore(
                self.runtime.config, snapshot, saved, policy
            )
            self.runtime.restore_feeds(snapshot["feeds"])
        except Exception as exc:
            # Keep the files for inspection; a fresh start beats refusing to run a monitor.
            # The journal goes too: it holds what came after a state no longer there.
            suffix = f".unreadable-{int(time.time())}"
            aside = path.with_name(path.name + suffix)
            os.replace(path, aside)
            assert self.journal is not None
            for number in self.journal.segments():
                segment = path.with_name(segment_name(number))
                try:
                    os.replace(segment, segment.with_name(segment.name + suffix))
                except OSError as moved:  # (then replayed on the fresh state: less lost)
                    logger.warning("ECHO journal segment %s not set aside: %s", segment, moved)
            for follower in self.followers:
                follower.set_aside(suffix)
            logger.error(
                "ECHO checkpoint %s unreadable (%s); moved to %s, and the crawl starts afresh",
                path,
                exc,
                aside,
            )
            return None
        self.runtime.core.reset(restored, policy)  # every component reads it through the runtime
        self.scheduler.plain.extend(plain)
        saved.report(path, refused, self.runtime.crawler.stats)
        state = self.runtime.state
        logger.info(
            "ECHO resumed from %s (saved %.0f s ago): %d sources, %d waiting pages",
            path,
            self.runtime.clock() - snapshot["saved_at"],
            len(state.sources),
            len(state.frontier),
        )
        return first

    def _page_callback_name(self) -> str | None:
        try:
            return getattr(self.runtime.page_callback(), "__name__", None)
        except ValueError:  # (the scheduler stops the crawl on that before it restores)
            return None


class SavedRequests:
    """The decoder of a checkpoint's saved requests: ``decode``, with every refusal counted
    by reason, and a page in flight whose callback the spider no longer has sent to
    ``page_callback`` (this run's): its link is seen, so nothing else would fetch it."""

    def __init__(self, decode: Callable[[Any], Request], page_callback: str | None) -> None:
        self.decode = decode
        self.page_callback = page_callback
        self.refused: dict[str, list[Any]] = {}  # reason -> [kind, count, first message]
        self.moved: dict[str, int] = {}  # pages sent to page_callback, by their old callback

    def __call__(self, payload: Any) -> Request:
        try:
            return self.decode(payload)
        # (TypeError: an entry of the wrong type; RecursionError: JSON nested too deep.)
        except (ValueError, TypeError, RecursionError) as exc:
            kind = getattr(exc, "kind", "damaged")
            if kind == "bad_callback":
                page = self._to_page_callback(payload)
                if page is not None:
                    return page
            # Each missing callback is a reason of its own: the log names every one.
            reason = str(exc) if kind == "bad_callback" else kind
            entry = self.refused.setdefault(reason, [kind, 0, str(exc)])
            entry[1] += 1
            raise ValueError(str(exc)) from None

    def _to_page_callback(self, payload: Any) -> Request | None:
        try:
            data = json.loads(payload)
            kind, callback = data["meta"]["echo"]["kind"], data["callback"]
        except (ValueError, TypeError, KeyError):
            return None
        if kind not in ("page", "refresh") or self.page_callback in (None, callback):
            return None  # (not a page, or its errback is what is missing)
        data["callback"] = self.page_callback
        try:
            page = self.decode(json.dumps(data))
        except ValueError:
            return None
        self.moved[str(callback)] = self.moved.get(str(callback), 0) + 1
        return page

    def report(self, path: Path, refused: int, stats: StatsCollector | None) -> None:
        """Log each reason once and count the requests skipped (``refused`` in all: entries
        too damaged to reach the decoder are counted by the snapshot only)."""
        damaged = refused - sum(count for _, count, _ in self.refused.values())
        if damaged > 0:
            self.refused["damaged entries"] = ["damaged", damaged, "damaged entries"]
        for kind, count, message in self.refused.values():
            logger.warning("ECHO checkpoint %s: %d saved requests skipped: %s", path, count,
                           message)  # fmt: skip
            if stats is not None:
                stats.inc_value(f"echo/jobdir/unrestored_requests/{kind}", count)
        for callback, count in self.moved.items():
            logger.warning(
                "ECHO checkpoint %s: %d pages in flight name callback %r, no longer a spider "
                "method; they go to %r, this run's page callback",
                path,
                count,
                callback,
                self.page_callback,
            )
        if stats is not None:
            if refused:
                stats.set_value("echo/jobdir/unrestored_requests", refused)
            if self.moved:
                stats.set_value("echo/jobdir/page_callback_changed", sum(self.moved.values()))
