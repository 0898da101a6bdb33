"""Politeness as the planner sees it: each download slot's turns for the whole fleet.

In Redis mode no one downloader holds every slot: a slot is leased to one worker at a time
(:mod:`.scripts`), whose downloader keeps its delay. The planner still chooses, as the one
process scheduler does, only among sources whose slot can take a request soon, so the queue
does not fill with a slow host's pages while fast hosts wait: a slot takes one request per
delay, and the planner queues a slot's request only when that slot's turn falls within the
``ECHO_REDIS_QUEUE_AHEAD`` seconds the queue holds. Each slot's delay is the longest of its
settings, robots.txt's Crawl-delay (as this worker read it) and what the slot's worker
reports (AutoThrottle's current delay, its Crawl-delay): the plan's capacity per host is that
of the fleet, not of one worker.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from scrapy_echo.crawler.politeness import Politeness

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class FleetPoliteness(Politeness):
    def __init__(self, crawler: Crawler, *, ahead: float, max_crawl_delay: float) -> None:
        super().__init__(crawler, max_crawl_delay=max_crawl_delay)
        self.ahead = ahead  # s of turns the queue may hold ahead
        self.reported: dict[str, float] = {}  # slot -> delay its worker reported (s)
        self._turn: dict[str, float] = {}  # slot -> when its next request may leave
        # slot -> until when (monotonic) its host asked any worker to be left alone
        self.fleet_holds: dict[str, float] = {}

    def slot_delay(self, key: str) -> float:
        return max(super().slot_delay(key), self.reported.get(key, 0.0))

    def wait(self, key: str) -> float:
        now = self.clock()
        held = max(self.pushback.wait(key, now), self.fleet_holds.get(key, now) - now)
        if held > 0:  # (Retry-After, heard by this worker or another: not even ahead)
            return held
        if self.slot_delay(key) <= 0:
            return 0.0  # no delay: the slot's worker keeps its concurrency
        return max(0.0, self._turn.get(key, -math.inf) - self.clock() - self.ahead)

    def _downloaded(self, *args: Any, **kwargs: Any) -> None:
        """Nothing: the worker's downloader politeness hears the responses, and this one
        shares its :attr:`pushback` (the scheduler sets it)."""

    def _engine_started(self) -> None:
        """Nothing: the worker's downloader politeness watches the reactor for both."""

    def handed(self, key: str) -> None:
        """A request for slot ``key`` was queued: it takes the slot's next turn."""
        now = self.clock()
        self._turn[key] = max(self._turn.get(key, now), now) + self.slot_delay(key)

    def capacity(self, host: str) -> float:
        delay = self.slot_delay(host)
        return 1.0 / delay if delay > 0 else math.inf

    def update(self, reported: dict[str, float]) -> None:
        """The slots' delays as their workers last reported them."""
        self.reported = reported

    def update_holds(self, holds: dict[str, float]) -> None:
        """The slots whose hosts asked a worker of the fleet to be left alone, and the
        seconds each hold has left (:meth:`RedisStore.fleet_holds
        <scrapy_echo.distributed.store.RedisStore.fleet_holds>`)."""
        now = self.clock()
        self.fleet_holds = {key: now + left for key, left in holds.items()}

    def held(self, key: str) -> bool:
        """Whether slot ``key``'s host asked this worker or another to be left alone."""
        now = self.clock()
        return self.pushback.wait(key, now) > 0 or self.fleet_holds.get(key, now) > now


def changed_delays(
    now: dict[str, float], sent: dict[str, float], default: float
) -> dict[str, float]:
    """The slots whose delay moved by more than 5 % (or 10 ms) since last sent (a slot never
    sent counts as at ``default``): what a worker reports, without a write per round."""
    changed = {}
    for key, delay in now.items():
        before = sent.get(key, default)
        if abs(delay - before) > max(0.01, 0.05 * before):
            changed[key] = delay
    return changed


__all__ = ["FleetPoliteness", "changed_delays"]
