"""What hosts say back, per download slot: ``Retry-After`` and refusals (429, 503).

A host that answers 429 (Too Many Requests) or 503 (Service Unavailable) with ``Retry-After``
(seconds, or an HTTP date) gets no request at all until then: not the retry Scrapy's
``RetryMiddleware`` makes of the refused one (it goes back through the scheduler, which waits
for the slot), not the other requests for that host. Scrapy itself reads ``Retry-After``
nowhere.

A host that keeps answering 429 is taking less than the crawl sends: each 429 doubles the
slot's delay (a floor under ``DOWNLOAD_DELAY``, AutoThrottle and ``Crawl-delay``, at most
``ECHO_MAX_CRAWL_DELAY``), and each accepted response takes 3 % off it, so it recovers slowly
once the host stops refusing, as AutoThrottle does for latency. The plan's capacity for the
host is ``1/delay``: the budget goes to hosts that accept it. A 503 says the host is down, not
that it is asked too often: it holds the slot for its ``Retry-After`` if it gives one, and
the source's own back-off does the rest (a host down for a while and then back would
otherwise keep a delay learned from an outage, and its sources the low capacity that goes
with it).
"""

from __future__ import annotations

import math
from datetime import timezone
from email.utils import parsedate_to_datetime

REFUSALS = (429, 503)
TOO_MANY = 429  # the refusal that says the crawl asks too often
# A refusal without Retry-After doubles the slot's delay from at least this (s): a slot
# without any delay would otherwise stay at 0.
MIN_REFUSAL_DELAY = 0.1
# Longer than any wait the crawl keeps (ECHO_FAILURE_BACKOFF_MAX caps it): a header of 400
# digits stays a number the journal takes.
LONGEST = 365 * 86400.0
RECOVERY = 0.97  # the learned delay kept per accepted response (about 23 to halve it)


def retry_after_seconds(value: str | bytes | None, *, now: float) -> float | None:
    """The seconds a ``Retry-After`` header asks for, from wall-clock time ``now``: its
    delta-seconds, or its HTTP date less ``now`` (at least 0). ``None`` for no header or
    one that is neither.

    >>> retry_after_seconds(b"5", now=0.0), retry_after_seconds("junk", now=0.0)
    (5.0, None)
    >>> retry_after_seconds("Thu, 01 Jan 1970 00:01:40 GMT", now=40.0)
    60.0
    """
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if text.isascii() and text.isdigit():  # ("²".isdigit() too; float() refuses it)
        return min(float(text), LONGEST)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # RFC 850 and asctime dates carry no zone: HTTP's are GMT
        when = when.replace(tzinfo=timezone.utc)
    return min(max(0.0, when.timestamp() - now), LONGEST)


class HostPushback:
    """Per download slot: until when nothing may be sent, and the delay learned from
    refusals. ``max_wait`` bounds a hold (a host asking for a day would stop its sources),
    ``max_delay`` the learned delay."""

    def __init__(self, *, max_wait: float, max_delay: float = 60.0) -> None:
        self.max_wait = max_wait
        self.max_delay = max_delay
        self.until: dict[str, float] = {}  # slot -> monotonic time nothing is sent before
        self.learned: dict[str, float] = {}  # slot -> delay floor from refusals (s)
        self._news: set[str] = set()  # slots held since :meth:`new_holds` last asked

    def refused(
        self, key: str, now: float, wait: float | None, delay: float, *, too_many: bool = True
    ) -> float:
        """Slot ``key`` refused a request at ``now`` (monotonic), asking for ``wait``
        seconds (``None``: it did not say), its delay ``delay``; ``too_many``: a 429 (its
        delay doubles), else a 503 (held only for ``wait``). Returns how long nothing goes
        to it."""
        if too_many:
            learned = max(delay, self.learned.get(key, 0.0), MIN_REFUSAL_DELAY / 2) * 2.0
            self.learned[key] = min(learned, self.max_delay)
        said = max(wait, 0.0) if wait is not None else None
        hold = min(self.learned.get(key, 0.0) if said is None else said, self.max_wait)
        if hold <= 0:
            return 0.0
        self.until[key] = max(self.until.get(key, -math.inf), now + hold)
        self._news.add(key)
        return hold

    def new_holds(self, now: float) -> dict[str, float]:
        """The slots held since the last call, with the seconds left of each: what a fleet's
        worker tells the others."""
        news = {key: self.until[key] - now for key in self._news if self.until.get(key, 0) > now}
        self._news.clear()
        return news

    def accepted(self, key: str, base_delay: float) -> None:
        """Slot ``key`` answered a request: its learned delay recovers a little, and goes
        once it is back under ``base_delay``."""
        learned = self.learned.get(key)
        if learned is None:
            return
        learned *= RECOVERY
        if learned <= base_delay or learned < MIN_REFUSAL_DELAY / 2:
            del self.learned[key]
        else:
            self.learned[key] = learned

    def wait(self, key: str, now: float) -> float:
        """Seconds until slot ``key`` may be sent a request again (0: now)."""
        until = self.until.get(key)
        if until is None:
            return 0.0
        if until <= now:
            del self.until[key]
            return 0.0
        return until - now

    def delay(self, key: str) -> float:
        """The delay slot ``key`` has earned by refusing (0: none)."""
        return self.learned.get(key, 0.0)


__all__ = ["REFUSALS", "HostPushback", "retry_after_seconds"]
