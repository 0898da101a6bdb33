"""The one-process dupefilter: the spider's own requests, each remembered for
``ECHO_DUPEFILTER_TTL`` from when it was let through, then forgotten
(``DUPEFILTER_CLASS = "scrapy_echo.dupefilter.EchoDupeFilter"``, which the add-on sets unless
the project sets its own).

ECHO's own requests never come here: a source is crawled again by the plan, and a page is
fetched once by the crawl state's seen links (``ECHO_SEEN_TTL``). What comes here are the
requests the spider yields itself, which Scrapy's own dupefilter would remember for the life of
the process (and, with ``JOBDIR``, in a file that only grows). The fingerprints are Scrapy's
(``REQUEST_FINGERPRINTER_CLASS``); how they are held: :mod:`scrapy_echo.crawler.seen_requests`;
how they are kept in ``JOBDIR``, in step with the checkpoints:
:mod:`scrapy_echo.crawler.seen_requests_file`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from scrapy.dupefilters import BaseDupeFilter

from scrapy_echo.crawler.runtime import EchoRuntime
from scrapy_echo.crawler.seen_requests import SeenRequests
from scrapy_echo.crawler.seen_requests_file import FILE_NAME, SeenRequestsFile, UnknownFormat

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.statscollectors import StatsCollector
    from scrapy.utils.request import RequestFingerprinterProtocol
    from typing_extensions import Self

    from scrapy_echo.crawler.jobdir import Checkpointer

logger = logging.getLogger(__name__)

_GAUGES_EVERY = 1.0  # s between updates of the remembered and forgotten stats


class EchoDupeFilter(BaseDupeFilter):
    """Scrapy dupefilter whose fingerprints expire after ``ttl`` seconds of ``clock``; with
    ``path`` (a ``JOBDIR``), kept there across restarts."""

    def __init__(
        self,
        ttl: float,
        *,
        fingerprinter: RequestFingerprinterProtocol,
        clock: Callable[[], float] = time.time,
        path: Path | None = None,
        stats: StatsCollector | None = None,
        debug: bool = False,
    ) -> None:
        self.seen = SeenRequests(ttl)
        self.file = SeenRequestsFile(path / FILE_NAME) if path is not None else None
        self.fingerprinter = fingerprinter
        self.clock = clock
        self.stats = stats
        self.debug = debug
        self._with_checkpoints = False
        self._gauges_due = -math.inf
        self._first_logged = False
        self._failed_writes = 0
        self._write_failure_logged = False

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        runtime = EchoRuntime.of(crawler)
        jobdir = crawler.settings.get("JOBDIR")
        return cls(
            runtime.config.dupefilter_ttl,
            fingerprinter=crawler.request_fingerprinter,
            # (Through the runtime: whoever sets the crawl's clock later sets it here too.)
            clock=lambda: runtime.clock(),
            path=Path(jobdir) if jobdir else None,
            stats=crawler.stats,
            debug=crawler.settings.getbool("DUPEFILTER_DEBUG"),
        )

    # -- BaseDupeFilter ----------------------------------------------------------------------
    def open(self) -> None:
        """Read back the window a previous run of this ``JOBDIR`` left."""
        if self.file is None:
            return
        now = self.clock()
        try:
            loaded = self.file.load(now - self.seen.ttl)
        except UnknownFormat as exc:
            aside = self.file.set_aside(f".unreadable-{int(time.time())}")
            logger.error("ECHO dupefilter: %s; moved to %s, and it starts empty", exc, aside)
            return
        held = self.seen.restore(loaded.entries, now)
        self.file.written = self.seen.recorded
        if loaded.damaged:
            logger.warning(
                "ECHO dupefilter: %d damaged lines of %s skipped", loaded.damaged, self.file.path
            )
            self._count("echo/dupefilter/damaged_lines", loaded.damaged)
        logger.info(
            "ECHO dupefilter: %d requests seen in the last %g s read back from %s",
            held,
            self.seen.ttl,
            self.file.path,
        )
        self._set_gauges()

    def request_seen(self, request: Request) -> bool:
        now = self.clock()
        new = self.seen.add_new(self.fingerprinter.fingerprint(request), now)
        if now >= self._gauges_due:  # (two stats at each request added a quarter to its cost)
            self._set_gauges()
            self._gauges_due = now + _GAUGES_EVERY
        return not new

    def log(self, request: Request, spider: Spider) -> None:
        if self.debug:
            logger.debug("ECHO dupefilter: %s filtered, seen in the last %g s", request,
                         self.seen.ttl)  # fmt: skip
        elif not self._first_logged:
            logger.debug(
                "ECHO dupefilter: %s filtered, seen in the last %g s (the first; "
                "DUPEFILTER_DEBUG = True logs every one)",
                request,
                self.seen.ttl,
            )
            self._first_logged = True
        self._count("dupefilter/filtered")  # (Scrapy's own stat, for dashboards built on it)

    def close(self, reason: str) -> None:
        """Without ECHO's checkpoints to follow (another scheduler), write what is new now."""
        self._set_gauges()
        if self.file is not None and not self._with_checkpoints:
            self.capture()()

    # -- JOBDIR, in step with the checkpoints -------------------------------------------------
    def write_with(self, checkpointer: Checkpointer) -> None:
        """Write the file when ``checkpointer`` writes a checkpoint (and only then)."""
        if self.file is not None:
            checkpointer.followers.append(self)
            self._with_checkpoints = True

    def capture(self) -> Callable[[], None]:
        """The fingerprints let through until now and not yet on disk, and what to do with
        them (on the checkpoint's writer thread, once the checkpoint is written)."""
        assert self.file is not None
        file = self.file
        now = self.clock()
        self.seen.forget(now)
        self._set_gauges()
        if self._failed_writes:  # (counted on the thread, told here, on the reactor)
            self._count("echo/dupefilter/failed_writes", self._failed_writes)
            self._failed_writes = 0
        if self.stats is not None:
            self.stats.set_value("echo/dupefilter/compactions", file.compactions)
        entries = self.seen.newest(self.seen.recorded - file.written)
        first, live, cutoff = self.seen.recorded - len(entries), len(self.seen), now - self.seen.ttl

        def write() -> None:
            try:
                file.append(first, entries, live, cutoff)
            except OSError as exc:
                # As a failed checkpoint: the next one tries again, with these lines too.
                self._failed_writes += 1
                if not self._write_failure_logged:
                    self._write_failure_logged = True
                    logger.error("ECHO dupefilter: %s not written: %s", file.path, exc)

        return write

    def set_aside(self, suffix: str) -> None:
        """The checkpoint this file goes with was unreadable, and went aside: so does it."""
        if self.file is None or not self.file.path.exists():
            return
        try:
            self.file.set_aside(suffix)
        except OSError as exc:  # (then read back: some requests not fetched for a while)
            logger.warning("ECHO dupefilter: %s not set aside: %s", self.file.path, exc)

    def _set_gauges(self) -> None:
        if self.stats is not None:
            self.stats.set_value("echo/dupefilter/remembered", len(self.seen))
            self.stats.set_value("echo/dupefilter/forgotten", self.seen.forgotten)

    def _count(self, key: str, count: int = 1) -> None:
        if self.stats is not None:
            self.stats.inc_value(key, count)
