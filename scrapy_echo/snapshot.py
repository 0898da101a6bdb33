"""One snapshot format for a crawl's state: JOBDIR, Redis and ``scrapy echo-report`` read it.

A snapshot is versioned plain data (numbers, strings, lists and numeric arrays, through
:mod:`scrapy_echo.codec`: JSON, never pickle), built from each part's own ``to_data`` rather
than from its attributes, so a later build that changes a class still reads it. Waiting
requests are stored by the scheduler's request codec (:mod:`scrapy_echo.distributed.wire`).

Every later version reads this one: ``tests/data/`` keeps a snapshot written by this version,
and a test loads it. Version 1 (the first Redis planner's attribute dump) is upgraded on read.

=============== ===========================================================================
key             value
=============== ===========================================================================
format, version ``"scrapy-echo-state"``, ``2``
saved_at        the crawl clock when saved
sources         per source: ``url, etag, last_modified, failures, last_fetched, crawls,
                new_links, not_modified``
last_crawl      per source, when its last crawl was dispatched (NaN: never)
seen            the 64-bit fingerprints of every link seen on a source
fetched         the fingerprints of the fetched pages' keys (optional: later in version 2)
aliases         ``[alias key, page key]`` pairs: a page's other URLs (optional, likewise)
crawled_pages   new pages fetched
learner         :meth:`SourceLearner.to_data <scrapy_echo.model.learning.SourceLearner.to_data>`
frontier        waiting new pages: ``[source, request, appeared, discovered]``
plain           the plain lane's requests (JOBDIR only)
feeds           click feed readers' positions
history         one sample per re-solve, for reports
=============== ===========================================================================
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from scrapy_echo import codec
from scrapy_echo.model.estimators import CrawlHistory
from scrapy_echo.model.learning import SourceLearner
from scrapy_echo.state import CrawlState, SourceStatus

if TYPE_CHECKING:
    from scrapy import Request

    from scrapy_echo.runtime import EchoRuntime

FORMAT = "scrapy-echo-state"
VERSION = 2
_STATUS_FIELDS = {f.name for f in dataclasses.fields(SourceStatus)}


def dump(
    runtime: EchoRuntime, encode: Callable[[Request], str], plain: Iterable[Request] = ()
) -> tuple[bytes, int]:
    """The runtime's state (and ``plain`` requests) as bytes, and how many waiting requests
    could not be stored as data (``encode`` raised ``ValueError``)."""
    state = runtime.state
    stored = _Counted(encode)
    frontier = []
    for waiting in state.frontier.pages():
        payload = stored(waiting.page)
        if payload is not None:
            frontier.append([waiting.source, payload, waiting.appeared, waiting.discovered])
    snapshot = {
        "format": FORMAT,
        "version": VERSION,
        "saved_at": runtime.clock(),
        "sources": [dataclasses.asdict(status) for status in state.sources],
        "last_crawl": np.array(state.last_crawl),
        "seen": np.fromiter(state.seen, dtype=np.uint64, count=len(state.seen)),
        "fetched": np.fromiter(state.fetched, dtype=np.uint64, count=len(state.fetched)),
        "aliases": [[alias, page] for alias, page in state.aliases.items()],
        "crawled_pages": state.crawled_pages,
        "learner": state.learner.to_data(),
        "frontier": frontier,
        "plain": [p for p in map(stored, plain) if p is not None],
        "feeds": runtime.feed_state(),
        "history": state.history,
    }
    return codec.dumps(snapshot), stored.failed


def read(data: bytes) -> dict[str, Any]:
    """The snapshot in ``data``, upgraded to this version, its sources as
    :class:`SourceStatus` and its learner as a :class:`SourceLearner`;
    :class:`codec.CodecError` if ``data`` is not a snapshot."""
    snapshot = codec.loads(data)
    if not isinstance(snapshot, dict):
        raise codec.CodecError("not a state snapshot")
    version = snapshot.get("version")
    try:
        if version == 1:  # the attribute dump: its objects are already built
            snapshot.setdefault("plain", [])
            if not isinstance(snapshot["learner"], SourceLearner):
                raise TypeError("version 1 snapshot without a learner")
            upgrade_learner(snapshot["learner"])
            return snapshot
        if version != VERSION or snapshot.get("format") != FORMAT:
            raise codec.CodecError(f"not a state snapshot of version {VERSION}")
        snapshot["sources"] = [
            SourceStatus(**{k: v for k, v in status.items() if k in _STATUS_FIELDS})
            for status in snapshot["sources"]
        ]
        snapshot["learner"] = SourceLearner.from_data(snapshot["learner"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise codec.CodecError(f"malformed snapshot: {exc!r:.200}") from None
    return snapshot


def upgrade_learner(learner: SourceLearner) -> None:
    """Bring a learner built from an older build's attributes (a version 1 snapshot, a legacy
    JOBDIR pickle) to this build's crawl history."""
    learner.crawls = CrawlHistory.from_dict(vars(learner.crawls))


def restore(
    runtime: EchoRuntime,
    snapshot: dict[str, Any],
    decode: Callable[[Any], Request],
) -> tuple[CrawlState, list[Request], int]:
    """A new state from a :func:`read` snapshot, the plain lane's requests, and how many
    stored requests ``decode`` refused (``ValueError``). The runtime's feed positions are
    restored too. :class:`codec.CodecError` if the snapshot does not fit together."""
    request = _Counted(decode)
    try:
        state = CrawlState(runtime.config)
        for status in snapshot["sources"]:
            state.add_source(status.url)
        state.sources[:] = snapshot["sources"]
        state.source_crawls = sum(status.crawls for status in state.sources)
        state.retired_count = sum(status.retired for status in state.sources)
        state.removed_count = sum(status.removed for status in state.sources)
        state.last_crawl[:] = snapshot["last_crawl"]
        state.seen = {int(mark) for mark in snapshot["seen"]}
        # (Snapshots before page identity have neither: nothing was fetched under two URLs.)
        state.fetched = {int(mark) for mark in snapshot.get("fetched", [])}
        state.aliases = {str(alias): str(page) for alias, page in snapshot.get("aliases", [])}
        state.crawled_pages = int(snapshot["crawled_pages"])
        state.history = list(snapshot.get("history", []))
        state.learner = snapshot["learner"]
        state.learner.grow(len(state.sources))
        for source, payload, appeared, discovered in snapshot["frontier"]:
            page = request(payload)
            if page is not None:
                state.frontier.push(source, page, appeared=appeared, discovered=discovered)
        plain = [r for r in map(request, snapshot.get("plain", [])) if r is not None]
        runtime.restore_feeds(snapshot["feeds"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise codec.CodecError(f"malformed snapshot: {exc!r:.200}") from None
    return state, plain, request.failed


class _Counted:
    """``convert``, with a ``ValueError`` turned into ``None`` and counted in ``failed``."""

    def __init__(self, convert: Callable[[Any], Any]) -> None:
        self.convert = convert
        self.failed = 0

    def __call__(self, value: Any) -> Any:
        try:
            return self.convert(value)
        except ValueError:
            self.failed += 1
            return None
