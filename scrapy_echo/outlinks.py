"""Links out of a source response (HTML hubs, RSS/Atom feeds, sitemaps) and a page's own
published time.

HTML goes through Scrapy's ``LinkExtractor`` (lxml), so a spider can pass its own
(``echo_link_extractor``); feeds and sitemaps are read with lxml's XML parser, with entity
resolution and network access off. Links come back canonical (:func:`canonical_url`), in page
order, each once, with the time the feed says the item was published when it says one.
"""

from __future__ import annotations

import email.utils
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from lxml import etree
from scrapy.http import TextResponse
from scrapy.linkextractors import LinkExtractor

from scrapy_echo.urls import canonical_url, site_of

if TYPE_CHECKING:
    from scrapy.http import Response

logger = logging.getLogger(__name__)

_XML_TYPES = (b"xml", b"rss", b"atom")
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, recover=True, huge_tree=False)
_ITEM_TAGS = {"item", "entry", "url"}  # RSS, Atom, sitemap
_DATE_TAGS = {"pubDate", "published", "updated", "lastmod", "date", "publication_date"}
_PUBLISHED_XPATHS = (
    "//meta[@property='article:published_time']/@content",
    "//meta[@itemprop='datePublished']/@content",
    "//meta[@name='date']/@content",
    "//time[@datetime][1]/@datetime",
)


@dataclass(frozen=True)
class Outlink:
    url: str  # canonical
    published: float | None = None  # epoch seconds, when the source states it


def extract_outlinks(
    response: Response, extractor: Any | None, *, same_site: bool, limit: int
) -> list[Outlink]:
    """The links a source response shows, at most ``limit``; ``[]`` for non-text bodies."""
    if not isinstance(response, TextResponse):
        return []
    if _looks_like_xml(response):
        links = _feed_links(response)
    else:
        if extractor is None:
            extractor = LinkExtractor(unique=True)
        links = [Outlink(canonical_url(link.url)) for link in extractor.extract_links(response)]
    if same_site:
        site = site_of(response.url)
        links = [link for link in links if site_of(link.url) == site]
    seen: set[str] = set()
    unique = []
    for link in links:
        if link.url not in seen and link.url.startswith(("http://", "https://")):
            seen.add(link.url)
            unique.append(link)
    return unique[:limit]


def published_time(response: Response) -> float | None:
    """The page's own published time (epoch seconds) from its metadata, if it states one."""
    if not isinstance(response, TextResponse) or _looks_like_xml(response):
        return None
    for xpath in _PUBLISHED_XPATHS:
        value = response.xpath(xpath).get()
        if value:
            parsed = parse_time(value)
            if parsed is not None:
                return parsed
    return None


def parse_time(text: str) -> float | None:
    """ISO 8601 or RFC 822 (feeds) to epoch seconds; naive times are UTC; ``None`` if
    neither."""
    text = text.strip()
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _looks_like_xml(response: TextResponse) -> bool:
    content_type = response.headers.get(b"Content-Type", b"") or b""
    if any(kind in content_type.lower() for kind in _XML_TYPES):
        return True
    return response.body.lstrip()[:5] == b"<?xml"


def _feed_links(response: TextResponse) -> list[Outlink]:
    try:
        root = etree.fromstring(response.body, parser=_PARSER, base_url=response.url)
    except etree.XMLSyntaxError:
        return []
    if root is None:
        return []
    links = []
    for item in root.iter():
        if not isinstance(item.tag, str) or etree.QName(item).localname not in _ITEM_TAGS:
            continue
        url, published = None, None
        for child in item:
            if not isinstance(child.tag, str):
                continue
            name = etree.QName(child).localname
            if name in {"link", "loc"} and url is None:
                url = child.get("href") or (child.text or "").strip()
            elif name in _DATE_TAGS and published is None and child.text:
                published = parse_time(child.text)
        if url:
            links.append(Outlink(canonical_url(response.urljoin(url)), published))
    return links
