"""Feeds as sources: RSS 2.0, RSS 1.0 (RDF) and Atom through feedparser; JSON Feed through the
standard JSON parser.

feedparser picks each Atom entry's ``rel="alternate"`` link (or the first link without a
``rel``), never a ``rel="replies"`` comment feed. It is given the body as bytes, never a URL,
so it fetches nothing.

An entry's date is read from the text feedparser found by
:func:`~scrapy_echo.sources.published.parse_time`, as every other source's dates are:
feedparser's own reading takes a zone name it does not know (``CEST``, most military
letters) as UTC without a word. Only a form ``parse_time`` cannot read at all (the localised
forms feedparser knows) is taken as feedparser reads it.
"""

from __future__ import annotations

import calendar
import json
import re
from typing import Any, NamedTuple

import feedparser  # type: ignore[import-untyped]

from scrapy_echo.sources.published import parse_time

_JSON_FEED_VERSION = "https://jsonfeed.org/version/"
_MAX_ITEMS = 100_000
_DOCTYPE_SCAN = 65536  # a DOCTYPE comes before the root element, near the start
_DOCTYPE = re.compile(rb"<!DOCTYPE[^\[>]*\[.*?\]\s*>", re.DOTALL)


class FeedItem(NamedTuple):
    url: str  # as the feed gives it (relative URLs resolved by the caller)
    published: float | None


def parse_feed(body: bytes, content_type: str) -> tuple[str, list[FeedItem]] | None:
    """The feed's kind (``rss``, ``rdf``, ``atom``) and its items; ``None`` if feedparser
    finds no feed in ``body``."""
    parsed = feedparser.parse(
        _without_entities(body), response_headers={"content-type": content_type}
    )
    version = str(parsed.get("version") or "")
    if not version:
        return None
    kind = "atom" if version.startswith("atom") else "rdf" if version == "rss10" else "rss"
    items = []
    for entry in parsed.entries[:_MAX_ITEMS]:
        url = entry.get("link") or _guid_link(entry)
        if url:
            items.append(FeedItem(str(url), _entry_time(entry)))
    return kind, items


def _without_entities(body: bytes) -> bytes:
    """The body with any DOCTYPE that declares entities removed: feeds have no use for them,
    and nested ones ("billion laughs") cost the parser seconds of the reactor's time."""
    head = body[:_DOCTYPE_SCAN]
    if b"<!ENTITY" not in head:
        return body
    return _DOCTYPE.sub(b"", head, count=1) + body[_DOCTYPE_SCAN:]


def looks_like_json_feed(body: bytes) -> bool:
    head = body[:4096].lstrip()
    return head.startswith(b"{") and b"jsonfeed.org/version" in head.replace(b"\\/", b"/")


def parse_json_feed(body: bytes) -> list[FeedItem] | None:
    """A JSON Feed's items (``url``, else ``external_url``, with ``date_published``);
    ``None`` if ``body`` is not one."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not str(data.get("version", "")).startswith(
        _JSON_FEED_VERSION
    ):
        return None
    raw_items = data.get("items")
    if not isinstance(raw_items, list):
        return None
    items = []
    for item in raw_items[:_MAX_ITEMS]:
        if not isinstance(item, dict):
            continue
        url = item.get("url") or item.get("external_url")
        if not isinstance(url, str) or not url:
            continue
        stated = item.get("date_published") or item.get("date_modified")
        items.append(FeedItem(url, parse_time(stated) if isinstance(stated, str) else None))
    return items


def _entry_time(entry: Any) -> float | None:
    for key in ("published", "created", "updated"):
        stated = entry.get(key)
        if isinstance(stated, str):
            parsed = parse_time(stated)
            if parsed is not None:
                return parsed
        moment = entry.get(f"{key}_parsed")
        if moment is not None:
            try:
                return float(calendar.timegm(moment))
            except (TypeError, ValueError, OverflowError):
                continue
    return None


def _guid_link(entry: Any) -> str | None:
    """An RSS item with no ``<link>`` whose ``<guid>`` is its permalink."""
    guid = entry.get("id")
    if entry.get("guidislink") and isinstance(guid, str) and guid.startswith(("http:", "https:")):
        return guid
    return None
