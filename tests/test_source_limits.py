"""What one source response may make the crawl do: read a body of at most
``ECHO_MAX_SOURCE_BYTES``, and add at most ``ECHO_MAX_SOURCES_PER_SOURCE`` sources, none
deeper than ``ECHO_MAX_SOURCE_DEPTH`` levels of listing (hand-made responses, no reactor)."""

from __future__ import annotations

import contextlib
import gzip
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from scrapy import Request
from scrapy.exceptions import DownloadCancelledError
from scrapy.http import Response, XmlResponse

from scrapy_echo.crawler.downloadermw import EchoDownloaderMiddleware
from scrapy_echo.crawler.echo_requests import source_request as echo_source_request
from tests.crawling import crawl
from tests.test_middlewares import SpiderMiddlewares, setup, source_request

NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


def sitemap(count: int) -> bytes:
    rows = "".join(f"<url><loc>http://news.test/a/{i}</loc></url>" for i in range(count))
    return f'<?xml version="1.0"?><urlset xmlns="{NS}">{rows}</urlset>'.encode()


def index_of(*sitemaps: str) -> bytes:
    rows = "".join(f"<sitemap><loc>{url}</loc></sitemap>" for url in sitemaps)
    return f'<?xml version="1.0"?><sitemapindex xmlns="{NS}">{rows}</sitemapindex>'.encode()


def test_a_source_over_the_size_bound_is_a_failed_crawl_counted_and_logged_once(caplog) -> None:
    crawler, runtime, clock = setup(ECHO_MAX_SOURCE_BYTES=2000, ECHO_FAILURE_BACKOFF=10)
    url = "http://news.test/sitemap.xml"
    source = runtime.state.add_source(url)
    mw = SpiderMiddlewares(crawler)
    big = sitemap(100)
    assert len(big) > 2000
    with caplog.at_level("WARNING"):
        for body in (big, gzip.compress(big)):  # (gzip: 300 bytes that unpack to 4 kB)
            request = source_request(source, url)
            assert mw.handle_response(Response(url, body=body, request=request)) == []
    status, stats = runtime.state.sources[source], crawler.stats
    # Failures (backing off), not crawls that found nothing: the learner heard of none.
    assert (status.failures, status.crawls) == (2, 0)
    assert runtime.state.last_crawl[source] == clock.now + 20
    assert stats.get_value("echo/sources/too_large") == 2
    assert stats.get_value("echo/sources/failed") == 2
    assert stats.get_value("echo/sources/crawled") is None
    assert caplog.text.count("over ECHO_MAX_SOURCE_BYTES (2000)") == 1
    assert "not read: 4" in caplog.text  # (its size, in bytes)
    # Once it fits again, it is read as before.
    request = source_request(source, url)
    found = mw.handle_response(XmlResponse(url, body=sitemap(10), request=request))
    assert [r.url for r in found] == [f"http://news.test/a/{i}" for i in range(10)]
    assert (status.failures, status.crawls) == (0, 1)


def test_nested_sitemap_indexes_add_sources_down_to_the_depth_bound(caplog) -> None:
    crawler, runtime, _ = setup(ECHO_MAX_SOURCE_DEPTH=2)
    state = runtime.state
    mw = SpiderMiddlewares(crawler)

    def crawl(url: str, body: bytes) -> Request:
        """The response to ``url``'s crawl, as the scheduler asks for it; that request."""
        source = [status.url for status in state.sources].index(url)
        request = echo_source_request(state.sources[source], source, lambda r: None)
        mw.handle_response(XmlResponse(url, body=body, request=request))
        return request

    def depths() -> dict[str, int]:
        return {
            status.url.removeprefix("http://news.test/"): status.depth for status in state.sources
        }

    runtime.core.add_sources(["http://news.test/sitemap.xml"])
    crawl("http://news.test/sitemap.xml", index_of("http://news.test/index-a.xml"))
    # An index listing sitemaps (and an index): as before.
    listing = index_of("http://news.test/s1.xml", "http://news.test/index-b.xml")
    crawl("http://news.test/index-a.xml", listing)
    crawl("http://news.test/s1.xml", sitemap(3))
    assert depths() == {"sitemap.xml": 0, "index-a.xml": 1, "s1.xml": 2, "index-b.xml": 2}
    with caplog.at_level("WARNING"):
        for _ in range(2):
            request = crawl(
                "http://news.test/index-b.xml", index_of("http://news.test/index-c.xml")
            )
    assert request.meta["echo"]["depth"] == 2
    assert "index-c.xml" not in depths()  # a third level of listing: past the bound
    assert crawler.stats.get_value("echo/sources/too_deep") == 2
    assert crawler.stats.get_value("echo/sources/found") == 3
    assert caplog.text.count("ECHO_MAX_SOURCE_DEPTH") == 1
    assert "index-c.xml" in caplog.text


