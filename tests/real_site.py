"""A news site that looks like a real one to a crawler, on two loopback hosts.

The site (``127.0.0.2``) publishes an article every ``period`` seconds and shows each under
several URLs, as real sites do:

- ``/a/<i>``: a short link that redirects (301) to the article's slug URL;
- ``/2026/<i>-story-<i>``: the article, with ``rel=canonical`` to itself and its published
  time in ``article:published_time``;
- ``/comments/<i>.xml``: the comment feed (Atom ``rel="replies"``), never an article.

Its sources: ``/rss.xml`` (RSS 2.0, short links with ``utm_*`` parameters, ``+0000`` dates),
``/atom.xml`` (``rel="replies"`` before the alternate link), ``/robots.txt`` (a ``Sitemap:``
line to ``/sitemap_index.xml``, which lists ``/news/sitemap.xml.gz``: a gzipped news sitemap
with ``news:publication_date`` and ``at_medium`` parameters). A feed host (``127.0.0.3``)
serves ``/feed.xml``, listing the site's short links with ``fbclid``.

Every request is logged; :meth:`RealSite.write_clicks` reports clicks for fetched articles
under their canonical URL as analytics would (``https``, a ``utm_source`` parameter).
"""

from __future__ import annotations

import gzip
import json
import re
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SITE_HOST, FEED_HOST = "127.0.0.2", "127.0.0.3"
LISTED = 10  # items per feed or sitemap

_SHORT = re.compile(r"^/a/(\d+)$")
_ARTICLE = re.compile(r"^/2026/(\d+)-story-\1$")
_COMMENTS = re.compile(r"^/comments/(\d+)\.xml$")


