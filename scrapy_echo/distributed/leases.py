"""The leases a worker holds: requests leased and waiting for its engine (the prefetch
buffer), and requests handed to the engine and not yet done.

Every one of them is renewed, the waiting ones too: with slow downloads a request can wait in
the buffer longer than the lease timeout, and a lease let run out hands it to a second worker
while this one still means to fetch it. A lease Redis no longer holds (renewals late, after an
outage or a stall) is let go: a waiting request is dropped unfetched, since it went back to
the queue for another worker; one under way is only counted, its fetch may be doubled.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from scrapy_echo.distributed.wire import InvalidPayload

if TYPE_CHECKING:
    from scrapy import Request

    from scrapy_echo.distributed.store_messages import Reply

logger = logging.getLogger(__name__)

LEASE_KEY = "echo_lease"  # meta key of a leased request: its lease member


class HeldLeases:
    def __init__(self, count: Callable[[str, int], None]) -> None:
        self.count = count  # a stats counter: (key, increment)
        self.buffer: deque[Request] = deque()  # leased, waiting for the engine
        self.in_flight: dict[str, float] = {}  # lease member -> when handed to the engine
        self._logged: set[str] = set()

    def __len__(self) -> int:
        return len(self.buffer)

    def take(
        self, reply: Reply, decode: Callable[[bytes], Request], dead_key: str
    ) -> list[tuple[str, InvalidPayload]]:
        """Hold what ``reply`` leased, let go of what it says is lost, count what it set
        aside; the leased entries refused, to ack (which removes them) and count."""
        self.lost(reply.lost)
        refused = []
        for member, payload in reply.leased:
            try:
                request = decode(payload)
            except InvalidPayload as exc:
                refused.append((member, exc))
                continue
            request.meta[LEASE_KEY] = member
            self.buffer.append(request)
        if reply.dead:
            message = "ECHO set %s aside in %s: leased more than ECHO_REDIS_MAX_ATTEMPTS times "
            message += "(more are only counted)"
            self._count_once("echo/redis/dead", len(reply.dead), message, reply.dead, dead_key)
        if reply.malformed:
            message = "ECHO removed %d stored entries that were not requests (more: only counted)"
            self._count_once("echo/redis/malformed", reply.malformed, message, reply.malformed)
        return refused

    def next(
        self, now: float, wait_of: Callable[[Request], float], longest: float
    ) -> tuple[Request | None, float]:
        """The first request waiting whose host may be sent it now (``wait_of``: seconds it
        must wait), now under way; and the soonest wait of the rest (inf: none). One that
        would wait longer than ``longest`` (its host asked to be left alone past its lease)
        is given back (:meth:`give_back`)."""
        soonest = math.inf
        for request in list(self.buffer):
            wait = wait_of(request)
            if wait <= 0:
                self.buffer.remove(request)
                self.in_flight[request.meta[LEASE_KEY]] = now
                return request, soonest
            if wait > longest:
                self.give_back(request)
            else:
                soonest = min(soonest, wait)
        return None, soonest

    def give_back(self, request: Request) -> bool:
        """Stop renewing ``request``'s lease, unacked: it goes back to the queue when the
        lease runs out, for whichever worker may send it then (a host's hold keeps every
        worker off it until then). Whether it was one of ours."""
        member = request.meta.get(LEASE_KEY)
        if not isinstance(member, str):
            return False
        if self.in_flight.pop(member, None) is None:
            if request not in self.buffer:
                return False
            self.buffer.remove(request)
        message = "ECHO gave back %s: its host asked to be left alone for longer than the "
        message += "lease (more are only counted)"
        self._count_once("echo/redis/given_back", 1, message, member)
        return True

    def still_waiting(self, request: Request, now: float) -> None:
        """``request`` (a retry or redirect of one under way) waits for its host: not a
        request lost on the way (:meth:`let_go`)."""
        member = request.meta.get(LEASE_KEY)
        if isinstance(member, str) and member in self.in_flight:
            self.in_flight[member] = now

    def finish(self, request: Request) -> str | None:
        """The lease member to ack for ``request``, once done (``None``: not one of ours,
        or already let go)."""
        member = request.meta.get(LEASE_KEY)
        if isinstance(member, str) and self.in_flight.pop(member, None) is not None:
            return member
        return None

    def members(self) -> list[str]:
        """Every lease to renew."""
        return [*self.in_flight, *(request.meta[LEASE_KEY] for request in self.buffer)]

    def lost(self, members: Iterable[str]) -> None:
        """Let go of the leases Redis no longer holds (its answer to a renewal)."""
        gone = set(members)
        if not gone:
            return
        kept = [r for r in self.buffer if r.meta[LEASE_KEY] not in gone]
        dropped = len(self.buffer) - len(kept)
        self.buffer = deque(kept)
        under_way = sum(self.in_flight.pop(member, None) is not None for member in gone)
        if dropped:
            message = "ECHO dropped %d waiting requests whose leases ran out: they went back to "
            message += "the queue (renewals too late for ECHO_REDIS_LEASE_TIMEOUT)"
            self._count_once("echo/redis/leases_lost/buffered", dropped, message, dropped)
        if under_way:
            message = "ECHO lost the leases of %d requests under way: they may be fetched twice "
            message += "(renewals too late for ECHO_REDIS_LEASE_TIMEOUT; more are only counted)"
            self._count_once("echo/redis/leases_lost/in_flight", under_way, message, under_way)

    def _count_once(self, key: str, count: int, message: str, *args: object) -> None:
        """Count ``key``; log ``message`` the first time only (later ones are counted)."""
        self.count(key, count)
        if key not in self._logged:
            self._logged.add(key)
            logger.warning(message, *args)

    def let_go(self, before: float) -> None:
        """Stop renewing leases of requests handed out before ``before`` and never reported
        done (a path that dropped them unseen): their leases expire and they are crawled
        again, rather than held for good."""
        for member in [m for m, handed in self.in_flight.items() if handed < before]:
            del self.in_flight[member]
            self.count("echo/redis/leases_let_go", 1)
            logger.warning("ECHO request %s never finished; its lease is let go", member)
