"""Every kind of source, read from the response; tracking parameters; sites; page aliases."""

from __future__ import annotations

import gzip
from datetime import datetime, timezone

import pytest
from scrapy.http import HtmlResponse, Request, Response, TextResponse, XmlResponse

from scrapy_echo.core.identity import PageIdentity, SameSite
from scrapy_echo.crawler.spidermw import page_aliases
from scrapy_echo.sources.address_guard import AddressGuard
from scrapy_echo.sources.outlinks import published_time, read_source
from scrapy_echo.sources.published import parse_time

NOON = datetime(2026, 11, 20, 12, tzinfo=timezone.utc).timestamp()


def urls(content) -> list[str]:
    return [link.url for link in content.links]


def test_rss_with_tracking_parameters_and_every_offset_form() -> None:
    body = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
      <item><link>http://ex.com/a?utm_source=rss&amp;utm_medium=feed&amp;id=1</link>
        <pubDate>Fri, 20 Nov 2026 12:00:00 +0000</pubDate></item>
      <item><link>http://ex.com/b?fbclid=xyz</link><pubDate>Fri, 20 Nov 2026 07:00:00 EST</pubDate>
      </item>
      <item><guid isPermaLink="true">http://ex.com/c</guid></item>
    </channel></rss>"""
    content = read_source(XmlResponse("http://ex.com/feed", body=body), same_site=SameSite())
    assert content.kind == "rss"
    assert urls(content) == ["http://ex.com/a?id=1", "http://ex.com/b", "http://ex.com/c"]
    assert [link.published for link in content.links] == [NOON, NOON, None]


def test_atom_takes_the_alternate_link_never_the_replies_feed() -> None:
    body = b"""<?xml version="1.0" encoding="utf-8"?>
    <feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
      <entry><title>1</title><link rel="replies" href="http://ex.com/1/comments.xml"/>
        <link rel="alternate" type="text/html" href="http://ex.com/1"/>
        <published>2026-11-20T12:00:00+00:00</published></entry>
      <entry><title>2</title><link rel="replies" href="/2/comments.xml"/><link href="/2"/>
        <updated>2026-11-20T13:00:00+0100</updated></entry>
    </feed>"""
    content = read_source(XmlResponse("http://ex.com/atom", body=body))
    assert content.kind == "atom"
    assert urls(content) == ["http://ex.com/1", "http://ex.com/2"]
    assert [link.published for link in content.links] == [NOON, NOON]


def test_rss_1_rdf_and_json_feed() -> None:
    rdf = b"""<?xml version="1.0"?>
    <rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
             xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
      <channel rdf:about="http://ex.com/"><title>t</title><link>http://ex.com/</link></channel>
      <item rdf:about="http://ex.com/r"><title>r</title><link>http://ex.com/r</link>
        <dc:date>2026-11-20T12:00:00Z</dc:date></item>
    </rdf:RDF>"""
    content = read_source(XmlResponse("http://ex.com/index.rdf", body=rdf))
    assert (content.kind, urls(content)) == ("rdf", ["http://ex.com/r"])
    assert content.links[0].published == NOON
    json_feed = b"""{"version": "https://jsonfeed.org/version/1.1", "title": "t", "items": [
        {"id": "1", "url": "http://ex.com/j1", "date_published": "2026-11-20T12:00:00Z"},
        {"id": "2", "external_url": "http://ex.com/j2"}, {"id": "3"}, "junk"]}"""
    headers = {"Content-Type": "application/feed+json"}
    content = read_source(TextResponse("http://ex.com/feed.json", body=json_feed, headers=headers))
    assert (content.kind, urls(content)) == ("json-feed", ["http://ex.com/j1", "http://ex.com/j2"])
    assert content.links[0].published == NOON


NEWS_SITEMAP = b"""<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">
  <url><loc>http://ex.com/n1</loc>
    <news:news><news:publication><news:name>Ex</news:name><news:language>en</news:language>
    </news:publication><news:publication_date>2026-11-20T12:00:00+00:00</news:publication_date>
    <news:title>n1</news:title></news:news></url>
  <url><loc>http://ex.com/n2?utm_campaign=x</loc><lastmod>2026-11-20T12:00:00Z</lastmod></url>
