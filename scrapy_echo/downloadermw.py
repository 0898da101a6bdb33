"""Downloader middleware: conditional source crawls, fetch times, per-source outcomes.

- A source request carries the validators of its last response (``If-None-Match`` /
  ``If-Modified-Since``); a ``304`` is recorded as a crawl that found nothing new and goes no
  further (``IgnoreRequest``, which Scrapy does not log as an error).
- Every ECHO request gets its fetch time in ``request.meta["echo"]["fetched"]``.
- A source crawl that fails (an exception after retries, or an error status) is recorded, and
  the source backs off, doubling per failure in a row, so a broken source does not eat the
  budget.

It sits at 60, just inside Scrapy's offsite filter: it sees each response after retries and
redirects are resolved, so one crawl is one outcome.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest

from scrapy_echo.runtime import EchoComponent

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class EchoDownloaderMiddleware(EchoComponent):
    def process_request(self, request: Request) -> None:
        source = _source_of(request)
        if source is None:
            return
        status = self.state.sources[source]
        if status.etag and b"If-None-Match" not in request.headers:
            request.headers[b"If-None-Match"] = status.etag
        if status.last_modified and b"If-Modified-Since" not in request.headers:
            request.headers[b"If-Modified-Since"] = status.last_modified

    def process_response(self, request: Request, response: Response) -> Response:
        now = self.runtime.clock()
        self.runtime.throughput.add(now)
        echo = request.meta.get("echo")
        if isinstance(echo, dict):
            echo["fetched"] = now
        source = _source_of(request)
        if source is None:
            return response
        status = self.state.sources[source]
        if response.status == 304:
            self.state.source_not_modified(source, now)
            self._inc("echo/sources/not_modified")
            raise IgnoreRequest(f"ECHO source not modified: {request.url}")
        if response.status >= 400:
            self._failed(source, request, f"HTTP {response.status}")
            return response
        etag = response.headers.get(b"ETag")
        modified = response.headers.get(b"Last-Modified")
        status.etag = etag.decode("latin-1") if etag else None
        status.last_modified = modified.decode("latin-1") if modified else None
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        source = _source_of(request)
        if source is not None and not isinstance(exception, IgnoreRequest):
            self._failed(source, request, type(exception).__name__)

    def _failed(self, source: int, request: Request, why: str) -> None:
        backoff = self.state.source_failed(source, self.runtime.clock())
        self._inc("echo/sources/failed")
        logger.info(
            "ECHO source %s failed (%s, %d in a row); next try in %.0f s",
            request.url,
            why,
            self.state.sources[source].failures,
            backoff,
        )


def _source_of(request: Request) -> int | None:
    echo: Any = request.meta.get("echo")
    if isinstance(echo, dict) and echo.get("kind") == "source":
        return int(echo["source"])
    return None
