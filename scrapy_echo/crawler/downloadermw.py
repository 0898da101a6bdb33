"""Downloader middleware: fetch times and per-source outcomes.

- Every ECHO request gets its fetch time in ``request.meta["echo"]["fetched"]``, and a source
  response's validators (``ETag``, ``Last-Modified``) go there too, for the next conditional
  crawl (the scheduler sends them as ``If-None-Match`` / ``If-Modified-Since``).
- A ``304`` is recorded as a crawl that found nothing new and goes no further
  (``IgnoreRequest``, which Scrapy does not log as an error).
- A source crawl that fails (an exception after retries, or an error status) is recorded, and
  the source backs off on its own scale (its planned interval, doubling per failure in a
  row; never less than a 429's or 503's ``Retry-After``), so a broken source does not eat the
  budget and one whose host comes back is crawled again within a few intervals.
- A request robots.txt forbids (Scrapy's ``RobotsTxtMiddleware``, with ``ROBOTSTXT_OBEY``) was
  never sent: its budget slot is given back, and a forbidden source is asked again only after
  ``ECHO_FAILURE_BACKOFF_MAX``, without counting a failure.
- A source request may download at most ``ECHO_MAX_SOURCE_BYTES`` (Scrapy's
  ``download_maxsize``, when ``DOWNLOAD_MAXSIZE`` allows more): a body past that is never read
  (:mod:`scrapy_echo.crawler.spidermw` would refuse it anyway), so Scrapy stops the download
  there and the crawl fails, instead of holding up to ``DOWNLOAD_MAXSIZE`` (1 GiB) in memory.
  Scrapy's ``HttpCompressionMiddleware`` stops unpacking a ``Content-Encoding`` body there too.
- A redirect of ECHO's own request to a host the address guard refuses
  (:mod:`scrapy_echo.sources.address_guard`: link-local, metadata, private or loopback but
  not allowed) is not followed (``IgnoreRequest``): the redirect's target, not the crawl,
  chose that host. For a source it counts as a failed crawl.

It sits at 60, just inside Scrapy's offsite filter: it sees each response after retries and
redirects are resolved, so one crawl is one outcome.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy.exceptions import DownloadCancelledError, IgnoreRequest
from scrapy.utils.defer import maybe_deferred_to_future

from scrapy_echo.core.events import PageFailed, SourceBlocked, SourceFailed, SourceNotModified
from scrapy_echo.core.pages import NewPage
from scrapy_echo.core.unexpected import note_unexpected
from scrapy_echo.crawler.pushback import REFUSALS, retry_after_seconds
from scrapy_echo.crawler.runtime import EchoComponent

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

logger = logging.getLogger(__name__)


class EchoDownloaderMiddleware(EchoComponent):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused_kinds: set[str] = set()  # of requests whose redirect was refused
        scrapy_bound = self.crawler.settings.getint("DOWNLOAD_MAXSIZE")
        echo_bound = self.runtime.config.max_source_bytes
        # A smaller bound of Scrapy's stands (0: Scrapy sets none).
        self._source_maxsize = None if 0 < scrapy_bound <= echo_bound else echo_bound

    async def process_request(self, request: Request) -> None:
        await self._resolves_allowed(request)
        self.prepare(request)

    async def _resolves_allowed(self, request: Request) -> None:
        """``IgnoreRequest`` if ``request``'s host is a name that resolves to an address
        the crawl may not reach (private, loopback, link-local, a metadata service) and is
        not a name it allows (:meth:`AddressGuard.resolved_refusal`). Every request of the
        crawl passes here, robots.txt's and redirects' too. The answer comes from the
        crawl's resolver, whose cache the download then uses; a name that does not resolve
        is left to fail as the download fails."""
        host = urlsplit(request.url).hostname
        if not host or _is_address(host):
            return  # (an address is judged where a URL is checked, as it is written)
        from twisted.internet import reactor as installed

        reactor: Any = installed  # (zope interfaces do not type-check as classes)
        try:
            answer = await maybe_deferred_to_future(reactor.resolve(host))
        except Exception:  # (a name that does not resolve: the download reports it)
            return
        refusal = self.runtime.address_guard.resolved_refusal(request.url, str(answer))
        if refusal is None:
            return
        self.inc_stat("echo/requests/resolved_refused")
        if "resolved" not in self._refused_kinds:
            self._refused_kinds.add("resolved")
            logger.warning("ECHO refused a request to %s: %s; more are only counted",
                           request.url, refusal)  # fmt: skip
        echo = request.meta.get("echo")
        if isinstance(echo, dict) and echo.get("kind") == "source" and "hub_page" not in echo:
            self._failed(str(echo.get("url", request.url)), request, refusal)
        raise IgnoreRequest(f"ECHO refused {request.url}: {refusal}")

    def prepare(self, request: Request) -> None:
        """What ECHO does to a request before it is sent (``download_maxsize`` for a source;
        a redirect to a host the address guard refuses is not followed: ``IgnoreRequest``)."""
        echo = request.meta.get("echo")
        if not isinstance(echo, dict):
            return
        if echo.get("kind") == "source" and self._source_maxsize is not None:
            request.meta.setdefault("download_maxsize", self._source_maxsize)
        if not request.meta.get("redirect_urls"):
            return
        refusal = self.runtime.address_guard.refusal(request.url)
        if refusal is None:
            return
        kind = str(echo.get("kind"))
        self.inc_stat("echo/redirects/refused")
        self.inc_stat(f"echo/redirects/refused/{kind}")
        if kind not in self._refused_kinds:  # once per kind of request, then counted
            self._refused_kinds.add(kind)
            logger.warning("ECHO refused a redirect of a %s request to %s (%s); more are only "
                           "counted", kind, request.url, refusal)  # fmt: skip
        if kind == "source":
            self._failed(str(echo.get("url", request.url)), request, "redirected to a refused host")
        raise IgnoreRequest(f"ECHO refused a redirect to {request.url}: {refusal}")

    def process_response(self, request: Request, response: Response) -> Response:
        now = self.runtime.clock()
        # In distributed mode the planner counts every worker's responses, from their events.
        if self.runtime.transport is None:
            self.runtime.throughput.add(now)
        echo = request.meta.get("echo")
        if not isinstance(echo, dict):
            return response
        echo["fetched"] = now
        if echo.get("kind") == "page" and response.status >= 400:
            asked = None
            if response.status in REFUSALS:
                asked = retry_after_seconds(response.headers.get(b"Retry-After"), now=time.time())
            self._page_failed(request, echo, f"HTTP {response.status}", asked)
            return response
        if echo.get("kind") != "source":
            return response
        if "hub_page" in echo:  # a hub's next page: part of a crawl that was recorded already
            if response.status >= 300:
                self.inc_stat("echo/sources/next_page_failed")
            return response
        url = str(echo.get("url", request.url))
        if response.status == 304:
            self.runtime.observe(SourceNotModified(url, now))
            self.inc_stat("echo/sources/not_modified")
            self.runtime.done(request)
            raise IgnoreRequest(f"ECHO source not modified: {request.url}")
        if response.status >= 400:
            asked = None
            if response.status in REFUSALS:
                header = response.headers.get(b"Retry-After")
                asked = retry_after_seconds(header, now=time.time())
            self._failed(url, request, f"HTTP {response.status}", asked)
            return response
        etag = response.headers.get(b"ETag")
        modified = response.headers.get(b"Last-Modified")
        echo["etag"] = etag.decode("latin-1") if etag else None
        echo["lm"] = modified.decode("latin-1") if modified else None
        return response

    def process_exception(self, request: Request, exception: Exception) -> None:
        echo: Any = request.meta.get("echo")
        ignored = isinstance(exception, IgnoreRequest)  # offsite, robots.txt: not a failure
        kind = echo.get("kind") if isinstance(echo, dict) else None
        next_page = kind == "source" and "hub_page" in echo
        if ignored and kind and "robots.txt" in str(exception):
            if next_page:  # (its budget back; the source itself was read)
                if self.runtime.refund is not None:
                    self.runtime.refund()
                self.inc_stat("echo/sources/next_page_blocked")
            else:
                self._forbidden(request, kind, str(echo.get("url", request.url)))
        elif next_page:
            self.inc_stat("echo/sources/next_page_failed")  # (the crawl was recorded)
        elif not ignored and kind == "page":
            self._page_failed(request, echo, type(exception).__name__)
        elif not ignored and kind == "source":
            why = type(exception).__name__
            if isinstance(exception, DownloadCancelledError):  # (past download_maxsize)
                self.inc_stat("echo/sources/too_large")
                why = f"too large: over download_maxsize ({request.meta.get('download_maxsize')})"
            self._failed(str(echo.get("url", request.url)), request, why)
        # The request is finished either way (retries are done before it gets here).
        self.runtime.done(request)

    def _page_failed(
        self, request: Request, echo: dict[str, Any], why: str, retry_after: float | None = None
    ) -> None:
        """A new page's fetch failed (after Scrapy's retries): it is tried again later, a
        few times (:mod:`scrapy_echo.core.page_retries`), rather than lost with its link
        seen."""
        try:
            page = NewPage.from_meta(echo, request.url, str(echo.get("extras", "")))
        except (KeyError, TypeError, ValueError) as exc:  # (meta a spider middleware broke)
            note_unexpected("page_failed", exc)
            return
        self.inc_stat("echo/pages/failed")
        now = self.runtime.clock()
        self.runtime.observe(
            PageFailed(page.url, page.source_url, page.appeared, now, why, page.window,
                       page.discovered, page.extras, retry_after)
        )  # fmt: skip

    def _forbidden(self, request: Request, kind: str, url: str) -> None:
        if self.runtime.refund is not None:
            self.runtime.refund()
        self.inc_stat(f"echo/{kind}s/robots_blocked")
        if kind == "source":
            self.runtime.observe(SourceBlocked(url, self.runtime.clock()))

    def _failed(
        self, url: str, request: Request, why: str, retry_after: float | None = None
    ) -> None:
        self.runtime.observe(SourceFailed(url, self.runtime.clock(), why, retry_after))
        self.inc_stat("echo/sources/failed")


def _is_address(host: str) -> bool:
    """Whether ``host`` is an IP address as written (never sent to DNS)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.replace(".", "").isdigit()  # (inet_aton's forms: judged as written)
    return True