</urlset>"""


def test_news_sitemap_gzipped_whatever_the_content_type() -> None:
    packed = gzip.compress(NEWS_SITEMAP)
    headers = {"Content-Type": "application/octet-stream"}
    content = read_source(Response("http://ex.com/news.xml.gz", body=packed, headers=headers))
    assert content.kind == "news-sitemap"
    assert urls(content) == ["http://ex.com/n1", "http://ex.com/n2"]
    assert [link.published for link in content.links] == [NOON, NOON]


def test_sitemap_index_and_robots_give_sources() -> None:
    index = b"""<?xml version="1.0"?>
    <sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <sitemap><loc>http://ex.com/news.xml.gz</loc></sitemap>
      <sitemap><loc>http://elsewhere.org/s.xml</loc></sitemap>
    </sitemapindex>"""
    content = read_source(
        XmlResponse("http://ex.com/sitemap.xml", body=index), same_site=SameSite()
    )
    assert (content.kind, content.links, content.sources) == (
        "sitemap-index",
        [],
        ["http://ex.com/news.xml.gz"],
    )
    robots = b"User-agent: *\nDisallow: /private\nSitemap: /sitemap.xml\n"
    robots += b"Sitemap: http://cdn.ex-static.net/s.xml\n"
    headers = {"Content-Type": "text/plain"}
    response = TextResponse("http://ex.com/robots.txt", body=robots, headers=headers)
    content = read_source(response, same_site=SameSite())
    assert (content.kind, content.sources) == ("robots", ["http://ex.com/sitemap.xml"])


def test_robots_txt_adds_sitemaps_of_its_own_site_and_never_on_a_refused_host() -> None:
    robots = (
        b"User-agent: *\nSitemap: https://www.ex.com/news.xml\n"
        b"Sitemap: http://cdn.ex-static.net/s.xml\n"
        b"Sitemap: http://169.254.169.254/latest/meta-data/\n"
        b"Sitemap: http://10.0.0.5/sitemap.xml\n"
    )
    response = TextResponse(
        "http://ex.com/robots.txt", body=robots, headers={"Content-Type": "text/plain"}
    )
    own = ["https://www.ex.com/news.xml"]
    # The sitemap protocol's cross-host submission would let any site add sources on any
    # other (the cloud's metadata service among them), to be recrawled for ever.
    for rule in (SameSite(), None):  # (with ECHO_SAME_SITE off too)
        content = read_source(response, same_site=rule, guard=AddressGuard())
        assert (content.sources, content.cross_site_sources) == (own, 3)
    # Allowed (ECHO_CROSS_SITE_SITEMAPS), other sites' come in, but not a refused host's.
    content = read_source(
        response, same_site=SameSite(), guard=AddressGuard(), cross_site_sitemaps=True
    )
    assert content.sources == [*own, "http://cdn.ex-static.net/s.xml"]
    assert content.sources_refused == 2
    assert "169.254.169.254" in (content.first_refusal or "")
    # A site on a private address of the crawl's own lists its own sitemaps.
    local = TextResponse(
        "http://10.0.0.5/robots.txt",
        body=b"Sitemap: http://10.0.0.5/sitemap.xml\nSitemap: http://10.0.0.6/s.xml\n",
        headers={"Content-Type": "text/plain"},
    )
    guard = AddressGuard.for_crawl(["http://10.0.0.5/robots.txt"])
    content = read_source(local, same_site=SameSite(), guard=guard, cross_site_sitemaps=True)
    assert (content.sources, content.sources_refused) == (["http://10.0.0.5/sitemap.xml"], 1)


def redirected(asked: str, landed: str, links: list[str]) -> HtmlResponse:
    """The response to ``asked`` that a redirect took to ``landed``, as Scrapy hands it on."""
    request = Request(landed, meta={"redirect_urls": [asked]})
    body = "".join(f'<a href="{link}">x</a>' for link in links).encode()
    return HtmlResponse(landed, body=body, encoding="utf-8", request=request)


def test_a_source_is_judged_by_the_url_it_was_asked_for_not_where_it_landed() -> None:
    # A feed redirected to an internal host: its links would be "of its site" there.
    inside = redirected("http://ex.com/feed", "http://10.0.0.5/", ["/admin", "/status"])
    for rule, guard in ((SameSite(), None), (None, AddressGuard())):
        content = read_source(inside, same_site=rule, guard=guard)
        assert (content.links, content.sources) == ([], [])
    # The guard refuses reading it at all.
    content = read_source(inside, same_site=SameSite(), guard=AddressGuard())
    assert (content.landed_refused or "").startswith("http://10.0.0.5/")
    # On its own site (https, www): read, and judged as ex.com's.
    moved = redirected(
        "http://ex.com/feed",
        "https://www.ex.com/feed",
        ["https://news.ex.com/a", "http://10.0.0.5/x", "http://other.org/b"],
    )
    content = read_source(moved, same_site=SameSite(), guard=AddressGuard())
    assert (content.landed_refused, urls(content)) == (None, ["https://news.ex.com/a"])
    # To a feed host ECHO_ALLOWED_HOSTS names: read, its links judged as ex.com's.
    feed_host = redirected(
        "http://ex.com/rss", "https://feeds.ex-cdn.net/ex", ["https://ex.com/story", "/more"]
    )
    assert urls(read_source(feed_host, same_site=SameSite())) == ["https://ex.com/story"]
    assert urls(read_source(feed_host, same_site=SameSite(["ex-cdn.net"]))) == [
        "https://ex.com/story",
        "https://feeds.ex-cdn.net/more",
    ]


def test_links_to_refused_hosts_are_dropped_and_counted_whatever_the_site_rule() -> None:
    response = HtmlResponse(
        "http://ex.com/",
        body=b'<a href="http://169.254.169.254/latest/">1</a><a href="http://2852039166/">2</a>'
        b'<a href="http://127.0.0.1:6379/">3</a><a href="https://other.org/ok">4</a>',
        encoding="utf-8",
    )
    content = read_source(response, guard=AddressGuard())  # (ECHO_SAME_SITE off)
    assert (urls(content), content.links_refused) == (["https://other.org/ok"], 3)


def test_same_site_by_public_suffix_and_allowed_hosts() -> None:
    body = (
        '<a href="https://news.orf.at/a">1</a><a href="https://orf.at.evil.com/b">2</a>'
        '<a href="https://cdn.orf-static.net/c">3</a><a href="https://other.at/d">4</a>'
    )
    response = HtmlResponse("https://www.orf.at/", body=body.encode(), encoding="utf-8")
    assert urls(read_source(response, same_site=SameSite())) == ["https://news.orf.at/a"]
    allowed = SameSite(["orf-static.net"])
    assert urls(read_source(response, same_site=allowed)) == [
        "https://news.orf.at/a",
        "https://cdn.orf-static.net/c",
    ]
    # A feed on a feed host yields the site's pages when the site is allowed.
    feed = b"""<?xml version="1.0"?><rss version="2.0"><channel>
      <item><link>https://www.orf.at/story/1</link></item></channel></rss>"""
    on_cdn = XmlResponse("https://feeds.orf-feeds.com/news", body=feed)
    assert urls(read_source(on_cdn, same_site=SameSite())) == []
    assert urls(read_source(on_cdn, same_site=SameSite(["orf.at"]))) == [
        "https://www.orf.at/story/1"
    ]