def test_one_response_adds_at_most_the_cap_of_sources(caplog) -> None:
    crawler, runtime, _ = setup(ECHO_MAX_SOURCES_PER_SOURCE=3)
    url = "http://news.test/sitemap.xml"
    source = runtime.state.add_source(url)
    mw = SpiderMiddlewares(crawler)
    listed = [f"http://news.test/s{i}.xml" for i in range(5)]
    with caplog.at_level("WARNING"):
        for _ in range(2):
            request = source_request(source, url)
            mw.handle_response(XmlResponse(url, body=index_of(*listed), request=request))
    assert [status.url for status in runtime.state.sources] == [url, *listed[:3]]
    assert crawler.stats.get_value("echo/sources/over_limit") == 4
    assert caplog.text.count("ECHO_MAX_SOURCES_PER_SOURCE") == 1


def test_a_source_request_downloads_no_more_than_the_bound() -> None:
    crawler, runtime, _ = setup(ECHO_MAX_SOURCE_BYTES=1000)
    source = runtime.state.add_source("http://news.test/")
    mw = EchoDownloaderMiddleware.from_crawler(crawler)
    request = source_request(source)
    mw.prepare(request)
    assert request.meta["download_maxsize"] == 1000
    page = Request("http://news.test/a", meta={"echo": {"kind": "page"}})
    for other in (page, Request("http://news.test/plain")):
        mw.prepare(other)
        assert "download_maxsize" not in other.meta  # Scrapy's DOWNLOAD_MAXSIZE
    # Scrapy stops a download past it: a failed crawl, as too large.
    mw.process_exception(request, DownloadCancelledError("received response size 4096"))
    assert crawler.stats.get_value("echo/sources/too_large") == 1
    assert runtime.state.sources[source].failures == 1
    # A smaller bound of Scrapy's stands; none at all (0) is no bound.
    for scrapy_bound, expected in ((500, None), (0, 1000)):
        crawler, runtime, _ = setup(ECHO_MAX_SOURCE_BYTES=1000, DOWNLOAD_MAXSIZE=scrapy_bound)
        request = source_request(runtime.state.add_source("http://news.test/"))
        EchoDownloaderMiddleware.from_crawler(crawler).prepare(request)
        assert request.meta.get("download_maxsize") == expected


class StaticSite:
    """Fixed bodies by path on a loopback port, each request counted."""

    def __init__(self, pages: dict[str, tuple[bytes, str]]) -> None:
        self.hits: Counter[str] = Counter()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                site.hits[self.path] += 1
                body, content_type = pages.get(self.path, (b"not found", "text/plain"))
                self.send_response(200 if self.path in pages else 404)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # (the crawler stopped reading: too large)
                    self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.mark.slow
def test_a_crawl_reads_a_big_sitemap_refuses_oversize_ones_and_ends_nested_indexes(
    tmp_path,
) -> None:
    xml = "application/xml"
    big = sitemap(50_000)  # the protocol's most URLs: 2.6 MB here
    pages = {
        "/big.xml": (big, xml),
        "/huge.xml": (big * 4, xml),  # over the bound: its download is stopped
        "/bomb.xml.gz": (gzip.compress(b" " * (20 << 20) + big), "application/gzip"),
        "/index-1.xml": (index_of("/index-2.xml"), xml),
        "/index-2.xml": (index_of("/index-3.xml"), xml),
        "/index-3.xml": (index_of("/big.xml"), xml),
    }
    site = StaticSite(pages)
    try:
        sources = ["/big.xml", "/huge.xml", "/bomb.xml.gz", "/index-1.xml"]
        run = crawl(
            tmp_path,
            {
                "ECHO_SOURCES": ",".join(site.url + path for path in sources),
                "ECHO_BACKLOG": "skip",  # (no pages: the sitemaps list none of this site's)
                "ECHO_MAX_SOURCE_BYTES": 4 << 20,
                "ECHO_MAX_SOURCE_DEPTH": 1,
                "ECHO_FAILURE_BACKOFF": 60,
                "CLOSESPIDER_TIMEOUT": 6,
            },
        )
    finally:
        site.stop()
    assert run.returncode == 0, run.log[-3000:]
    stats = run.stats
    assert stats["echo/sources/kind/sitemap"] >= 1  # the big one, read on a thread
    assert stats["echo/sources/read_on_thread"] >= 2  # (and the bomb)
    # The huge one's download stopped at the bound; the bomb unpacked to it, then refused:
    # failed crawls, backing off (each may have been asked for again before its first failed).
    assert "huge.xml failed (too large: over download_maxsize (4194304)" in run.log
    assert site.hits["/huge.xml"] >= 1 and site.hits["/bomb.xml.gz"] >= 1
    assert stats["echo/sources/too_large"] == stats["echo/sources/failed"] >= 2
    assert "/bomb.xml.gz not read: more than 4194304 bytes unpacked" in run.log
    # index-2 added, one level below index-1; index-3, two below, is not, and never crawled.
    assert stats["echo/sources/found"] >= 1 and stats["echo/sources/too_deep"] >= 1
    assert site.hits["/index-2.xml"] >= 1 and site.hits["/index-3.xml"] == 0
    # Scrapy logs each failed download as an error; nothing else is one.
    errors = [line for line in run.log.splitlines() if " ERROR: " in line]
    assert all("Error downloading <GET" in line and "/huge.xml>" in line for line in errors)
