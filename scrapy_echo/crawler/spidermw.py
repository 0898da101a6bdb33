"""Spider middleware: the links of source responses, and the crawl of each new page.

On a source response it takes the source's outlinks (:mod:`scrapy_echo.sources.outlinks`) and
yields a probe request for each. It sits at 950, next to the spider, so the probes pass
through Scrapy's own middlewares (depth, referer, URL length) and the project's, as the
spider's requests do; :mod:`scrapy_echo.crawler.link_collector`, at the far end, gathers what
they made of them into the crawl's event. The core then keeps the links never seen before,
records the crawl's yield for ``λ``, and queues each new page, tagged with its source and
estimated appearance time: the midpoint of the source's last two crawls, or the time the
source itself states (a feed's ``pubDate``) when it falls in that window. On a new page's
response it tells the learner the page was crawled, with the page's own published time when
it states one that fits. The spider's callbacks still get every response.

New pages go to the spider's ``parse`` unless the spider names another callback in
``echo_page_callback``; a spider may also set ``echo_link_extractor`` (a ``LinkExtractor``).

A big source body is read on a thread (:mod:`scrapy_echo.crawler.source_reading`), one over
``ECHO_MAX_SOURCE_BYTES`` not at all. The sources a response lists (a sitemap index's
sitemaps, a robots.txt's) are one level deeper than the source that listed them, and past
``ECHO_MAX_SOURCE_DEPTH`` are not added: an index listing indexes listing indexes, however
made, ends there.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from scrapy.http import TextResponse

from scrapy_echo.core.events import MAX_ALIASES, PageFetched, SourceAdded, SourceFailed
from scrapy_echo.core.identity import fold_scheme
from scrapy_echo.core.unexpected import note_unexpected
from scrapy_echo.crawler.echo_requests import link_request
from scrapy_echo.crawler.link_batch import LinkBatch
from scrapy_echo.crawler.own_signals import CLOCK_SKEW, OwnSignals
from scrapy_echo.crawler.runtime import EchoComponent
from scrapy_echo.crawler.source_reading import ReadRules, SourceReader, SourceReading, read
from scrapy_echo.model.refetch.content import digest
from scrapy_echo.sources.outlinks import SourceContent, published_time
from scrapy_echo.sources.zones import UnknownZones, unknown_zones

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.http import Response

logger = logging.getLogger(__name__)

_MAX_ALIAS_LENGTH = 2048  # a longer "canonical" URL is junk, and would not fit an event


class EchoSpiderMiddleware(EchoComponent):
    _unreadable_logged: set[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._unreadable_logged = set()
        self._own_signals = OwnSignals()
        self._warned: set[str] = set()  # conditions logged once, then only counted
        self._reader = SourceReader()

    # (The link collector, last in the chain, marks each response done.) What ECHO makes of a
    # response never keeps the spider's own output from the engine: if it fails, the failure
    # is counted and recorded, and the callback's items and requests go on all the same.
    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterator[Any]:
        try:
            requests = self.handle_response(response)
        except Exception as exc:
            requests = self._not_handled(response, exc)
        yield from requests
        yield from result

    # (What Scrapy calls: its spider middleware chain is asynchronous throughout.)
    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        try:
            requests = await self.handle_response_async(response)
        except Exception as exc:
            requests = self._not_handled(response, exc)
        for request in requests:
            yield request
        async for item in result:
            yield item

    def _not_handled(self, response: Response, exc: Exception) -> list[Request]:
        """``response`` could not be read for ECHO (a bug: its parsers return "unreadable"
        rather than raise): counted and logged (:mod:`scrapy_echo.core.unexpected`); a
        source's crawl is recorded failed, so it backs off and, failing on, retires."""
        note_unexpected("spider_middleware", exc)
        echo = response.meta.get("echo")
        if isinstance(echo, dict) and echo.get("kind") == "source" and "hub_page" not in echo:
            url = str(echo.get("url", response.url))
            why = f"unreadable ({type(exc).__name__})"
            self.runtime.observe(SourceFailed(url, self.runtime.clock(), why))
        return []

    def handle_response(self, response: Response) -> list[Request]:
        """Record what ``response`` tells ECHO; the probes for a source's links. A source is
        read here, whatever its size."""
        echo = response.meta.get("echo")
        if not isinstance(echo, dict):
            return []
        if echo.get("kind") == "source":
            return self._source_response(response, echo, read(response, self._read_rules()))
        if echo.get("kind") in ("page", "refresh"):
            self._page_response(response, echo)
        return []

    async def handle_response_async(self, response: Response) -> list[Request]:
        """:meth:`handle_response`, a big source read on a thread
        (:mod:`~scrapy_echo.crawler.source_reading`): the same requests, in the same order."""
        echo = response.meta.get("echo")
        if isinstance(echo, dict) and echo.get("kind") == "source":
            reading = await self._reader.read(response, self._read_rules())
            return self._source_response(response, echo, reading)
        return self.handle_response(response)

    def _read_rules(self) -> ReadRules:
        config = self.runtime.config
        return ReadRules(
            extractor=getattr(self.crawler.spider, "echo_link_extractor", None),
            identity=config.identity,
            same_site=config.site_rule,
            guard=self.runtime.address_guard,
            cross_site_sitemaps=config.cross_site_sitemaps,
            max_links=config.max_links_per_source,
            max_sources=config.max_sources_per_source,
            max_bytes=config.max_source_bytes,
        )

    def _source_response(
        self, response: Response, echo: dict[str, Any], reading: SourceReading
    ) -> list[Request]:
        content = reading.content
        self._count_unknown_zones(reading.zones, response.url)
        if reading.on_thread:
            self.inc_stat("echo/sources/read_on_thread")
        source = str(echo.get("url", response.url))
        if content.too_large is not None:
            self._too_large(source, content.too_large)
            return []
        if content.landed_refused is None:
            self.inc_stat(f"echo/sources/kind/{content.kind}")
        self._count_refused(source, content)
        if content.bad_urls:
            self.inc_stat("echo/links/bad_url", content.bad_urls)
        if content.error is not None:
            self.inc_stat("echo/sources/unreadable")
            if response.url not in self._unreadable_logged:  # once per source, then counted
                self._unreadable_logged.add(response.url)
                logger.warning("ECHO source %s unreadable (%s)", response.url, content.error)
        depth = _depth(echo) + 1  # (of the sources it lists)
        for url in self._sources_to_add(source, depth, content):
            self.runtime.observe(SourceAdded(url, depth))
        runtime = self.runtime
        fetched = float(echo.get("fetched", runtime.clock()))
        self._dates_moved(content, fetched, response.url)
        links = [(link.url, link.published) for link in content.links]
        # Where the state is, a link seen before needs no probe (it is no new page); a
        # distributed worker without it probes every link, and the planner sorts them out.
        known = runtime.state.links_seen([url for url, _ in links]) if runtime.holds_state else []
        index, page = echo.get("source"), echo.get("hub_page", 1)
        shown = None
        if isinstance(index, int) and isinstance(page, int) and runtime.holds_state:
            urls = [url for url, _ in links]
            shown = runtime.core.next_page_boundary(index, page, urls, known)
        if shown is not None:
            # What a next page lists past a link the hub showed before is older still.
            links, known = links[: shown + 1], known[: shown + 1]
        treated: list[str | None] = ["" if seen else None for seen in known] or [None] * len(links)
        batch = LinkBatch(
            source,
            fetched,
            links,
            echo.get("etag"),
            echo.get("lm"),
            treated,
            continued="hub_page" in echo,
        )
        if not runtime.holds_state and content.next_page is not None and content.links:
            # The planner decides whether the crawl reads on: it knows which links are new.
            batch.next_page = content.next_page
            batch.hub_page = page if isinstance(page, int) and page >= 1 else 1
        runtime.link_batches[id(response)] = batch  # (the collector sends its event)
        callback = runtime.page_callback()
        requests = [
            link_request(url, i, callback) for i, (url, _) in enumerate(links) if treated[i] is None
        ]
        more = self._next_page(response, echo, content, [url for url, _ in links], known, shown)
        return requests if more is None else [*requests, more]

    def _next_page(
        self,
        response: Response,
        echo: dict[str, Any],
        content: SourceContent,
        links: list[str],
        known: list[bool],
        shown: int | None,
    ) -> Request | None:
        """The request for the hub's next page, when the pages read so far show that the
        hub overflowed since its last crawl (:mod:`scrapy_echo.core.hub_paging`, the rule
        the replay follows too): what it pushed down is there. Not past
        ``ECHO_MAX_NEXT_PAGES``; a distributed worker without the state, which does not know
        which links are new, leaves it to the planner (``SourceFetched.next_page``)."""
        runtime = self.runtime
        index = echo.get("source")
        if content.next_page is None or not content.links or not runtime.holds_state:
            return None
        if not isinstance(index, int) or not 0 <= index < len(runtime.state.sources):
            return None
        page = echo.get("hub_page", 1)
        if not isinstance(page, int):
            return None
        verdict = runtime.core.reads_on(
            index, page, links, known, shown, most=runtime.config.max_next_pages
        )
        if verdict != "next":
            if verdict == "cut":
                self.inc_stat("echo/sources/next_pages_cut")
            return None
        self.inc_stat("echo/sources/next_pages")
        meta = {**echo, "hub_page": page + 1}
        meta.pop("fetched", None)
        return response.request.replace(  # type: ignore[union-attr]
            url=content.next_page, headers={}, meta={"echo": meta}, dont_filter=True
        )

    def _sources_to_add(self, source: str, depth: int, content: SourceContent) -> list[str]:
        """The sources ``source``'s response lists (a sitemap index's sitemaps, a
        robots.txt's) that it adds at ``depth``: none past ``ECHO_MAX_SOURCE_DEPTH``. Those
        past the depth, or past ``ECHO_MAX_SOURCES_PER_SOURCE`` in one response, are counted
        and the first of each logged."""
        config = self.runtime.config
        if content.sources_over_limit:
            self._count(
                "echo/sources/over_limit",
                content.sources_over_limit,
                "ECHO source %s lists %d sources more than ECHO_MAX_SOURCES_PER_SOURCE (%d): "
                "not added; more are only counted (echo/sources/over_limit)",
                source,
                content.sources_over_limit,
                config.max_sources_per_source,
            )
        if not content.sources:
            return []
        if depth > config.max_source_depth:
            self._count(
                "echo/sources/too_deep",
                len(content.sources),
                "ECHO source %s is at level %d of sources listing sources (ECHO_MAX_SOURCE_DEPTH "
                "is %d): the %d sources it lists, such as %s, are not added; more are only "
                "counted (echo/sources/too_deep)",
                source,
                depth - 1,
                config.max_source_depth,
                len(content.sources),
                content.sources[0],
            )
            return []
        self.inc_stat("echo/sources/found", len(content.sources))
        return content.sources

    def _too_large(self, source: str, why: str) -> None:
        """A response larger than ``ECHO_MAX_SOURCE_BYTES`` (or that unpacks to more): not
        read, and a failed crawl of ``source``.

        A failure, not a crawl that found nothing: nothing was read, and a crawl that found
        nothing would tell the learner the source published nothing since its last crawl,
        lowering its rate for a reason that is not one. A failure tells the learner nothing,
        backs the source off (fetching a body this size is not free), and retires it after
        ``ECHO_SOURCE_MAX_FAILURES`` in a row: a source that is always too large stops
        costing, one that was so once recovers at its next crawl."""
        self.inc_stat("echo/sources/failed")
        limit = self.runtime.config.max_source_bytes
        self._count(
            "echo/sources/too_large",
            1,
            "ECHO source %s not read: %s, over ECHO_MAX_SOURCE_BYTES (%d); a failed crawl; "
            "more are only counted (echo/sources/too_large)",
            source,
            why,
            limit,
        )
        self.runtime.observe(SourceFailed(source, self.runtime.clock(), f"too large: {why}"))

    def _count_refused(self, source: str, content: SourceContent) -> None:
        """Count what ``source``'s response was refused (each kind logged once, then only
        counted; a source redirected to a refused host once per source)."""
        if content.landed_refused is not None:
            self.inc_stat("echo/sources/redirected_refused")
            self._warn_once(
                f"refused landing {source}",
                "ECHO source %s redirected to %s: not read (ECHO_ALLOWED_PRIVATE_HOSTS "
                "may allow a private host)",
                source,
                content.landed_refused,
            )
        refused = content.links_refused + content.sources_refused
        if content.links_refused:
            self.inc_stat("echo/links/address_refused", content.links_refused)
        if content.sources_refused:
            self.inc_stat("echo/sources/address_refused", content.sources_refused)
        if refused:
            self._warn_once(
                "address",
                "ECHO refused %d links or sitemaps of %s, such as %s; more are only counted",
                refused,
                source,
                content.first_refusal,
            )
        if content.cross_site_sources:
            self._count(
                "echo/sources/cross_site_refused",
                content.cross_site_sources,
                "ECHO refused %d sitemaps on other sites than %s's (ECHO_CROSS_SITE_SITEMAPS "
                "allows them); more are only counted",
                content.cross_site_sources,
                source,
            )

    def _warn_once(self, key: str, message: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            logger.warning(message, *args)

    def _count(self, stat: str, count: int, message: str, *args: Any) -> None:
        """Count ``count`` under ``stat``; the first time, log ``message``."""
        self.inc_stat(stat, count)
        self._warn_once(stat, message, *args)

    def _dates_moved(self, content: SourceContent, fetched: float, where: str) -> None:
        """The change signals a source response carries itself: a sitemap index's ``lastmod``
        for a sitemap it lists, and (on the machine holding the state) a dated link to a
        known source, such as a sitemap or feed listing section pages. Each date counts
        once, when it moves past the last one seen for that URL; a date ahead of the clock
        neither hides the later ones nor counts twice (:mod:`scrapy_echo.crawler.own_signals`).
        The core drops a signal if the source was crawled since."""
        dated = dict(content.source_dates)
        runtime = self.runtime
        if runtime.holds_state:
            known = runtime.state.source_ids
            for link in content.links:  # (clean already: their key is the folded URL)
                if link.published is not None and fold_scheme(link.url) in known:
                    dated[link.url] = link.published
        moved = self._own_signals.moved(dated, fetched)
        if moved.ahead:
            url, changed = next(iter(moved.ahead.items()))
            self._count(
                "echo/signals/own/future",
                len(moved.ahead),
                "ECHO source %s dates %s %.0f s in the future (more than %g s ahead of the "
                "clock): such dates are change signals, never the latest date seen; more "
                "are only counted (echo/signals/own/future)",
                where,
                url,
                changed - fetched,
                CLOCK_SKEW,
            )
        if moved.signals:
            self.inc_stat("echo/signals/own", len(moved.signals))
            runtime.signal_intake.add(moved.signals)

    def _count_unknown_zones(self, zones: UnknownZones, where: str) -> None:
        """Dates whose zone name RFC 822 does not define, read as UTC: counted, the first
        logged (:mod:`scrapy_echo.sources.zones`)."""
        if zones.count:
            self._count(
                "echo/dates/unknown_zone",
                zones.count,
                "ECHO read a date on %s with the time zone %r, which RFC 822 does not define, "
                "as UTC (at most 14 h off); more are only counted (echo/dates/unknown_zone)",
                where,
                zones.first,
            )

    def _page_response(self, response: Response, echo: dict[str, Any]) -> None:
        appeared = float(echo["appeared"])
        start, end = echo.get("window", (appeared, appeared))
        with unknown_zones() as zones:
            stated = published_time(response)
        self._count_unknown_zones(zones, response.url)
        if stated is not None and start <= stated <= end:
            appeared = stated
            self.inc_stat("echo/pages/published_time_used")
        source_url = echo["source_url"]
        aliases = page_aliases(response, str(echo["page"]))
        if aliases:
            self.inc_stat("echo/pages/aliases", len(aliases))
        refresh = echo.get("kind") == "refresh"
        event = PageFetched(
            str(echo["page"]),
            str(source_url),
            appeared,
            float(echo.get("fetched", self.runtime.clock())),
            aliases,
            content_digest(response),
            refresh,
        )
        self.runtime.observe(event)
        self.inc_stat("echo/pages/refreshed" if refresh else "echo/pages/crawled")


def _depth(echo: dict[str, Any]) -> int:
    """The depth a source request carries (0 from a build that sent none)."""
    depth = echo.get("depth", 0)
    return depth if type(depth) is int and depth >= 0 else 0


def content_digest(response: Response) -> str:
    """What tells whether a page changed between two fetches: a digest of its body, and its
    ``ETag`` if it sends one (:mod:`scrapy_echo.model.refetch.content` compares two fetches by ETag
    where both have one, else by body; a page that embeds the time or rotating ads and sends
    no ETag changes at every fetch: the refresh lane then learns that its site always
    changes)."""
    etag = response.headers.get(b"ETag")
    body = hashlib.blake2b(response.body, digest_size=8).hexdigest()
    return digest(body, etag.decode("latin-1")[:200] if etag else None)


def page_aliases(response: Response, page: str) -> tuple[str, ...]:
    """The page's other URLs: the redirects it went through, where it landed, and its
    ``rel=canonical`` link (absolute http(s) URLs only, at most ``MAX_ALIASES``)."""
    found = [str(url) for url in response.meta.get("redirect_urls", ())]
    found.append(response.url)
    html = isinstance(response, TextResponse) and response.body.lstrip()[:5] != b"<?xml"
    if html and type(response).__name__ != "JsonResponse":
        try:
            canonical = response.xpath("//link[@rel='canonical'][1]/@href").get()
        except (ValueError, RecursionError):  # not HTML after all
            canonical = None
        if canonical:
            found.append(response.urljoin(canonical.strip()))
    aliases: list[str] = []
    for url in found:
        usable = url.startswith(("http://", "https://")) and len(url) <= _MAX_ALIAS_LENGTH
        if usable and url != page and url not in aliases:
            aliases.append(url)
    return tuple(aliases[:MAX_ALIASES])