class RealSite:
    def __init__(self, period: float) -> None:
        self.period = period
        self.started = float("inf")  # the first request starts the clock: no backlog
        self.hits: Counter[str] = Counter()  # "host path" -> count
        self.first_fetch: dict[int, float] = {}  # article -> when its page was first served
        self.lock = threading.Lock()
        self._servers = [
            ThreadingHTTPServer((host, 0), _handler(self, host)) for host in (SITE_HOST, FEED_HOST)
        ]
        for server in self._servers:
            server.daemon_threads = True
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    @property
    def base(self) -> str:
        return f"http://{SITE_HOST}:{self._servers[0].server_address[1]}"

    @property
    def feed_base(self) -> str:
        return f"http://{FEED_HOST}:{self._servers[1].server_address[1]}"

    def sources(self) -> list[str]:
        return [
            f"{self.base}/rss.xml",
            f"{self.base}/atom.xml",
            f"{self.base}/robots.txt",
            f"{self.feed_base}/feed.xml",
        ]

    def start(self) -> RealSite:
        for server in self._servers:
            thread = threading.Thread(target=server.serve_forever, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    # -- content ----------------------------------------------------------------------------
    def published(self, now: float | None = None) -> int:
        """Articles published by ``now``: article ``i`` appears at ``started + (i+1) period``."""
        elapsed = (time.time() if now is None else now) - self.started
        return max(0, int(elapsed / self.period)) if elapsed > 0 else 0

    def published_at(self, article: int) -> float:
        return self.started + (article + 1) * self.period

    def listed(self) -> range:
        """The articles every source lists now, newest first."""
        count = self.published()
        return range(count - 1, max(-1, count - 1 - LISTED), -1)

    def article_url(self, article: int) -> str:
        return f"{self.base}/2026/{article}-story-{article}"

    def article_hits(self, article: int) -> int:
        return self.hits[f"{SITE_HOST} /2026/{article}-story-{article}"]

    def paths_hit(self, prefix: str) -> int:
        return sum(n for key, n in self.hits.items() if key.split(" ", 1)[1].startswith(prefix))

    # -- clicks -----------------------------------------------------------------------------
    def write_clicks(self, feed: Path, *, delay: float = 1.5, every: float = 0.25) -> None:
        """Every ``every`` s, a click row for each article fetched at least ``delay`` s ago
        (so the crawler has taken in the page), under the URL analytics report."""
        thread = threading.Thread(target=self._click_loop, args=(feed, delay, every), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _click_loop(self, feed: Path, delay: float, every: float) -> None:
        while not self._stop.wait(every):
            now = time.time()
            with self.lock:
                ready = [a for a, t in self.first_fetch.items() if t <= now - delay]
            rows = [
                {
                    "url": self.article_url(a).replace("http://", "https://")
                    + "?utm_source=newsletter",
                    "ts": now,
                    "clicks": 1,
                }
                for a in ready
            ]
            with open(feed, "a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows)


def _rfc822(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%a, %d %b %Y %H:%M:%S +0000")


def _iso(moment: float) -> str:
    return datetime.fromtimestamp(moment, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S+0000")


def _handler(site: RealSite, host: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            with site.lock:
                site.hits[f"{host} {path}"] += 1
                site.started = min(site.started, time.time())
            if host == FEED_HOST:
                if path == "/feed.xml":
                    self._rss(lambda a: f"{site.base}/a/{a}?fbclid=IwAR0x{a}")
                else:
                    self._send(404, "text/plain", b"not here")
                return
            short, article = _SHORT.match(path), _ARTICLE.match(path)
            comments = _COMMENTS.match(path)
            if path == "/rss.xml":
                self._rss(lambda a: f"/a/{a}?utm_source=rss&utm_medium=feed")
            elif path == "/atom.xml":
                self._atom()
            elif path == "/robots.txt":
                body = (
                    f"User-agent: *\nDisallow: /private/\nSitemap: {site.base}/sitemap_index.xml\n"
                )
                self._send(200, "text/plain", body.encode())
            elif path == "/sitemap_index.xml":
                self._send(
                    200,
                    "application/xml",
                    b'<?xml version="1.0" encoding="UTF-8"?><sitemapindex '
                    b'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>'
                    + f"{site.base}/news/sitemap.xml.gz".encode()
                    + b"</loc></sitemap></sitemapindex>",
                )
            elif path == "/news/sitemap.xml.gz":
                self._send(200, "application/x-gzip", gzip.compress(self._news_sitemap()))
            elif short and int(short.group(1)) < site.published():
                self.send_response(301)
                self.send_header("Location", site.article_url(int(short.group(1))))
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif article and int(article.group(1)) < site.published():
                self._article(int(article.group(1)))
            elif comments:
                self._send(200, "application/atom+xml", b"<feed/>")
            else:
                self._send(404, "text/html", b"<html><body>not found</body></html>")

        def _rss(self, link) -> None:
            items = "".join(
                f"<item><title>story {a}</title><link>{_escape(link(a))}</link>"
                f"<pubDate>{_rfc822(site.published_at(a))}</pubDate></item>"
                for a in site.listed()
            )
            body = f'<?xml version="1.0"?><rss version="2.0"><channel><title>news</title>{items}'
            self._send(200, "application/rss+xml", (body + "</channel></rss>").encode())

        def _atom(self) -> None:
            entries = "".join(
                f"<entry><title>story {a}</title><id>urn:story:{a}</id>"
                f'<link rel="replies" type="application/atom+xml" href="/comments/{a}.xml"/>'
                f'<link rel="alternate" type="text/html" href="{site.article_url(a)}"/>'
                f"<published>{_iso(site.published_at(a))}</published>"
                f"<updated>{_iso(site.published_at(a))}</updated></entry>"
                for a in site.listed()
            )
            body = (
                '<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">'
                f"<title>news</title><id>urn:news</id><updated>{_iso(time.time())}</updated>"
                f"{entries}</feed>"
            )
            self._send(200, "application/atom+xml", body.encode())

        def _news_sitemap(self) -> bytes:
            urls = "".join(
                f"<url><loc>{_escape(site.article_url(a) + '?at_medium=sitemap')}</loc>"
                "<news:news><news:publication><news:name>News</news:name>"
                "<news:language>en</news:language></news:publication>"
                f"<news:publication_date>{_iso(site.published_at(a))}</news:publication_date>"
                f"<news:title>story {a}</news:title></news:news></url>"
                for a in site.listed()
            )
            return (
                '<?xml version="1.0" encoding="UTF-8"?><urlset '
                'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
                f'xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">{urls}</urlset>'
            ).encode()

        def _article(self, article: int) -> None:
            with site.lock:
                site.first_fetch.setdefault(article, time.time())
            url = site.article_url(article)
            born = datetime.fromtimestamp(site.published_at(article), timezone.utc).isoformat()
            body = (
                f'<html><head><link rel="canonical" href="{url}">'
                f'<meta property="article:published_time" content="{born}"></head>'
                f'<body><h1>story {article}</h1><a href="/comments/{article}.xml">comments</a>'
                "</body></html>"
            )
            self._send(200, "text/html; charset=utf-8", body.encode())

        def _send(self, status: int, content_type: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _escape(url: str) -> str:
    return url.replace("&", "&amp;")
