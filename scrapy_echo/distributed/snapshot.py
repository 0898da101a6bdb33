"""The planner's state as bytes for Redis (:mod:`.codec`, no pickle), and back."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from scrapy_echo.distributed import codec
from scrapy_echo.state import CrawlState

if TYPE_CHECKING:
    from scrapy import Request

    from scrapy_echo.runtime import EchoRuntime

VERSION = 1


def dump_state(runtime: EchoRuntime, encode: Callable[[Request], str]) -> tuple[bytes, int]:
    """The state as bytes, and how many waiting pages could not be stored as data."""
    state = runtime.state
    frontier, skipped = [], 0
    for waiting in state.frontier.pages():
        try:
            payload = encode(waiting.page)  # type: ignore[arg-type]
        except ValueError:
            skipped += 1
            continue
        frontier.append((waiting.source, payload, waiting.appeared, waiting.discovered))
    snapshot = {
        "version": VERSION,
        "saved_at": runtime.clock(),
        "sources": list(state.sources),
        "last_crawl": np.array(state.last_crawl),
        "seen": np.fromiter(state.seen, dtype=np.uint64, count=len(state.seen)),
        "crawled_pages": state.crawled_pages,
        "learner": state.learner,
        "frontier": frontier,
        "feeds": runtime.feed_state(),
        "history": state.history,
    }
    return codec.dumps(snapshot), skipped


def load_state(
    runtime: EchoRuntime, data: bytes, decode: Callable[[str], Request]
) -> tuple[CrawlState, int]:
    """A fresh :class:`CrawlState` from ``data`` (:class:`codec.CodecError` if it is not a
    state this version wrote), and how many waiting pages were refused."""
    snapshot = codec.loads(data)
    if not isinstance(snapshot, dict) or snapshot.get("version") != VERSION:
        raise codec.CodecError("not a state snapshot of this version")
    try:
        state = CrawlState(runtime.config)
        for status in snapshot["sources"]:
            state.add_source(status.url)
        state.sources[:] = snapshot["sources"]
        state.last_crawl[:] = snapshot["last_crawl"]
        state.seen = {int(mark) for mark in snapshot["seen"]}
        state.crawled_pages = int(snapshot["crawled_pages"])
        state.history = list(snapshot.get("history", []))
        state.learner = snapshot["learner"]
        state.learner.grow(len(state.sources))
        refused = 0
        for source, payload, appeared, discovered in snapshot["frontier"]:
            try:
                request = decode(payload)
            except ValueError:
                refused += 1
                continue
            state.frontier.push(source, request, appeared=appeared, discovered=discovered)
        runtime.restore_feeds(snapshot["feeds"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise codec.CodecError(f"malformed snapshot: {exc!r:.200}") from None
    return state, refused
