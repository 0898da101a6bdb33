"""What the crawl measures of its own pace: responses per second (the budget when
``ECHO_CRAWL_RATE`` is unset) and the plain lane's share of the requests served."""

from __future__ import annotations

import time
from collections import deque


class Throughput:
    """Responses per second over the last ``window`` seconds (the budget when
    ``ECHO_CRAWL_RATE`` is unset: the crawler's own measured speed)."""

    def __init__(self, window: float = 300.0) -> None:
        self.window = window
        self._times: deque[float] = deque()
        self._started = time.time()

    def add(self, now: float) -> None:
        self._times.append(now)
        while self._times and self._times[0] < now - self.window:
            self._times.popleft()

    def rate(self, now: float) -> float | None:
        span = min(self.window, now - self._started)
        if len(self._times) < 2 or span <= 0:
            return None
        return len(self._times) / span


class LaneShare:
    """The share of the requests handed to the engine over the last ``window`` seconds that
    came from the plain lane (the spider's own requests, redirects and retries): crawls the
    plan cannot spend on sources and new pages."""

    def __init__(self, window: float = 300.0) -> None:
        self.window = window
        self._served: deque[tuple[float, bool]] = deque()
        self._plain = 0

    def add(self, now: float, *, plain: bool) -> None:
        self._served.append((now, plain))
        self._plain += plain
        while self._served and self._served[0][0] < now - self.window:
            _, was_plain = self._served.popleft()
            self._plain -= was_plain

    def share(self) -> float:
        return self._plain / len(self._served) if self._served else 0.0