def test_broken_and_hostile_sources_are_counted_not_fatal() -> None:
    bad_gzip = read_source(Response("http://ex.com/s.xml.gz", body=b"\x1f\x8b\x08garbage"))
    assert bad_gzip.kind == "gzip" and bad_gzip.error and not bad_gzip.links
    billion_laughs = b"""<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">
      <!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>
      <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
      <url><loc>http://ex.com/&lol2;</loc></url></urlset>"""
    content = read_source(XmlResponse("http://ex.com/s.xml", body=billion_laughs))
    assert all("lollol" not in url for url in urls(content))
    # The same in a feed: the DOCTYPE that declares the entities is dropped unread.
    laughs = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10 if i else "lol"}">' for i in range(10))
    feed = (
        f'<?xml version="1.0"?><!DOCTYPE rss [{laughs}]><rss version="2.0"><channel>'
        "<item><link>http://ex.com/&l9;</link></item>"
        "<item><link>http://ex.com/ok</link></item></channel></rss>"
    )
    content = read_source(XmlResponse("http://ex.com/rss", body=feed.encode()))
    assert "http://ex.com/ok" in urls(content)
    assert all("lollol" not in url for url in urls(content))
    links = '<a href="http://[::1">x</a><a href="javascript:alert(1)">y</a><a href="/ok">z</a>'
    response = HtmlResponse("http://ex.com/", body=links.encode(), encoding="utf-8")
    content = read_source(response)
    assert urls(content) == ["http://ex.com/ok"]
    assert read_source(Response("http://ex.com/x.bin", body=b"\x00\x01")).kind == "binary"


