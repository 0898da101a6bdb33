"""One clock for the whole fleet: Redis's.

Event times come from the worker that saw them. A worker whose clock runs ahead by Δ would
date a source's fetch Δ in the future, so the honest fetches after it get spans of zero or
less and its ``λ`` is inflated; one behind makes pages look older than they are. Each worker
therefore dates what it observes by Redis's clock (``TIME``, read in every round trip): its own
clock plus an offset, measured as NTP does from the round trips with the shortest delay (the
server's time is then known best). The planner also clamps what still comes from the future
(:data:`MAX_AHEAD`): a worker that has not measured yet, or a hostile event.
"""

from __future__ import annotations

import time
from collections import deque

MAX_AHEAD = 5.0  # seconds an event may be ahead of the planner's clock before it is clamped
_SAMPLES = 16


class FleetClock:
    """``time.time()`` plus this worker's offset to Redis's clock, in seconds."""

    def __init__(self) -> None:
        self.offset = 0.0
        self._samples: deque[tuple[float, float]] = deque(maxlen=_SAMPLES)  # (delay, offset)

    def __call__(self) -> float:
        return time.time() + self.offset

    def sample(self, sent: float, server: float, received: float) -> None:
        """One round trip: sent and received by this worker's clock, ``server`` Redis's time
        while it ran. The offset is the one of the recent trips with the shortest delay."""
        delay = received - sent
        if delay < 0:  # this worker's clock stepped back during the trip
            return
        self._samples.append((delay, server - (sent + received) / 2))
        self.offset = min(self._samples)[1]
