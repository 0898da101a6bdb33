"""New pages waiting to be crawled, queued per source.

Within one source every page has the same expected profit curve ``P e^{-μ age}``, so the page
worth most is always the one that appeared last: each source keeps a max-heap by appearance
time, and the policies only ever compare the heads of the sources' queues. Arrays of those
heads (appearance and discovery time) let a policy rank all sources with waiting pages in one
vectorised step.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray

IntArray = NDArray[np.intp]


@dataclass(frozen=True)
class WaitingPage:
    """A new page found on ``source``, estimated to have appeared at ``appeared`` and found
    at ``discovered`` (seconds, same clock as the crawl)."""

    source: int
    page: Hashable
    appeared: float
    discovered: float


class Frontier:
    """Per-source queues of new pages; the head of each is its newest page.

    Parameters
    ----------
    sources : int
        Initial number of sources; the frontier grows when a larger index is pushed.

    Examples
    --------
    >>> f = Frontier(2)
    >>> f.push(1, "a", appeared=10.0, discovered=20.0)
    >>> f.push(1, "b", appeared=15.0, discovered=20.0)
    >>> f.waiting_sources().tolist(), float(f.head_appeared[1])
    ([1], 15.0)
    >>> f.pop(1).page, f.pop(1).page, len(f)
    ('b', 'a', 0)
    """

    def __init__(self, sources: int = 0) -> None:
        self._queues: dict[int, list[tuple[float, int, WaitingPage]]] = {}
        self._order = itertools.count()  # ties broken first in, first out
        self.head_appeared: FloatArray = np.full(sources, np.nan)
        self.head_discovered: FloatArray = np.full(sources, np.nan)
        self.count: IntArray = np.zeros(sources, dtype=np.intp)
        self._size = 0
        self._waiting: IntArray | None = None  # cache: sources with pages, until one changes
        self._hidden: NDArray[np.bool_] | None = None  # see hide()

    def __len__(self) -> int:
        return self._size

    @property
    def sources(self) -> int:
        return int(self.count.size)

    def grow(self, sources: int) -> None:
        """Make room for source indices below ``sources``."""
        extra = sources - self.count.size
        if extra > 0:
            self.head_appeared = np.concatenate([self.head_appeared, np.full(extra, np.nan)])
            self.head_discovered = np.concatenate([self.head_discovered, np.full(extra, np.nan)])
            self.count = np.concatenate([self.count, np.zeros(extra, dtype=np.intp)])

    def push(self, source: int, page: Hashable, *, appeared: float, discovered: float) -> None:
        if source < 0:
            raise ValueError(f"source must be >= 0, got {source!r}")
        self.grow(source + 1)
        item = WaitingPage(source, page, float(appeared), float(discovered))
        queue = self._queues.setdefault(source, [])
        if not queue:
            self._waiting = None
        heapq.heappush(queue, (-item.appeared, next(self._order), item))
        self._size += 1
        self.count[source] += 1
        self._refresh(source, queue)

    def pop(self, source: int) -> WaitingPage:
        """Remove and return the newest page of ``source`` (``KeyError`` if it has none)."""
        queue = self._queues[source]
        _, _, item = heapq.heappop(queue)
        self._size -= 1
        self.count[source] -= 1
        if queue:
            self._refresh(source, queue)
        else:
            del self._queues[source]
            self._waiting = None
            self.head_appeared[source] = np.nan
            self.head_discovered[source] = np.nan
        return item

    def drop(self, source: int) -> int:
        """Forget every page waiting on ``source``; returns how many there were."""
        queue = self._queues.pop(source, None)
        if not queue:
            return 0
        self._size -= len(queue)
        self.count[source] = 0
        self._waiting = None
        self.head_appeared[source] = np.nan
        self.head_discovered[source] = np.nan
        return len(queue)

    def head(self, source: int) -> WaitingPage:
        """The page :meth:`pop` would return for ``source``, left waiting (``KeyError`` if
        it has none)."""
        return self._queues[source][0][2]

    def waiting_sources(self) -> IntArray:
        """Indices of the sources that have at least one page waiting and are not hidden
        (do not modify)."""
        if self._waiting is None:
            waiting = np.flatnonzero(self.count)
            hidden = self._hidden
            if hidden is not None:
                waiting = waiting[~hidden[waiting]]
            self._waiting = waiting
        return self._waiting

    def hide(self, hidden: NDArray[np.bool_] | None) -> None:
        """Leave out the sources where ``hidden`` is true from :meth:`waiting_sources` until
        ``hide(None)``: the live scheduler hides sources whose download slot is busy."""
        if hidden is not None and hidden.size < self.count.size:
            hidden = np.concatenate([hidden, np.zeros(self.count.size - hidden.size, bool)])
        self._hidden = hidden
        self._waiting = None

    def pages(self) -> list[WaitingPage]:
        """Every waiting page (for persistence), each source's in the order they leave: pushed
        again in that order, they leave as they would have (ties first in, first out)."""
        return [item for queue in self._queues.values() for _, _, item in sorted(queue)]

    def _refresh(self, source: int, queue: list[tuple[float, int, WaitingPage]]) -> None:
        head = queue[0][2]
        self.head_appeared[source] = head.appeared
        self.head_discovered[source] = head.discovered
