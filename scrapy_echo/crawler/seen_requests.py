"""The fingerprints of the spider's own requests that the one-process dupefilter remembers,
each forgotten a time to live after it was let through.

Scrapy's own dupefilter keeps every fingerprint for the life of the process: a monitor that
runs for months, its spider following the same listing pages again and again, would grow
without end, and would never fetch a page twice however long ago it was fetched. Here a
fingerprint lasts ``ECHO_DUPEFILTER_TTL`` seconds from when its request was let through, as the
Redis dupefilter's ``done`` set does. Seen again meanwhile, it is not renewed: a request the
spider yields every hour is let through once per time to live, not never.

Requests are let through in time order, so the fingerprints are held in that order and expire
from the front, each at most once, in constant time. Memory is what one time to live of
requests holds: 95 bytes a fingerprint with a million held (the 20-byte ``bytes`` object, 56;
its share of the set's table, about 30; its place in the queue, 8), against 87 in Scrapy's own
set; more, up to 170, with tens of thousands (the set's table keeps room to grow). Times are
held per run, not per fingerprint (a float each would add 40 bytes): those let through within
:data:`STAMP_SHARE` of the time to live of each other (a minute of a week) share the latest of
their times, so a fingerprint is forgotten up to that much later than its time to live, never
sooner.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

STAMP_SHARE = 1e-4  # of the time to live: fingerprints let through within it share one time


class SeenRequests:
    """Fingerprints in the order they were let through, forgotten ``ttl`` seconds later.

    >>> seen = SeenRequests(ttl=60.0)
    >>> [seen.add_new(fp, now) for fp, now in ((b"a", 0.0), (b"a", 30.0), (b"b", 30.0))]
    [True, False, True]
    >>> seen.add_new(b"a", 60.0), b"b" in seen  # a's time to live is over, not b's
    (True, True)
    >>> seen.newest(2)
    [(b'b', 30.0), (b'a', 60.0)]
    """

    def __init__(self, ttl: float) -> None:
        if not ttl > 0:
            raise ValueError(f"ttl ({ttl!r}) must be > 0")
        self.ttl = float(ttl)
        self._stamp_width = STAMP_SHARE * self.ttl
        self.recorded = 0  # fingerprints ever let through: the number the next one gets
        self.forgotten = 0  # of those, forgotten since
        self._held: set[bytes] = set()
        self._order: deque[bytes] = deque()  # as let through, the oldest first
        # Runs of the fingerprints in _order, oldest first: when the run's last one was let
        # through, and how many it holds.
        self._stamps: deque[float] = deque()
        self._counts: deque[int] = deque()
        self._run_start = -math.inf  # when the newest run began

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, fingerprint: object) -> bool:
        return fingerprint in self._held

    def add_new(self, fingerprint: bytes, now: float) -> bool:
        """Whether ``fingerprint`` is new (not held after those due at ``now`` are forgotten);
        a new one is then held as let through at ``now``."""
        self.forget(now)
        if fingerprint in self._held:
            return False
        self._append(fingerprint, now)
        return True

    def forget(self, now: float) -> int:
        """Forget the fingerprints whose time to live is over at ``now``; how many."""
        cutoff = now - self.ttl
        stamps, counts, order, held = self._stamps, self._counts, self._order, self._held
        dropped = 0
        while stamps and stamps[0] <= cutoff:
            stamps.popleft()
            count = counts.popleft()
            for _ in range(count):
                held.discard(order.popleft())
            dropped += count
        self.forgotten += dropped
        return dropped

    def restore(self, entries: Iterable[tuple[bytes, float]], now: float) -> int:
        """Hold ``entries`` (fingerprints and when they were let through, in that order), as a
        restart reads them back, less those whose time to live is over at ``now``; how many
        are held. A fingerprint already held keeps its first time."""
        before = len(self._order)
        for fingerprint, stamp in entries:
            if fingerprint not in self._held:
                self._append(fingerprint, stamp)
        self.forget(now)
        return len(self._order) - before

    def newest(self, count: int) -> list[tuple[bytes, float]]:
        """The last ``count`` fingerprints let through (fewer if fewer are held), oldest first,
        each with its time: what a file of them needs since it was last written."""
        wanted = min(count, len(self._order))
        out: list[tuple[bytes, float]] = []
        fingerprints = reversed(self._order)
        for stamp, run in zip(reversed(self._stamps), reversed(self._counts), strict=True):
            if len(out) == wanted:
                break
            out.extend((next(fingerprints), stamp) for _ in range(min(run, wanted - len(out))))
        out.reverse()
        return out

    def _append(self, fingerprint: bytes, now: float) -> None:
        # (A clock stepped back leaves the order as it was, so expiry from the front holds:
        # such a fingerprint is forgotten a little later, never sooner.)
        now = max(now, self._stamps[-1]) if self._stamps else now
        self._held.add(fingerprint)
        self._order.append(fingerprint)
        self.recorded += 1
        if self._stamps and now - self._run_start < self._stamp_width:
            self._stamps[-1] = now
            self._counts[-1] += 1
        else:
            self._stamps.append(now)
            self._counts.append(1)
            self._run_start = now
