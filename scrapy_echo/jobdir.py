"""Crash-safe checkpoints of a crawl's ECHO state in ``JOBDIR``.

What is saved: sources and their crawl times, validators and failures, seen links, everything
the learner knows (crawl histories, click tables, pending clicks), the waiting new pages and the
plain lane (as request dicts, Scrapy's own format), and the click feed's read position. Written
every ``ECHO_CHECKPOINT_INTERVAL`` seconds and at close, to a temporary file that is flushed,
synced and renamed over the old one: a ``kill -9`` leaves the previous checkpoint whole, so it
loses at most one period.

The file is a pickle, like Scrapy's own JOBDIR queues: it is read only from the user's own job
directory, never from a shared store.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler

    from scrapy_echo.runtime import EchoRuntime

logger = logging.getLogger(__name__)


class PlainLane(Protocol):
    """The scheduler as a checkpoint sees it: the spider, and the plain lane's requests."""

    spider: Spider | None
    plain: deque[Request]


FORMAT_VERSION = 1
FILE_NAME = "echo-state.pickle"


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves either the old or the new file."""
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
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

    @classmethod
    def from_crawler(
        cls, crawler: Crawler, runtime: EchoRuntime, scheduler: PlainLane
    ) -> Checkpointer:
        jobdir = crawler.settings.get("JOBDIR")
        return cls(Path(jobdir) / FILE_NAME if jobdir else None, runtime, scheduler)

    @property
    def enabled(self) -> bool:
        return self.path is not None

    def save(self) -> None:
        if self.path is None or self.scheduler.spider is None:
            return
        started = time.perf_counter()
        spider = self.scheduler.spider
        state = self.runtime.state
        frontier, skipped = [], 0
        for waiting in state.frontier.pages():
            encoded = _encode(waiting.page, spider)  # type: ignore[arg-type]
            if encoded is None:
                skipped += 1
                continue
            frontier.append((waiting.source, encoded, waiting.appeared, waiting.discovered))
        plain = [r for r in (_encode(req, spider) for req in self.scheduler.plain) if r]
        skipped += len(self.scheduler.plain) - len(plain)
        snapshot = {
            "version": FORMAT_VERSION,
            "saved_at": self.runtime.clock(),
            "sources": state.sources,
            "last_crawl": np.array(state.last_crawl),
            "seen": state.seen,
            "crawled_pages": state.crawled_pages,
            "learner": state.learner,
            "frontier": frontier,
            "plain": plain,
            "feeds": self.runtime.feed_state(),
            "history": state.history,
        }
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(self.path, pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL))
        self.saves += 1
        stats = self.runtime.crawler.stats
        if stats is not None:
            stats.set_value("echo/jobdir/saves", self.saves)
            stats.set_value("echo/jobdir/unsaved_requests", skipped)
        logger.debug(
            "ECHO checkpoint %d: %d sources, %d waiting pages, %.3f s",
            self.saves,
            len(state.sources),
            len(frontier),
            time.perf_counter() - started,
        )

    def restore(self, spider: Spider) -> bool:
        """Load the last checkpoint, if any; ``True`` if one was loaded."""
        if self.path is None or not self.path.exists():
            return False
        try:
            snapshot = read_checkpoint(self.path)
        except Exception as exc:
            # Keep the file for inspection; a fresh start beats refusing to run a monitor.
            aside = self.path.with_name(f"{self.path.name}.unreadable-{int(time.time())}")
            os.replace(self.path, aside)
            logger.error("ECHO checkpoint %s unreadable (%s); moved to %s", self.path, exc, aside)
            return False
        state = self.runtime.state
        for status in snapshot["sources"]:
            state.add_source(status.url)
        state.sources[:] = snapshot["sources"]
        state.last_crawl[:] = snapshot["last_crawl"]
        state.seen = snapshot["seen"]
        state.crawled_pages = snapshot["crawled_pages"]
        state.history = snapshot.get("history", [])
        state.learner = snapshot["learner"]
        for source, encoded, appeared, discovered in snapshot["frontier"]:
            request = request_from_dict(encoded, spider=spider)
            state.frontier.push(source, request, appeared=appeared, discovered=discovered)
        self.scheduler.plain.extend(request_from_dict(d, spider=spider) for d in snapshot["plain"])
        self.runtime.restore_feeds(snapshot["feeds"])
        logger.info(
            "ECHO resumed from %s (saved %.0f s ago): %d sources, %d waiting pages",
            self.path,
            self.runtime.clock() - snapshot["saved_at"],
            len(state.sources),
            len(state.frontier),
        )
        return True


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The saved state in ``path`` (a file this module wrote in the user's own job directory;
    ``ValueError`` if it is of another format version)."""
    snapshot: dict[str, Any] = pickle.loads(path.read_bytes())
    if snapshot.get("version") != FORMAT_VERSION:
        raise ValueError(f"format version {snapshot.get('version')!r}")
    return snapshot


def _encode(request: Request, spider: Spider) -> dict[str, Any] | None:
    """Scrapy's dict form of ``request``; ``None`` if it cannot be saved (a callback that
    is not a spider method), counted by the caller."""
    try:
        return request.to_dict(spider=spider)
    except ValueError:
        return None
