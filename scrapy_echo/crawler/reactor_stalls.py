"""A held reactor must not turn into a burst at a host.

Scrapy's downloader spaces a slot's requests by the time each was *dispatched*
(``slot.lastseen``), not by when its bytes left: a request dispatched just before the reactor
is held (a re-solve, a click fit's install, a slow parse callback) goes out only when the
reactor runs again, and the slot's next request, dispatched a delay after the first, follows
it at once. Measured on a local site of eight hosts with 0.5 s and 2 s delays: re-solves that
held the reactor up to 0.75 s put two requests 0.21 s apart on a 0.5 s host, and 1.55 s apart
on a 2 s one.

So a tick every :data:`TICK` seconds notes when the reactor was held: a tick more than
:data:`STALL` late. Each slot with a delay that dispatched a request since shortly before the
hold (:data:`MARGIN` before the last tick on time) may have sent it only now, and its
``lastseen`` moves to now: its next request waits a full delay from when the last one really
left. A slot without a delay has nothing to space. Counted as ``echo/politeness/stalls``
(holds seen), ``echo/politeness/stalled_slots`` (slots moved) and
``echo/politeness/longest_stall`` (seconds).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

TICK = 0.05  # s between ticks
STALL = 0.05  # s late past its time: the reactor was held
MARGIN = 2 * TICK  # s before the last tick: a dispatch then may not have been sent by it


class ReactorStalls:
    """The ticks, and what a late one does to the slots ``slots()`` returns (Scrapy's
    downloader slots by key). ``inc_stat(name, count)`` and ``max_stat(name, value)`` count."""

    def __init__(
        self,
        slots: Callable[[], dict[str, Any]],
        inc_stat: Callable[[str, int], None],
        max_stat: Callable[[str, float], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.slots = slots
        self.inc_stat, self.max_stat = inc_stat, max_stat
        self.clock = clock  # (Scrapy's downloader stamps ``lastseen`` by time.monotonic)
        self.last_tick: float | None = None

    def tick(self) -> int:
        """One tick; returns how many slots a hold since the last one moved."""
        now = self.clock()
        last, self.last_tick = self.last_tick, now
        if last is None:
            return 0
        gap = now - last  # (a tick on time: TICK)
        if gap - TICK <= STALL:
            return 0
        since = last - MARGIN
        moved = 0
        for slot in self.slots().values():
            if slot.delay > 0 and since <= slot.lastseen < now:
                slot.lastseen = now
                moved += 1
        self.inc_stat("echo/politeness/stalls", 1)
        if moved:
            self.inc_stat("echo/politeness/stalled_slots", moved)
        self.max_stat("echo/politeness/longest_stall", round(gap, 3))
        return moved


__all__ = ["MARGIN", "STALL", "TICK", "ReactorStalls"]
