"""Which sources sit on a busy download slot, as the scheduler sees it during one call.

The policy chooses among sources whose slot is free (:mod:`scrapy_echo.crawler.politeness`); a
choice that lands on a busy slot anyway (a page on another host than its source) is put back and its
source set aside for the rest of the call. What the call saw also says when to look again:
the soonest moment a busy slot frees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from scrapy_echo.crawler.politeness import Politeness


class BusySlots:
    """Busy download slots per source, cleared at the start of each scheduler call."""

    def __init__(self, politeness: Politeness, inc_stat: Callable[[str], None]) -> None:
        self.politeness = politeness
        self._inc_stat = inc_stat
        self.soonest_free = math.inf  # seconds until a busy slot frees, seen this call
        self.blocked: np.ndarray | None = None  # sources on busy slots, seen this call
        # Per source, the index of its URL's download slot in _keys.
        self._source_slots = np.zeros(0, np.intp)
        self._keys: list[str] = []
        self._ids: dict[str, int] = {}

    def start_call(self) -> None:
        self.soonest_free, self.blocked = math.inf, None

    def free(self, key: str) -> bool:
        """Whether download slot ``key`` takes a request now; if not, note when it frees."""
        wait = self.politeness.wait(key)
        if wait > 0:
            self.soonest_free = min(self.soonest_free, wait)
            self._inc_stat("echo/scheduler/slot_busy")  # a choice put back for a busy slot
        return wait <= 0

    def of_sources(self, sources: Sequence[Any]) -> np.ndarray | None:
        """Per source (each with its ``url``), whether its URL's download slot is busy;
        ``None`` when none is."""
        slots = self._source_slots
        if slots.size < len(sources):
            new = range(slots.size, len(sources))
            extra = [self._slot_index(sources[i].url) for i in new]
            slots = self._source_slots = np.concatenate([slots, np.array(extra, np.intp)])
        busy = np.zeros(len(self._keys), bool)
        for index, key in enumerate(self._keys):
            wait = self.politeness.wait(key)
            if wait > 0:
                busy[index] = True
                self.soonest_free = min(self.soonest_free, wait)
        self.blocked = busy[slots] if busy.any() else None
        return self.blocked

    def set_aside(self, source: int, sources: int) -> np.ndarray:
        """Mark ``source`` (of ``sources``) as blocked for the rest of this call."""
        blocked = self.blocked
        if blocked is None or blocked.size < sources:
            grown = np.zeros(sources, bool)
            if blocked is not None:
                grown[: blocked.size] = blocked
            blocked = grown
        blocked[source] = True
        self.blocked = blocked
        return blocked

    def _slot_index(self, url: str) -> int:
        key = self.politeness.host_key(url)
        index = self._ids.get(key)
        if index is None:
            index = self._ids[key] = len(self._keys)
            self._keys.append(key)
        return index
