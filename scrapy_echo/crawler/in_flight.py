"""The requests the engine holds: handed out by the scheduler and not yet reported done.

A request in flight is in no queue, yet its link is already seen: a checkpoint that left it
out would lose it for good at a crash, since nothing else would fetch it again. So JOBDIR
checkpoints save these with the plain lane (:mod:`scrapy_echo.crawler.jobdir`), and a restart
queues them again: a page fetched twice after a crash, never a page lost.

A request is done when the plugin's middlewares report it (``EchoRuntime.done``: its
response handled by the spider, or its last failure). A redirect or a retry is a new request
that replaces the one it follows, which never reports done: it is dropped when its
successor is handed out. Any other request that never reports done (a middleware that drops
it unseen) is let go after a few download timeouts, counted and logged once.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.statscollectors import StatsCollector

logger = logging.getLogger(__name__)

# A request in flight for this many download timeouts (DOWNLOAD_TIMEOUT) is let go: a
# download is over by one, and the rest is margin for its slot's queue and the spider.
LET_GO_AFTER = 4


class InFlight:
    """The requests handed to the engine and not yet done, oldest first."""

    def __init__(self, let_go_after: float, stats: StatsCollector | None = None) -> None:
        self.let_go_after = let_go_after
        self.stats = stats
        self._requests: dict[int, tuple[Request, float]] = {}  # id -> (request, handed at)
        self._let_go_logged = False

    def __len__(self) -> int:
        return len(self._requests)

    def handed(self, request: Request, now: float) -> None:
        """The scheduler handed ``request`` to the engine at ``now``."""
        generation = _generation(request)
        if generation:
            self._drop_predecessor(request, generation)
        # (Keyed by identity: the request is held here, so its id is not reused meanwhile.)
        self._requests[id(request)] = (request, now)

    def done(self, request: Request) -> None:
        """``request`` was handled: a crash no longer loses what it found."""
        self._requests.pop(id(request), None)

    def holding(self, now: float) -> list[Request]:
        """The requests in flight at ``now``, oldest first, after letting go of those handed
        out more than ``let_go_after`` seconds ago."""
        stale = [k for k, (_, handed) in self._requests.items() if now - handed > self.let_go_after]
        for key in stale:
            request, handed = self._requests.pop(key)
            if self.stats is not None:
                self.stats.inc_value("echo/jobdir/in_flight_let_go")
            if not self._let_go_logged:
                self._let_go_logged = True
                logger.warning(
                    "ECHO request %s, handed to the engine %.0f s ago, never reported done; "
                    "checkpoints no longer save it (more are only counted)",
                    request.url,
                    now - handed,
                )
        return [request for request, _ in self._requests.values()]

    def _drop_predecessor(self, request: Request, generation: int) -> None:
        """Forget the request ``request`` follows: Scrapy's redirect and retry middlewares
        copy a request, one more redirect or retry in its meta, for the same URL or the URL
        it was redirected to from."""
        redirects = request.meta.get("redirect_urls")
        urls = {request.url}
        if isinstance(redirects, list) and redirects:
            urls.add(redirects[-1])
        for key, (earlier, _) in self._requests.items():
            if earlier.url in urls and _generation(earlier) == generation - 1:
                del self._requests[key]
                return


def _generation(request: Request) -> int:
    """Redirects and retries that led to ``request``."""
    meta = request.meta
    return _count(meta.get("redirect_times")) + _count(meta.get("retry_times"))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
