"""A news site whose sections publish in bursts that overflow the first page of their hub.

Each section's hub (``/s/<name>/``) lists its latest ``per_page`` articles, newest first,
without dates; where older articles remain it continues on ``?page=2``, ``?page=3``, ...,
named by ``<link rel="next">`` in the head and by an ``<a rel="next">Page N</a>`` link, as a
CMS writes them; a page past the first also links back (``rel="prev"``). With ``nav`` every
page has the site's navigation too: a link home and one to each section's hub. Hub pages carry
an ``ETag`` and answer a matching ``If-None-Match`` with 304.

A section starts with ``backlog`` articles already out, then publishes ``size`` articles
within ``spread`` seconds every ``period`` seconds from ``first``. Articles are
``/a/<name>/<i>.html`` (404 until published), ``i`` counting up from the oldest. The clock
starts at the first request, so every crawl meets the same schedule however long Scrapy takes
to start.

Every request is logged (:class:`Hit`): when it arrived, its path and query, the status it got
and whether it was conditional, so a test can judge the crawl by what the site saw.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlsplit

from tests.local_site import _StampingServer

_ARTICLE = re.compile(r"^/a/([\w-]+)/(\d+)\.html$")
_HUB = re.compile(r"^/s/([\w-]+)/$")


@dataclass(frozen=True)
class BurstSection:
    first: float  # s after the clock starts of the first burst's first article
    period: float  # s between bursts
    bursts: int = 3
    size: int = 12  # articles a burst
    spread: float = 0.9  # s a burst's articles are spread over
    backlog: int = 7  # articles out before the clock starts
    per_page: int = 5  # links a hub page lists

    def times(self) -> list[float]:
        """When each article appears (s after the clock starts; the backlog before it)."""
        backlog = [float(k - self.backlog) for k in range(self.backlog)]
        step = self.spread / max(1, self.size - 1)
        return backlog + [
            self.first + self.period * burst + step * k
            for burst in range(self.bursts)
            for k in range(self.size)
        ]


@dataclass(frozen=True)
class Hit:
    at: float  # s after the clock started
    path: str  # with its query
    status: int
    conditional: bool  # sent If-None-Match


class BurstSite:
    """The sections on ``host`` (its own download slot); ``nav``: every page links home and
    to each section's hub."""

    def __init__(
        self, sections: dict[str, BurstSection], *, host: str = "127.0.0.61", nav: bool = True
    ) -> None:
        self.sections = sections
        self.nav = nav
        self._times = {name: section.times() for name, section in sections.items()}
        self.started: float | None = None
        self.log: list[Hit] = []
        self.lock = threading.Lock()
        self._server = _StampingServer((host, 0), _handler(self))
        self._server.daemon_threads = True
        self.host = host
        self.port = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def hub_url(self, name: str) -> str:
        return f"{self.url}/s/{name}/"

    def sources(self) -> list[str]:
        return [self.hub_url(name) for name in self.sections]

    def start(self) -> BurstSite:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- what it publishes -----------------------------------------------------------------
    def published(self, name: str, elapsed: float) -> int:
        """How many articles ``name`` has out ``elapsed`` s after the clock started."""
        return bisect.bisect_right(self._times[name], elapsed)

    def published_between(self, name: str, since: float, until: float) -> list[int]:
        """The articles of ``name`` that appeared in ``[since, until)`` s after the start."""
        times = self._times[name]
        return list(range(bisect.bisect_left(times, since), bisect.bisect_left(times, until)))

    # -- what it saw -----------------------------------------------------------------------
    def hits(self) -> list[Hit]:
        with self.lock:
            return list(self.log)

    def fetched(self, name: str) -> set[int]:
        """The articles of ``name`` served with 200."""
        found = set()
        for hit in self.hits():
            match = _ARTICLE.match(hit.path)
            if hit.status == 200 and match and match.group(1) == name:
                found.add(int(match.group(2)))
        return found

    def page_hits(self, name: str, page: int) -> list[Hit]:
        """Requests for page ``page`` of ``name``'s hub (1: the hub itself), any status."""
        path = f"/s/{name}/" + ("" if page == 1 else f"?page={page}")
        return [hit for hit in self.hits() if hit.path == path]

    # -- serving ---------------------------------------------------------------------------
    def answer(self, target: str, stamp: float, etag: str | None) -> tuple[int, str, str | None]:
        """Status, body and ETag for ``target`` requested at ``stamp``; logged."""
        with self.lock:
            if self.started is None:
                self.started = stamp
            elapsed = stamp - self.started
            status, body, tag = self._answer(target, elapsed, etag)
            self.log.append(Hit(elapsed, target, status, etag is not None))
        return status, body, tag

    def _answer(self, target: str, elapsed: float, etag: str | None) -> tuple[int, str, str | None]:
        parts = urlsplit(target)
        hub, article = _HUB.match(parts.path), _ARTICLE.match(parts.path)
        if parts.path == "/":
            return 200, self._page("home", ""), None
        if hub and hub.group(1) in self.sections:
            pages = parse_qs(parts.query).get("page", ["1"])
            if pages[0].isdigit() and int(pages[0]) >= 1:
                return self._hub(hub.group(1), int(pages[0]), elapsed, etag)
        if article and article.group(1) in self.sections:
            name, index = article.group(1), int(article.group(2))
            if index < self.published(name, elapsed):
                body = f'<h1>{name} {index}</h1><p>story {index}</p><a href="/s/{name}/">back</a>'
                return 200, self._page(f"{name} {index}", body), None
        return 404, self._page("not found", ""), None

    def _hub(
        self, name: str, page: int, elapsed: float, etag: str | None
    ) -> tuple[int, str, str | None]:
        per_page = self.sections[name].per_page
        count = self.published(name, elapsed)
        newest = count - 1 - (page - 1) * per_page
        if page > 1 and newest < 0:
            return 404, self._page("not found", ""), None
        tag = f'"{name}-{page}-{count}"'
        if etag == tag:
            return 304, "", tag
        links = "".join(
            f'<li><a href="/a/{name}/{i}.html">story {i}</a></li>'
            for i in range(newest, max(-1, newest - per_page), -1)
        )
        head = more = ""
        if page > 1:
            back = f"/s/{name}/" + ("" if page == 2 else f"?page={page - 1}")
            more += f'<a rel="prev" href="{back}">Page {page - 1}</a> '
        if newest - per_page >= 0:
            head = f'<link rel="next" href="?page={page + 1}">'
            more += f'<a rel="next" href="?page={page + 1}">Page {page + 1}</a>'
        body = f"<h1>{name}</h1><ul>{links}</ul><p>{more}</p>"
        return 200, self._page(f"{name}, page {page}", body, head), tag

    def _page(self, title: str, body: str, head: str = "") -> str:
        nav = ""
        if self.nav:
            nav = '<nav><a href="/">Home</a> ' + "".join(
                f'<a href="/s/{name}/">{name}</a> ' for name in self.sections
            ) + "</nav>"  # fmt: skip
        return f"<html><head><title>{title}</title>{head}</head><body>{nav}{body}</body></html>"


def _handler(site: BurstSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            server = self.server
            assert isinstance(server, _StampingServer)
            # (stamped when the connection was accepted: a handler thread may start late)
            stamp = server.accepted.pop(self.request, None) or time.time()
            status, body, etag = site.answer(self.path, stamp, self.headers.get("If-None-Match"))
            data = body.encode()
            self.send_response(status)
            if status != 304:
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
            if etag:
                self.send_header("ETag", etag)
            self.end_headers()
            if status != 304:
                self.wfile.write(data)

    return Handler