def test_identity_strips_tracking_parameters_and_folds_the_scheme() -> None:
    ids = PageIdentity()
    assert ids.clean("https://ex.com/a?id=1&UTM_Source=x&gclid=1&at_medium=rss#c") == (
        "https://ex.com/a?id=1"
    )
    assert ids.key("http://ex.com/a?id=1") == ids.key("https://ex.com/a?utm_term=z&id=1")
    keep_all = PageIdentity(strip_params=[])
    assert keep_all.clean("https://ex.com/a?utm_source=x") == "https://ex.com/a?utm_source=x"


def test_a_failing_normaliser_falls_back_and_is_counted() -> None:
    def broken(url: str) -> str:
        raise RuntimeError("boom")

    ids = PageIdentity(normalizer=broken)
    assert ids.clean("https://ex.com/a?utm_source=x") == "https://ex.com/a"
    returns_junk = PageIdentity(normalizer=lambda url: None)  # type: ignore[arg-type,return-value]
    assert returns_junk.clean("https://ex.com/b") == "https://ex.com/b"
    assert ids.normalizer_failures == 1 and returns_junk.normalizer_failures == 1


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-20T12:00:00Z",
        "2026-11-20T12:00:00+00:00",
        "2026-11-20T12:00:00+0000",
        "2026-11-20T13:00:00+01",
        "2026-11-20T12:00:00",
        "Fri, 20 Nov 2026 12:00:00 GMT",
        "Fri, 20 Nov 2026 12:00:00 UT",
        "Fri, 20 Nov 2026 12:00:00 +0000",
        "Fri, 20 Nov 2026 04:00:00 PST",
        "20 Nov 2026 07:00:00 EST",
    ],
)
def test_every_common_date_form(text: str) -> None:
    assert parse_time(text) == NOON


def test_page_published_time_from_json_ld_meta_or_time() -> None:
    def page(head: str) -> HtmlResponse:
        return HtmlResponse(
            "http://ex.com/a", body=f"<html>{head}</html>".encode(), encoding="utf-8"
        )

    graph = (
        '<script type="application/ld+json">{"@context": "https://schema.org", "@graph": ['
        '{"@type": "WebPage"}, {"@type": "NewsArticle", "datePublished": '
        '"2026-11-20T12:00:00+0000"}]}</script>'
    )
    assert published_time(page(graph)) == NOON
    broken_ld = '<script type="application/ld+json">{not json</script>'
    meta = '<meta property="article:published_time" content="2026-11-20T12:00:00Z">'
    assert published_time(page(broken_ld + meta)) == NOON
    assert published_time(page('<time datetime="2026-11-20T13:00:00+01:00">x</time>')) == NOON


