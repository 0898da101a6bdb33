"""Sitemaps and robots.txt as sources, with Scrapy's own sitemap utilities.

- A ``<urlset>`` sitemap lists pages; its ``lastmod`` (or a news sitemap's
  ``news:publication_date``) is the page's publication time.
- A ``<sitemapindex>`` lists further sitemaps: they become sources of the same site.
- A robots.txt lists sitemaps on its ``Sitemap:`` lines: they become sources.
- A gzip-compressed body (``.xml.gz``) is unpacked first, with Scrapy's ``gunzip``, whatever
  the URL or content type says. It unpacks 64 KiB at a time and stops as soon as the output
  passes the bound it is given: a gzip bomb (a few kB that unpack to gigabytes) costs at most
  the bound, never its whole size.
"""

from __future__ import annotations

import struct
import zlib
from typing import NamedTuple

from lxml import etree
from scrapy.utils.gz import gunzip
from scrapy.utils.sitemap import Sitemap, sitemap_urls_from_robots

from scrapy_echo.sources.published import parse_time

_GZIP_MAGIC = b"\x1f\x8b"
_NEWS_NS = b"sitemap-news"
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, recover=True, huge_tree=False)


class SitemapEntry(NamedTuple):
    url: str
    published: float | None


class SitemapContent(NamedTuple):
    kind: str  # "sitemap", "news-sitemap" or "sitemap-index"
    entries: list[SitemapEntry]  # pages (urlset) or sitemaps (index)


def is_gzip(body: bytes) -> bool:
    return body[:2] == _GZIP_MAGIC


class UnpackedTooLarge(ValueError):
    """A gzip body that unpacks to more than the bound it was given (unpacking stopped there)."""


def unpack(body: bytes, *, max_size: int) -> bytes:
    """A gzip body unpacked; :class:`UnpackedTooLarge` as soon as the output passes
    ``max_size`` bytes, ``ValueError`` if it is not gzip.

    >>> import gzip
    >>> unpack(gzip.compress(b"<urlset/>"), max_size=100)
    b'<urlset/>'
    >>> unpack(gzip.compress(bytes(10_000_000)), max_size=100_000)
    Traceback (most recent call last):
    ...
    scrapy_echo.sources.sitemaps.UnpackedTooLarge: more than 100000 bytes unpacked
    """
    try:
        return gunzip(body, max_size=max_size)
    except (OSError, EOFError, struct.error, zlib.error) as exc:
        raise ValueError(f"bad gzip body: {exc}") from None
    except ValueError as exc:
        # (Scrapy's _DecompressionMaxSizeExceeded is private: known by what it carries.)
        if getattr(exc, "max_size", None) != max_size:
            raise ValueError(f"bad gzip body: {exc}") from None
        raise UnpackedTooLarge(f"more than {max_size} bytes unpacked") from None


def parse_sitemap(body: bytes) -> SitemapContent | None:
    """A sitemap or sitemap index; ``None`` if ``body`` is neither."""
    stripped = body.lstrip()
    if not stripped.startswith(b"<"):
        return None
    try:
        sitemap = Sitemap(stripped)
    except (etree.XMLSyntaxError, StopIteration, ValueError):
        return None
    if sitemap.type not in ("urlset", "sitemapindex"):
        return None
    news_dates = _news_dates(stripped) if _NEWS_NS in stripped[:4096] else {}
    entries = []
    for entry in sitemap:
        loc = entry.get("loc")
        if not loc:
            continue
        stated = news_dates.get(loc)
        if stated is None and entry.get("lastmod"):
            stated = parse_time(entry["lastmod"])
        entries.append(SitemapEntry(loc, stated))
    if sitemap.type == "sitemapindex":
        return SitemapContent("sitemap-index", entries)
    return SitemapContent("news-sitemap" if news_dates else "sitemap", entries)


def robots_sitemaps(body: bytes, base_url: str) -> list[str]:
    """The sitemaps a robots.txt lists."""
    return [str(url) for url in sitemap_urls_from_robots(body, base_url=base_url)]


def looks_like_robots(text: str) -> bool:
    """Plain text in robots.txt's grammar (a ``User-agent:`` or ``Sitemap:`` line)."""
    for line in text[:65536].splitlines():
        field = line.split(":", 1)[0].strip().lower()
        if field in ("user-agent", "sitemap"):
            return True
    return False


def _news_dates(body: bytes) -> dict[str, float]:
    """``news:publication_date`` per ``loc`` (Scrapy's ``Sitemap`` reads only the first level
    of each entry, and the news date sits one level down)."""
    try:
        root = etree.fromstring(body, parser=_PARSER)
    except etree.XMLSyntaxError:
        return {}
    if root is None:
        return {}
    dates = {}
    for url in root:
        if not isinstance(url.tag, str):
            continue
        loc, stated = None, None
        for element in url.iter():
            if not isinstance(element.tag, str):
                continue
            name = etree.QName(element).localname
            if name == "loc" and loc is None and element.text:
                loc = element.text.strip()
            elif name == "publication_date" and element.text:
                stated = parse_time(element.text)
        if loc and stated is not None:
            dates[loc] = stated
    return dates
