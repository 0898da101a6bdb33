"""Outlinks of HTML hubs, RSS/Atom feeds and sitemaps; a page's own published time."""

from __future__ import annotations

from datetime import datetime, timezone

from scrapy.http import HtmlResponse, Response, TextResponse, XmlResponse
from scrapy.linkextractors import LinkExtractor

from scrapy_echo.core.identity import site_of
from scrapy_echo.sources.outlinks import extract_outlinks, published_time
from scrapy_echo.sources.published import parse_time


def html(url: str, body: str) -> HtmlResponse:
    return HtmlResponse(url, body=body.encode(), encoding="utf-8")


def urls(links) -> list[str]:
    return [link.url for link in links]


def test_html_links_canonical_same_site_unique_in_order() -> None:
    response = html(
        "https://www.example.com/news/",
        '<a href="/a?b=2&a=1#top">1</a> <a href="https://sport.example.com/x">2</a>'
        '<a href="/a?a=1&b=2">dup</a> <a href="https://other.org/y">off</a>'
        '<a href="mailto:x@example.com">mail</a>',
    )
    links = extract_outlinks(response, None, same_site=True, limit=100)
    assert urls(links) == ["https://www.example.com/a?a=1&b=2", "https://sport.example.com/x"]
    everything = extract_outlinks(response, None, same_site=False, limit=100)
    assert "https://other.org/y" in urls(everything)


def test_limit_and_custom_extractor() -> None:
    body = "".join(f'<a href="/p{i}">{i}</a><a href="/skip{i}">s</a>' for i in range(50))
    response = html("http://example.com/", body)
    links = extract_outlinks(response, LinkExtractor(allow=r"/p\d+"), same_site=True, limit=10)
    assert urls(links) == [f"http://example.com/p{i}" for i in range(10)]


def test_rss_links_with_publication_times() -> None:
    body = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
      <link>http://example.com/</link>
      <item><title>a</title><link>http://example.com/a</link>
        <pubDate>Sun, 22 Nov 2026 10:00:00 GMT</pubDate></item>
      <item><title>b</title><link>/b</link></item>
    </channel></rss>"""
    response = XmlResponse("http://example.com/feed.xml", body=body)
    links = extract_outlinks(response, None, same_site=True, limit=100)
    assert urls(links) == ["http://example.com/a", "http://example.com/b"]
    assert links[0].published == datetime(2026, 11, 22, 10, tzinfo=timezone.utc).timestamp()
    assert links[1].published is None


def test_atom_and_sitemap() -> None:
    atom = b"""<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom">
      <entry><link href="http://example.com/e1"/><published>2026-11-22T10:00:00Z</published>
      </entry></feed>"""
    links = extract_outlinks(
        XmlResponse("http://example.com/atom", body=atom), None, same_site=True, limit=9
    )
    assert urls(links) == ["http://example.com/e1"]
    assert links[0].published == datetime(2026, 11, 22, 10, tzinfo=timezone.utc).timestamp()
    sitemap = b"""<?xml version="1.0"?>
      <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <url><loc>http://example.com/s1</loc><lastmod>2026-11-21</lastmod></url></urlset>"""
    links = extract_outlinks(
        XmlResponse("http://example.com/sitemap.xml", body=sitemap), None, same_site=True, limit=9
    )
    assert urls(links) == ["http://example.com/s1"]


def test_hostile_or_broken_xml_gives_no_links_and_no_entity_expansion() -> None:
    bomb = b"""<?xml version="1.0"?><!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]>
      <rss><channel><item><link>&e;</link></item></channel></rss>"""
    links = extract_outlinks(
        XmlResponse("http://example.com/f", body=bomb), None, same_site=False, limit=9
    )
    assert all("root:" not in link.url for link in links)
    broken = XmlResponse("http://example.com/f", body=b"<?xml version='1.0'?><rss><chan")
    assert extract_outlinks(broken, None, same_site=True, limit=9) == []


def test_binary_responses_have_no_links() -> None:
    assert (
        extract_outlinks(Response("http://example.com/x.png"), None, same_site=True, limit=9) == []
    )


def test_published_time_from_page_metadata() -> None:
    page = html(
        "http://example.com/a",
        '<meta property="article:published_time" content="2026-11-22T10:00:00+02:00">',
    )
    assert published_time(page) == datetime(2026, 11, 22, 8, tzinfo=timezone.utc).timestamp()
    timed = html("http://example.com/a", '<time datetime="2026-11-22T08:00:00">x</time>')
    assert published_time(timed) == datetime(2026, 11, 22, 8, tzinfo=timezone.utc).timestamp()
    assert published_time(html("http://example.com/a", "<p>no date</p>")) is None
    junk = html("http://example.com/a", '<meta property="article:published_time" content="soon">')
    assert published_time(junk) is None
    assert published_time(TextResponse("http://example.com/a", body=b"plain")) is None


def test_parse_time_formats() -> None:
    assert parse_time("1970-01-01T00:01:00Z") == 60.0
    assert parse_time("Thu, 01 Jan 1970 00:02:00 +0000") == 120.0
    assert parse_time("not a time") is None


def test_site_of() -> None:
    assert site_of("https://www.bbc.co.uk/news") == "bbc.co.uk"
    assert site_of("https://sport.example.com/") == "example.com"
    assert site_of("http://127.0.0.1:8000/") == "127.0.0.1"
    # By the public suffix list, not by label counts: two-level country suffixes, private
    # suffixes (two blogs on one hosting domain are two sites).
    assert site_of("https://news.orf.at/x") == site_of("https://www.orf.at/") == "orf.at"
    assert site_of("https://www.abc.net.au/") == "abc.net.au"
    assert site_of("https://a.github.io/") != site_of("https://b.github.io/")
