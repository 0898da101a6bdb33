"""What a source response shows: links to pages, and further sources.

The kind of source is read from the response, not guessed from its URL:

======================= ==================================================================
kind                    read by
======================= ==================================================================
``html``                Scrapy's ``LinkExtractor`` (or the spider's ``echo_link_extractor``)
``rss``/``rdf``/``atom`` feedparser (:mod:`scrapy_echo.sources.feeds`)
``json-feed``           the standard JSON parser (:mod:`scrapy_echo.sources.feeds`)
``sitemap``,            Scrapy's ``Sitemap`` (:mod:`scrapy_echo.sources.sitemaps`); an index's
``news-sitemap``,       sitemaps are further sources
``sitemap-index``
``robots``              Scrapy's ``sitemap_urls_from_robots``: its sitemaps are further sources
======================= ==================================================================

A gzip body is unpacked first. Links come back clean (:class:`~scrapy_echo.core.identity
.PageIdentity`), in page order, each once, with the publication time the source states.

A body larger than the bound the crawl sets (``ECHO_MAX_SOURCE_BYTES``), or a gzip body that
unpacks to more, is not read at all (:attr:`SourceContent.too_large`): reading it would take
seconds and memory in proportion, and the sitemap protocol caps a sitemap at 50 MB unpacked
anyway. Of the further sources a response lists, those past a cap are counted, not added
(:attr:`SourceContent.sources_over_limit`).

What a source lists is someone else's word, so what it may add is judged against the URL the
source was asked for, never against where a redirect took it (the redirect's target chooses
that): links of that site (with a site rule), sitemaps on that site (unless cross-site
sitemaps are allowed), and with an address guard (:mod:`scrapy_echo.sources.address_guard`)
neither on a host it refuses. A source a redirect took to a host the guard refuses is not
read at all; one taken to another public site is read as its own site's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from scrapy.http import TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy.utils.response import get_base_url

from scrapy_echo.core.defaults import DEFAULTS
from scrapy_echo.core.identity import PageIdentity, SameSite, site_of
from scrapy_echo.core.unexpected import note_unexpected
from scrapy_echo.sources.address_guard import AddressGuard
from scrapy_echo.sources.feeds import looks_like_json_feed, parse_feed, parse_json_feed
from scrapy_echo.sources.pagination import next_page
from scrapy_echo.sources.published import page_published
from scrapy_echo.sources.sitemaps import (
    UnpackedTooLarge,
    is_gzip,
    looks_like_robots,
    parse_sitemap,
    robots_sitemaps,
    unpack,
)

if TYPE_CHECKING:
    from scrapy.http import Response

logger = logging.getLogger(__name__)

_XML_TYPES = ("xml", "rss", "atom")
_XML_ROOTS = (b"<rss", b"<feed", b"<rdf:", b"<urlset", b"<sitemapindex")
_MAX_BYTES: int = DEFAULTS["ECHO_MAX_SOURCE_BYTES"]
_MAX_SOURCES: int = DEFAULTS["ECHO_MAX_SOURCES_PER_SOURCE"]


@dataclass(frozen=True)
class Outlink:
    url: str  # clean
    published: float | None = None  # epoch seconds, when the source states it


@dataclass
class SourceContent:
    """What one source response showed."""

    kind: str
    links: list[Outlink] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # further sources (clean URLs)
    # When the response says each further source last changed (a sitemap index's lastmod),
    # by clean URL: a moving date is a change signal for that source.
    source_dates: dict[str, float] = field(default_factory=dict)
    bad_urls: int = 0  # links that were not http(s) URLs, or that no rule could clean
    error: str | None = None  # why nothing could be read (a broken gzip body, ...)
    # Where a redirect took the source, and why that is refused: nothing was read.
    landed_refused: str | None = None
    # Links and further sources on hosts the address guard refuses; the first, and why.
    links_refused: int = 0
    sources_refused: int = 0
    first_refusal: str | None = None
    cross_site_sources: int = 0  # sitemaps on other sites, refused
    # Why the body was not read: its size, or that it unpacks to more than the bound.
    too_large: str | None = None
    sources_over_limit: int = 0  # further sources listed past the cap, not added
    # Where an HTML hub continues (:mod:`scrapy_echo.sources.pagination`): part of the
    # source, never one of its links.
    next_page: str | None = None


def read_source(
    response: Response,
    *,
    extractor: Any | None = None,
    identity: PageIdentity | None = None,
    same_site: SameSite | None = None,
    guard: AddressGuard | None = None,
    cross_site_sitemaps: bool = False,
    limit: int = 5000,
    max_sources: int = _MAX_SOURCES,
    max_bytes: int = _MAX_BYTES,
) -> SourceContent:
    """The links (at most ``limit``) and further sources (at most ``max_sources``; those
    past it counted in :attr:`SourceContent.sources_over_limit`) ``response`` shows.

    Judged against the site of the URL the source was asked for (the first of the
    response's redirect chain): with ``same_site``, only the links it allows for that
    site; further sources only on that site (by ``same_site``, else the site alone) unless
    ``cross_site_sitemaps``; with ``guard``, neither on a host it refuses. A response a
    redirect took to a host ``same_site`` or ``guard`` refuses is not read
    (:attr:`SourceContent.landed_refused`), nor one whose body, or a gzip body unpacked,
    is larger than ``max_bytes`` (:attr:`SourceContent.too_large`)."""
    identity = identity or PageIdentity()
    origin = _requested_url(response)
    site = site_of(origin)
    landing = _landing_refused(response.url, origin, site, same_site, guard)
    if landing is not None:
        return SourceContent("off-site", landed_refused=landing)
    if len(response.body) > max_bytes:
        return SourceContent("too-large", too_large=f"{len(response.body)} bytes")
    try:
        raw = _raw_content(response, extractor, max_bytes)
    except UnpackedTooLarge as exc:
        return SourceContent("too-large", too_large=str(exc))
    except (ValueError, RecursionError) as exc:  # (markup no parser can read)
        return SourceContent("unreadable", error=f"{type(exc).__name__}: {exc}"[:200])
    content = SourceContent(raw.kind, error=raw.error)
    base = _base_url(response)
    if raw.kind == "html" and isinstance(response, TextResponse):
        after = next_page(response)
        clean_after = _clean(identity, base, after) if after else None
        if clean_after is not None and not (guard is not None and guard.refusal(clean_after)):
            content.next_page = clean_after
    seen: set[str] = {content.next_page} if content.next_page else set()
    for url, published in raw.links:
        clean = _clean(identity, base, url)
        if clean is None:
            content.bad_urls += 1
        elif clean in seen or (same_site is not None and not same_site.allows(site, clean)):
            continue
        elif _guard_refuses(guard, clean, content):
            content.links_refused += 1
        else:
            seen.add(clean)
            content.links.append(Outlink(clean, published))
            if len(content.links) >= limit:
                break
    # The sitemap protocol lets a robots.txt submit sitemaps on any host; taken up, it would
    # let any site add sources on any other, to be recrawled for ever.
    own_site = same_site or SameSite()
    dates = raw.source_dates or [None] * len(raw.sources)
    added: set[str] = set()
    for url, changed in zip(raw.sources, dates, strict=True):
        clean = _clean(identity, base, url)
        if clean is None:
            content.bad_urls += 1
        elif clean in added:
            continue
        elif not cross_site_sitemaps and not own_site.allows(site, clean):
            content.cross_site_sources += 1
        elif _guard_refuses(guard, clean, content):
            content.sources_refused += 1
        elif len(content.sources) >= max_sources:
            added.add(clean)
            content.sources_over_limit += 1
        else:
            added.add(clean)
            content.sources.append(clean)
            if changed is not None:
                content.source_dates[clean] = changed
    return content


def extract_outlinks(
    response: Response,
    extractor: Any | None,
    *,
    same_site: bool,
    limit: int,
    guard: AddressGuard | None = None,
) -> list[Outlink]:
    """The page links of a source response (:func:`read_source` with the default identity)."""
    rule = SameSite() if same_site else None
    return read_source(
        response, extractor=extractor, same_site=rule, guard=guard, limit=limit
    ).links


def published_time(response: Response) -> float | None:
    """The page's own publication time (epoch seconds) from its metadata, if it states one;
    ``None`` for a page that is not HTML (XML, JSON: Scrapy reads a JSON body as a JSON
    selector, which has no XPath) or whose markup cannot be read."""
    if not isinstance(response, TextResponse) or _is_xml(response, response.body):
        return None
    if _is_json(response):
        return None
    try:
        return page_published(response)
    except (ValueError, RecursionError):  # (markup lxml cannot read: no metadata to use)
        return None


def _is_json(response: Response) -> bool:
    """Whether Scrapy reads ``response`` as JSON (its selector would be a JSON one)."""
    content_type = _content_type(response)
    return content_type.endswith(("/json", "+json")) or type(response).__name__ == "JsonResponse"


@dataclass
class _Raw:
    kind: str
    links: list[tuple[str, float | None]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    source_dates: list[float | None] = field(default_factory=list)  # with sources, or empty
    error: str | None = None


def _raw_content(response: Response, extractor: Any | None, max_bytes: int) -> _Raw:
    """What ``response`` lists, as it gives it; :class:`UnpackedTooLarge` for a gzip body
    that unpacks to more than ``max_bytes``."""
    body = response.body
    if is_gzip(body):
        try:
            body = unpack(body, max_size=max_bytes)
        except UnpackedTooLarge:
            raise
        except ValueError as exc:
            return _Raw("gzip", error=str(exc))
        return _xml_content(body, _content_type(response)) or _Raw("gzip", error="not a sitemap")
    if looks_like_json_feed(body):
        items = parse_json_feed(body)
        if items is not None:
            return _Raw("json-feed", [(item.url, item.published) for item in items])
    if _is_xml(response, body):
        return _xml_content(body, _content_type(response)) or _Raw("xml", error="not a feed")
    if not isinstance(response, TextResponse):
        return _Raw("binary", error="not text")
    if _is_json(response):  # (an API's answer, an {"error": ...}: no links to read)
        return _Raw("json", error="JSON, but not a JSON Feed")
    if _content_type(response).startswith("text/plain") and looks_like_robots(response.text):
        return _Raw("robots", sources=robots_sitemaps(response.body, response.url))
    if extractor is None:
        extractor = LinkExtractor(unique=True)
    return _Raw("html", [(link.url, None) for link in extractor.extract_links(response)])


def _xml_content(body: bytes, content_type: str) -> _Raw | None:
    sitemap = parse_sitemap(body)
    if sitemap is not None:
        entries = [(entry.url, entry.published) for entry in sitemap.entries]
        if sitemap.kind == "sitemap-index":
            return _Raw(
                sitemap.kind,
                sources=[url for url, _ in entries],
                source_dates=[changed for _, changed in entries],
            )
        return _Raw(sitemap.kind, entries)
    feed = parse_feed(body, content_type or "application/xml")
    if feed is not None:
        kind, items = feed
        return _Raw(kind, [(item.url, item.published) for item in items])
    return None


def _requested_url(response: Response) -> str:
    """The URL ``response``'s request was first made for, before any redirect."""
    request = response.request
    redirects = request.meta.get("redirect_urls") if request is not None else None
    return str(redirects[0]) if redirects else response.url


def _landing_refused(
    landed: str, origin: str, site: str, same_site: SameSite | None, guard: AddressGuard | None
) -> str | None:
    """Where a redirect took a source and why that is refused; ``None`` if it is not. A
    public host on another site is read (a feed moved to a feed service lists the site's
    own articles), judged by the site the source was asked for."""
    if landed == origin:
        return None
    refusal = guard.refusal(landed) if guard is not None else None
    return f"{landed} ({refusal})" if refusal is not None else None


def _guard_refuses(guard: AddressGuard | None, url: str, content: SourceContent) -> bool:
    """Whether ``guard`` refuses ``url``; the first refusal is noted in ``content``."""
    refusal = guard.refusal(url) if guard is not None else None
    if refusal is not None and content.first_refusal is None:
        content.first_refusal = f"{url} ({refusal})"
    return refusal is not None


def _base_url(response: Response) -> str:
    """What the response's relative links are relative to (its ``<base href>``, else its URL),
    read once per response: Scrapy reads it through the response's encoding, a third-party
    call that may fail for reasons that have nothing to do with any one link."""
    if not isinstance(response, TextResponse):
        return response.url
    try:
        return get_base_url(response)
    except ValueError:  # a <base href> that is no URL
        return response.url
    except Exception as exc:  # a change in Scrapy or w3lib: counted, logged once
        note_unexpected("outlinks/base_url", exc)
        return response.url


def _clean(identity: PageIdentity, base: str, url: str) -> str | None:
    try:
        clean = identity.clean(urljoin(base, url.strip()))
    except ValueError:  # what urllib and w3lib raise for a bad URL (identity counts the rest)
        return None
    return clean if clean.startswith(("http://", "https://")) else None


def _content_type(response: Response) -> str:
    raw = response.headers.get(b"Content-Type", b"") or b""
    return raw.decode("latin-1").strip().lower()


def _is_xml(response: Response, body: bytes) -> bool:
    if any(kind in _content_type(response) for kind in _XML_TYPES):
        return True
    head = body[:512].lstrip()
    if head.startswith(b"<?xml"):
        return True
    return head.startswith(_XML_ROOTS)
