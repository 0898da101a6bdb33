"""Publication dates and their time zones: every numeric offset and every zone name RFC 822
defines is honoured, in every place a date is read; a zone name nobody defines is read as UTC
and noted (counted, logged once), never taken as UTC silently."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

import pytest
from scrapy.http import HtmlResponse, TextResponse, XmlResponse

from scrapy_echo.sources.outlinks import published_time, read_source
from scrapy_echo.sources.published import parse_time
from scrapy_echo.sources.zones import unknown_zones
from tests.test_middlewares import SpiderMiddlewares, setup, source_request

NOON = datetime(2026, 11, 20, 12, tzinfo=timezone.utc).timestamp()


@pytest.mark.parametrize(
    "text",
    [
        # ISO 8601 and the W3C datetime profile sitemaps use
        "2026-11-20T14:00:00+0200",
        "2026-11-20T14:00:00+02:00",
        "2026-11-20T06:30:00-0530",
        "2026-11-20T06:30-05:30",
        "2026-11-20 14:00:00 +0200",  # Ruby's Time#to_s, common in generated sitemaps
        "2026-11-20 12:00:00 UTC",
        "2026-11-20 07:00:00 EST",
        # RFC 822 and the forms feeds write it in
        "Fri, 20 Nov 2026 14:00:00 +0200",
        "Fri, 20 Nov 2026 14:00:00 +02:00",
        "Fri, 20 Nov 2026 06:30:00 -0530",
        "Fri, 20 Nov 2026 06:30:00 -05:30",
        "Fri, 20 Nov 2026 14:00:00+0200",
        "Fri, 20 Nov 2026 14:00:00 GMT+02:00",
        "Fri, 20 Nov 2026 14:00:00 +0200 (CEST)",
        "Fri, 20 Nov 2026 12:00:00 -0000",
        "Fri, 20 Nov 2026 05:00:00 PDT",
        "Fri, 20 Nov 2026 06:00:00 CST",
        "Fri Nov 20 07:00:00 EST 2026",  # what date(1) prints
        # RFC 822's military zones, with its signs: Z = UT, A = -1 ... M = -12, N = +1 ... Y = +12
        "Fri, 20 Nov 2026 12:00:00 Z",
        "Fri, 20 Nov 2026 11:00:00 A",
        "Fri, 20 Nov 2026 03:00:00 I",
        "Fri, 20 Nov 2026 02:00:00 K",
        "Fri, 20 Nov 2026 00:00:00 M",
        "Fri, 20 Nov 2026 13:00:00 N",
        "Sat, 21 Nov 2026 00:00:00 Y",
    ],
)
def test_every_offset_and_rfc_822_zone_is_honoured(text: str) -> None:
    with unknown_zones() as zones:
        assert parse_time(text) == NOON
    assert zones.count == 0


def test_an_unknown_zone_is_read_as_utc_and_noted() -> None:
    with unknown_zones() as zones:
        assert parse_time("Fri, 20 Nov 2026 12:00:00 CEST") == NOON
        assert parse_time("2026-11-20 12:00:00 Europe/Paris") == NOON
        assert parse_time("Fri, 20 Nov 2026 12:00:00 GMT") == NOON  # known: not noted
        assert parse_time("Fri, 20 Nov 2026 12:00:00") == NOON  # no zone: UTC, not noted
    assert (zones.count, zones.first) == (2, "CEST")
    # Outside a block nothing is counted, and the date is the same.
    assert parse_time("Fri, 20 Nov 2026 12:00:00 CEST") == NOON


def test_every_source_kind_honours_the_zone() -> None:
    rss = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
      <item><link>http://ex.com/a</link><pubDate>Fri, 20 Nov 2026 10:00:00 B</pubDate></item>
      <item><link>http://ex.com/b</link><pubDate>Fri, 20 Nov 2026 06:30:00 -05:30</pubDate></item>
      <item><link>http://ex.com/c</link><pubDate>Fri, 20 Nov 2026 12:00:00 CEST</pubDate></item>
    </channel></rss>"""
    with unknown_zones() as zones:
        content = read_source(XmlResponse("http://ex.com/feed", body=rss))
    assert [link.published for link in content.links] == [NOON, NOON, NOON]
    assert zones.count == 1  # feedparser alone reads CEST and B as UTC, without a word

    sitemap = b"""<?xml version="1.0"?>
    <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <url><loc>http://ex.com/s1</loc><lastmod>2026-11-20 14:00:00 +0200</lastmod></url>
      <url><loc>http://ex.com/s2</loc><lastmod>2026-11-20T17:30+05:30</lastmod></url>
    </urlset>"""
    content = read_source(XmlResponse("http://ex.com/sitemap.xml", body=sitemap))
    assert [link.published for link in content.links] == [NOON, NOON]

    items = [
        {"url": "http://ex.com/j1", "date_published": "Fri, 20 Nov 2026 14:00:00 +02:00"},
        {"url": "http://ex.com/j2", "date_published": "2026-11-20T06:30:00-0530"},
    ]
    json_feed = json.dumps({"version": "https://jsonfeed.org/version/1.1", "items": items})
    headers = {"Content-Type": "application/feed+json"}
    response = TextResponse("http://ex.com/feed.json", body=json_feed.encode(), headers=headers)
    assert [link.published for link in read_source(response).links] == [NOON, NOON]

    meta = '<meta property="article:published_time" content="Fri, 20 Nov 2026 13:00:00 N">'
    page = HtmlResponse("http://ex.com/a", body=meta.encode(), encoding="utf-8")
    assert published_time(page) == NOON


def test_the_crawl_counts_unknown_zones_and_logs_the_first(caplog) -> None:
    crawler, runtime, _ = setup()
    source = runtime.state.add_source("http://ex.com/feed")
    middlewares = SpiderMiddlewares(crawler)
    rss = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
      <item><link>http://ex.com/%d</link><pubDate>Fri, 20 Nov 2026 12:00:00 CEST</pubDate></item>
      <item><link>http://ex.com/ok</link><pubDate>Fri, 20 Nov 2026 12:00:00 GMT</pubDate></item>
    </channel></rss>"""
    with caplog.at_level(logging.WARNING):
        for crawl in (1, 2):
            request = source_request(source, "http://ex.com/feed")
            middlewares.handle_response(XmlResponse(request.url, body=rss % crawl, request=request))
    assert crawler.stats.get_value("echo/dates/unknown_zone") == 2
    noted = [r for r in caplog.records if "time zone" in r.getMessage()]
    assert len(noted) == 1 and "'CEST'" in noted[0].getMessage()
