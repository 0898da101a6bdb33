"""What Scrapy's downloader lets through, per download slot: which slots are free now, and how
many requests per second each host takes (the plan's per-host capacity).

Scrapy keeps politeness in the downloader: one slot per host (or IP with
``CONCURRENT_REQUESTS_PER_IP``, or ``meta["download_slot"]``), each with a concurrency and a
delay (``DOWNLOAD_DELAY``, ``DOWNLOAD_SLOTS``, AutoThrottle's adjustments). A request handed
to the engine for a busy slot waits in that slot's queue and still counts against
``CONCURRENT_REQUESTS``: a burst of one host's pages fills the downloader and stalls every
other host. The scheduler asks :meth:`Politeness.wait` before handing a request over.

The downloader's own state lags by a moment (a request handed over reaches its slot only
after the downloader middlewares ran), so requests handed over and not yet seen in a slot are
counted here too (:meth:`handed`, cleared by ``request_reached_downloader``).

A reactor held for a moment (a re-solve) would let a request dispatched before it leave late
and the slot's next one right after it: :mod:`scrapy_echo.crawler.reactor_stalls` moves such
slots' clocks to when the reactor ran again.

What a host says back (``Retry-After`` on 429 and 503, and a delay learned from its 429s:
:mod:`scrapy_echo.crawler.pushback`) holds the slot and raises its delay the same way.

robots.txt's ``Crawl-delay`` (Scrapy's parsers read it; Scrapy itself does not apply it) is a
floor under the slot's delay: set on the slot as each request reaches it, so AutoThrottle
cannot take it lower, and used for the plan's capacity. A delay over
``ECHO_MAX_CRAWL_DELAY`` is cut to it (logged): a host asking for an hour between requests
would otherwise stop the crawl of its sources.
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict, deque
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals

from scrapy_echo.crawler.pushback import (
    REFUSALS,
    TOO_MANY,
    HostPushback,
    retry_after_seconds,
)
from scrapy_echo.crawler.reactor_stalls import TICK, ReactorStalls

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from twisted.internet.task import LoopingCall

logger = logging.getLogger(__name__)

# A request handed over that has not reached its slot after this long was dropped on the way
# (a downloader middleware answered it, or filtered it): it no longer occupies the slot.
_IN_TRANSIT = 2.0
# How long to wait for a slot full of transfers: its next response wakes the engine anyway.
_BUSY_NAP = 0.1


class Politeness:
    """Free and busy download slots, read from the crawler's downloader."""

    def __init__(
        self, crawler: Crawler, *, max_crawl_delay: float = 60.0, max_wait: float = 21600.0
    ) -> None:
        self.crawler = crawler
        settings = crawler.settings
        self.per_ip = settings.getint("CONCURRENT_REQUESTS_PER_IP") > 0
        self.concurrency = settings.getint("CONCURRENT_REQUESTS_PER_IP") or settings.getint(
            "CONCURRENT_REQUESTS_PER_DOMAIN"
        )
        delay = settings.getfloat("DOWNLOAD_DELAY")
        if settings.getbool("AUTOTHROTTLE_ENABLED"):
            # AutoThrottle starts new slots here and never goes below DOWNLOAD_DELAY.
            delay = max(delay, settings.getfloat("AUTOTHROTTLE_START_DELAY"))
        self.delay = delay
        self.slot_settings: dict[str, dict[str, Any]] = settings.getdict("DOWNLOAD_SLOTS")
        self.crawl_delays: dict[str, float] = {}  # host -> robots.txt's Crawl-delay (s)
        self.max_crawl_delay = max_crawl_delay
        self._user_agent = settings.get("ROBOTSTXT_USER_AGENT") or settings.get("USER_AGENT")
        # Monotonic seconds (a test that drives the scheduler on a clock of its own sets it).
        self.clock: Callable[[], float] = time.monotonic
        self._in_transit: defaultdict[str, deque[float]] = defaultdict(deque)
        self._last_handed: dict[str, float] = {}
        self.pushback = HostPushback(max_wait=max_wait, max_delay=max_crawl_delay)
        self._refusing: set[str] = set()  # slots whose first refusal was logged
        crawler.signals.connect(self._reached, signal=signals.request_reached_downloader)
        crawler.signals.connect(self._robots_parsed, signal=signals.robots_parsed)
        # (Sent as the response arrives, before any middleware: Scrapy's retry of a refused
        # request already finds its slot held.)
        crawler.signals.connect(self._downloaded, signal=signals.response_downloaded)
        self.stalls = ReactorStalls(self._slots, self._inc_stat, self._max_stat)
        self._ticks: LoopingCall | None = None
        crawler.signals.connect(self._engine_started, signal=signals.engine_started)
        crawler.signals.connect(self._engine_stopped, signal=signals.engine_stopped)

    def _engine_started(self) -> None:
        from twisted.internet.task import LoopingCall  # (no reactor at import time)

        self._ticks = LoopingCall(self.stalls.tick)
        self._ticks.start(TICK, now=True)

    def _engine_stopped(self) -> None:
        if self._ticks is not None and self._ticks.running:
            self._ticks.stop()

    def _inc_stat(self, name: str, count: int) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(name, count)

    def _max_stat(self, name: str, value: float) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.max_value(name, value)

    # -- slots --------------------------------------------------------------------------------
    def slot_key(self, request: Request) -> str:
        """The download slot ``request`` will take (the downloader's own rule)."""
        downloader = self._downloader()
        if downloader is not None:
            return str(downloader.get_slot_key(request))
        slot = request.meta.get("download_slot")
        return str(slot) if slot is not None else (urlsplit(request.url).hostname or "")

    def host_key(self, url: str) -> str:
        """The slot key of a plain request for ``url`` (a source's slot)."""
        return urlsplit(url).hostname or ""

    def wait(self, key: str) -> float:
        """Seconds until slot ``key`` can start one more download (0: free now)."""
        now = self.clock()
        held = self.pushback.wait(key, now)
        if held > 0:
            return held
        transit = self._in_transit.get(key)
        while transit and transit[0] < now - _IN_TRANSIT:
            transit.popleft()
        pending = len(transit) if transit else 0
        slot = self._slots().get(key)
        delay = slot.delay if slot is not None else self.slot_delay(key)
        last = self._last_handed.get(key, -math.inf)
        if slot is not None:
            if slot.queue:  # something is already waiting for this slot
                return max(delay, _BUSY_NAP)
            last = max(last, slot.lastseen)
            busy = len(slot.transferring) + pending >= slot.concurrency
        else:
            busy = pending >= self.slot_concurrency(key)
        if delay > 0:
            if pending:  # a request on its way will take the next turn
                return delay
            return max(0.0, last + delay - now)
        return _BUSY_NAP if busy else 0.0

    def handed(self, key: str) -> None:
        """A request for slot ``key`` was handed to the engine."""
        now = self.clock()
        self._in_transit[key].append(now)
        self._last_handed[key] = now

    # -- capacity --------------------------------------------------------------------------
    def capacity(self, host: str) -> float:
        """Requests per second slot ``host`` takes at most: ``1/delay`` (its current delay
        when the downloader has the slot, AutoThrottle's included), ``inf`` without a delay
        (then concurrency and the server's speed bound it, which the crawl budget covers)."""
        slot = self._slots().get(host)
        delay = self._current_delay(host, slot) if slot is not None else self.slot_delay(host)
        return 1.0 / delay if delay > 0 else math.inf

    def slot_delay(self, key: str) -> float:
        """The delay slot ``key`` starts with (its settings, or the default), or robots.txt's
        Crawl-delay if longer."""
        delay = float(self.slot_settings.get(key, {}).get("delay", self.delay))
        return max(delay, self._floor(key))

    def current_delays(self) -> dict[str, float]:
        """Each download slot's delay now (AutoThrottle's and Crawl-delay included)."""
        return {key: self._current_delay(key, slot) for key, slot in self._slots().items()}

    def _current_delay(self, key: str, slot: Any) -> float:
        return max(float(slot.delay), self._floor(key))

    def _floor(self, key: str) -> float:
        """What the host asked for: its Crawl-delay, or the delay its refusals earned."""
        return max(self.crawl_delays.get(key, 0.0), self.pushback.delay(key))

    def slot_concurrency(self, key: str) -> int:
        return int(self.slot_settings.get(key, {}).get("concurrency", self.concurrency))

    # -- internals -------------------------------------------------------------------------
    def _reached(self, request: Request, **_: Any) -> None:
        key = request.meta.get("download_slot")
        transit = self._in_transit.get(str(key)) if key is not None else None
        if transit:
            transit.popleft()
        floor = self._floor(str(key)) if key is not None else None
        slot = self._slots().get(str(key)) if floor else None
        if slot is not None and slot.delay < floor:
            slot.delay = floor  # (before the slot sends it: the downloader reads it after)

    def _downloaded(self, response: Response, request: Request, **_: Any) -> None:
        key = request.meta.get("download_slot")
        key = str(key) if key is not None else self.slot_key(request)
        slot = self._slots().get(key)
        if response.status not in REFUSALS:
            if response.status < 400 and self.pushback.delay(key) > 0:
                # The slot's own delay (settings, Crawl-delay), not the floor it was raised to:
                # the learned one comes down toward it, and the slot with it.
                base = max(
                    float(self.slot_settings.get(key, {}).get("delay", self.delay)),
                    self.crawl_delays.get(key, 0.0),
                )
                self.pushback.accepted(key, base)
                if slot is not None:
                    slot.delay = max(base, self.pushback.delay(key))
            return
        now = self.clock()
        asked = retry_after_seconds(response.headers.get(b"Retry-After"), now=time.time())
        delay = self._current_delay(key, slot) if slot is not None else self.slot_delay(key)
        hold = self.pushback.refused(key, now, asked, delay, too_many=response.status == TOO_MANY)
        if slot is not None:
            slot.delay = max(float(slot.delay), self.pushback.delay(key))
            # The downloader sends a request queued in the slot once its delay, shortened by
            # up to ``jitter`` of it, has passed since ``lastseen``: none before the hold is
            # over. (A slot without a delay skips that wait: the scheduler's hold is all
            # there is, and it hands such a slot no request while held.)
            shortest = slot.delay * (1.0 - float(getattr(slot, "jitter", 0.5)))
            slot.lastseen = max(slot.lastseen, now + hold - shortest)
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value(f"echo/hosts/refused/{response.status}")
            if asked is not None:
                stats.inc_value("echo/hosts/retry_after")
        if key not in self._refusing:  # once per host, then counted
            self._refusing.add(key)
            logger.info("ECHO: %s refused a request (HTTP %d, Retry-After %s s); holding it "
                        "%.3g s, its delay now %.3g s", key, response.status, asked, hold,
                        self.pushback.delay(key))  # fmt: skip

    def _robots_parsed(self, robotparser: Any, request: Request, **_: Any) -> None:
        host = urlsplit(request.url).hostname or ""
        try:
            asked = robotparser.crawl_delay(self._user_agent or "*")
        except Exception:  # a parser of the user's (ROBOTSTXT_PARSER) that fails on it
            logger.debug("ECHO could not read Crawl-delay for %s", host, exc_info=True)
            return
        if asked is None or not math.isfinite(asked) or asked <= 0:
            self.crawl_delays.pop(host, None)
            return
        delay = min(float(asked), self.max_crawl_delay)
        if delay < asked:
            logger.warning("ECHO: %s asks for a Crawl-delay of %g s; keeping %g s "
                           "(ECHO_MAX_CRAWL_DELAY)", host, asked, delay)  # fmt: skip
        self.crawl_delays[host] = delay

    def _downloader(self) -> Any:
        try:
            engine = getattr(self.crawler, "engine", None)
        except RuntimeError:  # Scrapy 2.13+: "not set yet" before the crawl starts
            return None
        return getattr(engine, "downloader", None)

    def _slots(self) -> dict[str, Any]:
        slots = getattr(self._downloader(), "slots", None)
        return slots if isinstance(slots, dict) else {}


__all__ = ["Politeness"]
