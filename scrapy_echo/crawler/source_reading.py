"""Reading a source response, on a thread when it is big.

Reading a 50,000-URL sitemap (7 MB) takes about a second: lxml builds the tree quickly, but
Scrapy's ``Sitemap`` walks it and each ``lastmod`` is parsed in Python. A 20,000-item RSS
feed takes three, feedparser being pure Python (``benchmarks/bench_source_parse.py``). On the
reactor, every download, timer and Redis round trip of the crawl would wait that long. So a
body of :data:`THREAD_BYTES` or more, and any gzip body (a few hundred kB unpack to 50 MB),
is read on the reactor's thread pool, at most :data:`PARALLEL` at a time; a smaller one is
read inline, where it costs less than the trip to a thread. Either way it is the same
:func:`~scrapy_echo.sources.outlinks.read_source` with the same rules, so the links, the
further sources and their order are the same.

A read on a thread still holds the GIL for its pure-Python parts, but Python hands the GIL
over every few milliseconds (``sys.getswitchinterval()``): the reactor waits that long, not
the whole read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scrapy.utils.defer import maybe_deferred_to_future

from scrapy_echo.sources.outlinks import SourceContent, read_source
from scrapy_echo.sources.sitemaps import is_gzip
from scrapy_echo.sources.zones import UnknownZones, unknown_zones

if TYPE_CHECKING:
    from scrapy.http import Response
    from twisted.internet.defer import DeferredSemaphore

    from scrapy_echo.core.identity import PageIdentity, SameSite
    from scrapy_echo.sources.address_guard import AddressGuard

# A 64 KiB feed takes feedparser about 50 ms, a sitemap of that size under 10 ms; a trip to
# the thread pool and back costs well under a millisecond.
THREAD_BYTES = 64 * 1024
# Reads on threads at once: the reactor's pool also resolves host names (Scrapy's threaded
# resolver), which must not queue behind a burst of big sitemaps.
PARALLEL = 2


@dataclass(frozen=True)
class ReadRules:
    """What :func:`~scrapy_echo.sources.outlinks.read_source` is told for one response, taken
    on the reactor (the spider and the address guard live there)."""

    extractor: Any | None
    identity: PageIdentity
    same_site: SameSite | None
    guard: AddressGuard
    cross_site_sitemaps: bool
    max_links: int
    max_sources: int
    max_bytes: int


@dataclass(frozen=True)
class SourceReading:
    content: SourceContent
    zones: UnknownZones  # dates read with a zone name RFC 822 does not define
    on_thread: bool = False


def read(response: Response, rules: ReadRules, *, on_thread: bool = False) -> SourceReading:
    """Read ``response`` here, on the calling thread."""
    with unknown_zones() as zones:
        content = read_source(
            response,
            extractor=rules.extractor,
            identity=rules.identity,
            same_site=rules.same_site,
            guard=rules.guard,
            cross_site_sitemaps=rules.cross_site_sitemaps,
            limit=rules.max_links,
            max_sources=rules.max_sources,
            max_bytes=rules.max_bytes,
        )
    return SourceReading(content, zones, on_thread)


def goes_to_a_thread(body: bytes, max_bytes: int) -> bool:
    """Whether a source body is big enough to read on a thread (one over ``max_bytes`` is
    refused unread, at once)."""
    return len(body) <= max_bytes and (len(body) >= THREAD_BYTES or is_gzip(body))


class SourceReader:
    """Reads source responses, the big ones on the reactor's thread pool."""

    def __init__(self) -> None:
        self._slots: DeferredSemaphore | None = None  # (made on the reactor, at first use)

    async def read(self, response: Response, rules: ReadRules) -> SourceReading:
        if not goes_to_a_thread(response.body, rules.max_bytes):
            return read(response, rules)
        from twisted.internet.defer import DeferredSemaphore  # (no reactor at import time)
        from twisted.internet.threads import deferToThread

        if self._slots is None:
            self._slots = DeferredSemaphore(PARALLEL)
        reading = self._slots.run(deferToThread, read, response, rules, on_thread=True)
        return await maybe_deferred_to_future(reading)


__all__ = ["PARALLEL", "THREAD_BYTES", "ReadRules", "SourceReader", "SourceReading", "read"]