def test_page_aliases_are_redirects_landing_url_and_canonical() -> None:
    request = Request(
        "http://ex.com/story/view.php?id=7",
        meta={"redirect_urls": ["http://ex.com/?p=7", "http://ex.com/story/view.php?id=7"]},
    )
    response = HtmlResponse(
        "http://ex.com/2026/11/slug",
        body=b'<link rel="canonical" href="/2026/11/slug?ref=home">',
        encoding="utf-8",
        request=request,
    )
    assert page_aliases(response, "http://ex.com/?p=7") == (
        "http://ex.com/story/view.php?id=7",
        "http://ex.com/2026/11/slug",
        "http://ex.com/2026/11/slug?ref=home",
    )


def sitemap(count: int, host: str = "ex.com") -> bytes:
    rows = "".join(f"<url><loc>http://{host}/a/{i}</loc></url>" for i in range(count))
    return (
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{rows}</urlset>"
    ).encode()


def index_of(*sitemaps: str) -> bytes:
    rows = "".join(f"<sitemap><loc>{url}</loc></sitemap>" for url in sitemaps)
    return (
        f'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{rows}</sitemapindex>"
    ).encode()


def test_a_body_over_the_bound_is_not_read() -> None:
    body = sitemap(100)
    big = read_source(XmlResponse("http://ex.com/s.xml", body=body), max_bytes=len(body) - 1)
    assert (big.kind, big.links, big.too_large) == ("too-large", [], f"{len(body)} bytes")
    fits = read_source(XmlResponse("http://ex.com/s.xml", body=body), max_bytes=len(body))
    assert (fits.kind, len(fits.links), fits.too_large) == ("sitemap", 100, None)
    # The same sitemap gzipped: judged by what it unpacks to.
    packed = Response("http://ex.com/s.xml.gz", body=gzip.compress(body))
    assert read_source(packed, max_bytes=len(body) - 1).too_large is not None
    assert len(read_source(packed, max_bytes=len(body)).links) == 100


def test_a_gzip_bomb_is_unpacked_no_further_than_the_bound() -> None:
    import tracemalloc

    # 64 MiB of blanks in a sitemap, 0.3 MB packed: unpacked whole, past the 50 MiB default.
    body = sitemap(1)
    bomb = gzip.compress(body[:-9] + b" " * (64 << 20) + body[-9:], compresslevel=1)
    assert len(bomb) < 1 << 20
    content = read_source(Response("http://ex.com/s.xml.gz", body=bomb))  # (the default bound)
    assert (content.kind, content.links, content.error) == ("too-large", [], None)
    assert content.too_large == f"more than {50 << 20} bytes unpacked"
    tracemalloc.start()
    try:
        content = read_source(Response("http://ex.com/s.xml.gz", body=bomb), max_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert content.too_large is not None
    assert peak < 4 << 20, peak  # it stopped at the bound, never near the 64 MiB


def test_an_index_adds_sources_up_to_the_cap_and_counts_the_rest() -> None:
    listed = [f"http://ex.com/s{i}.xml" for i in range(30)]
    body = index_of(*listed, *listed[:5], "http://elsewhere.org/s.xml")  # repeats, another site
    response = XmlResponse("http://ex.com/index.xml", body=body)
    content = read_source(response, same_site=SameSite(), max_sources=10)
    assert content.sources == listed[:10]
    assert (content.sources_over_limit, content.cross_site_sources) == (20, 1)
    content = read_source(response, same_site=SameSite())  # (the default cap: 2000)
    assert (content.sources, content.sources_over_limit) == (listed, 0)
