"""A news site whose hosts push back or hide things, one behaviour per loopback host.

Each host has one section: a hub at ``/news/`` listing article links newest first, and articles
at ``/a/<i>.html`` (404 until published). The clock starts at the first request to any host, so
every crawl meets the same schedule however long the crawler takes to start.

- ``rate_limited`` (``127.0.0.51``): a request arriving less than ``min_gap`` (1 s) after the
  last one the host accepted gets ``429`` with ``Retry-After: 5``; an article every 6 s.
- ``outage`` (``127.0.0.52``): ``503`` to everything from 15 s to 30 s into the crawl (with a
  ``Retry-After`` only if ``outage_retry_after`` says so), then well again; it publishes
  throughout, an article every 2 s, so the 7 published during the outage appear on its hub
  after it.
- ``paginated`` (``127.0.0.53``): the hub shows its latest 5 links, with ``rel="next"`` (in
  the head and as a link) to ``?page=2``, which links ``?page=3``; articles come 12 at a time
  every 20 s, so each burst overflows the first page.
- ``control`` (``127.0.0.54``): an ordinary hub of the latest 20, an article every 5 s.

Every request is logged with its time, host, path and the status it got; every response that
carries ``Retry-After`` opens a window on its host, so a test can count the requests that
arrived inside a window the host had announced (:meth:`PushbackSite.inside_windows`).
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

# Scrapy's download slot is the host name: one loopback address per behaviour keeps each
# host's requests, delays and refusals apart.
HOSTS = {
    "rate_limited": "127.0.0.51",
    "outage": "127.0.0.52",
    "paginated": "127.0.0.53",
    "control": "127.0.0.54",
}
HUB = "/news/"
HORIZON = 600.0  # s of schedule: far past any crawl here
_ARTICLE = re.compile(r"^/a/(\d+)\.html$")


def _every(period: float) -> tuple[float, ...]:
    return tuple(period * k for k in range(1, int(HORIZON / period) + 1))


def _bursts(size: int, first: float, period: float) -> tuple[float, ...]:
    # The articles of a burst appear together; their numbers still order them newest first.
    return tuple(first + period * k for k in range(int(HORIZON / period)) for _ in range(size))


@dataclass(frozen=True)
class Section:
    times: tuple[float, ...]  # s after the clock starts at which each article appears, sorted
    per_page: int  # links a hub page shows
    pages: int = 1  # hub pages, each but the last linking the next with rel="next"


SECTIONS = {
    "rate_limited": Section(_every(6.0), per_page=20),
    "outage": Section(_every(2.0), per_page=20),
    "paginated": Section(_bursts(12, first=10.0, period=20.0), per_page=5, pages=3),
    "control": Section(_every(5.0), per_page=20),
}


@dataclass(frozen=True)
class Hit:
    at: float  # s after the clock started
    wall: float  # time.time() when it arrived: what Retry-After windows are in
    host: str
    path: str  # with its query
    status: int


@dataclass
class Coverage:
    """A section's articles published before a cutoff, and those of them served with 200."""

    published: list[int] = field(default_factory=list)
    fetched: list[int] = field(default_factory=list)

    @property
    def share(self) -> float:
        return len(self.fetched) / len(self.published) if self.published else 1.0

    def __str__(self) -> str:
        return f"{len(self.fetched)}/{len(self.published)}"


class PushbackSite:
    """The four hosts. ``retry_after``: s a 429 asks the client to wait; ``min_gap``: s the
    rate-limited host wants between requests; ``outage``: (start, end) s of the 503s;
    ``outage_retry_after``: s the 503s ask for (None: no header)."""

    def __init__(
        self,
        *,
        retry_after: float = 5.0,
        min_gap: float = 1.0,
        outage: tuple[float, float] = (15.0, 30.0),
        outage_retry_after: float | None = None,
    ) -> None:
        self.retry_after = retry_after
        self.min_gap = min_gap
        self.outage = outage
        self.outage_retry_after = outage_retry_after
        self.started: float | None = None  # the first request starts the clock: no backlog
        self.log: list[Hit] = []
        # host -> (from, until) in time.time(): what each Retry-After announced (wall time, so
        # that moving the clock on with advance() leaves them where they were)
        self.windows: dict[str, list[tuple[float, float]]] = {host: [] for host in HOSTS.values()}
        self._last_accepted: dict[str, float] = {}  # host -> s of the last request not refused
        self.lock = threading.Lock()
        self._servers = {
            name: ThreadingHTTPServer((host, 0), _handler(self, name))
            for name, host in HOSTS.items()
        }
        for server in self._servers.values():
            server.daemon_threads = True
        self._threads: list[threading.Thread] = []

    def base(self, name: str) -> str:
        return f"http://{HOSTS[name]}:{self._servers[name].server_address[1]}"

    def hub_url(self, name: str) -> str:
        return self.base(name) + HUB

    def sources(self) -> list[str]:
        return [self.hub_url(name) for name in SECTIONS]

    def start(self) -> PushbackSite:
        for server in self._servers.values():
            # (a short poll: stop() waits for each server's loop to notice, four of them)
            thread = threading.Thread(
                target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
            )
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        for server in self._servers.values():
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    def advance(self, seconds: float) -> None:
        """Move the site's clock on (starting it if need be), for quick checks of the site."""
        with self.lock:
            self.started = (time.time() if self.started is None else self.started) - seconds

    # -- what it publishes ---------------------------------------------------------------
    def elapsed(self, now: float | None = None) -> float:
        if self.started is None:
            return 0.0
        return (time.time() if now is None else now) - self.started

    def published(self, name: str, elapsed: float | None = None) -> int:
        """How many articles ``name`` has published ``elapsed`` s after the start (now)."""
        when = self.elapsed() if elapsed is None else elapsed
        return bisect.bisect_left(SECTIONS[name].times, when) if when > 0 else 0

    # -- what happened -------------------------------------------------------------------
    def hits(self, name: str) -> list[Hit]:
        with self.lock:
            return [hit for hit in self.log if hit.host == HOSTS[name]]

    def coverage(self, cutoff: float) -> dict[str, Coverage]:
        """Per section, its articles published before ``cutoff`` s after the start, and which
        of them were served with 200."""
        result = {}
        for name in SECTIONS:
            served = {
                int(match.group(1))
                for hit in self.hits(name)
                if hit.status == 200 and (match := _ARTICLE.match(hit.path))
            }
            published = list(range(self.published(name, cutoff)))
            result[name] = Coverage(published, [i for i in published if i in served])
        return result

    def inside_windows(self) -> dict[str, int]:
        """Per section, the requests its host received inside a ``Retry-After`` window it had
        announced before (after the refusal that announced it, before the window ended)."""
        counts = {}
        for name, host in HOSTS.items():
            with self.lock:
                windows = list(self.windows[host])
            counts[name] = sum(
                any(start < hit.wall < end for start, end in windows) for hit in self.hits(name)
            )
        return counts

    def statuses(self, name: str) -> dict[int, int]:
        counts: dict[int, int] = {}
        for hit in self.hits(name):
            counts[hit.status] = counts.get(hit.status, 0) + 1
        return dict(sorted(counts.items()))

    # -- serving -------------------------------------------------------------------------
    def answer(self, name: str, target: str, now: float) -> tuple[int, dict[str, str], str]:
        """Status, headers and body for ``target`` on ``name``'s host at ``now``; logs it.
        Under the lock: whether a request is refused depends on the one accepted before."""
        with self.lock:
            if self.started is None:
                self.started = now
            elapsed = now - self.started
            status, headers, body = self._answer(name, target, now, elapsed)
            host = HOSTS[name]
            self.log.append(Hit(elapsed, now, host, target, status))
            if "Retry-After" in headers:
                self.windows[host].append((now, now + float(headers["Retry-After"])))
            if status not in (429, 503):
                self._last_accepted[host] = now
        return status, headers, body

    def _answer(
        self, name: str, target: str, now: float, elapsed: float
    ) -> tuple[int, dict[str, str], str]:
        if name == "rate_limited":
            last = self._last_accepted.get(HOSTS[name])
            if last is not None and now - last < self.min_gap:
                return 429, {"Retry-After": f"{self.retry_after:g}"}, _page("slow down", "")
        if name == "outage" and self.outage[0] <= elapsed < self.outage[1]:
            headers = {}
            if self.outage_retry_after is not None:
                headers["Retry-After"] = f"{self.outage_retry_after:g}"
            return 503, headers, _page("down for maintenance", "")
        parts = urlsplit(target)
        article = _ARTICLE.match(parts.path)
        if parts.path == HUB:
            pages = parse_qs(parts.query).get("page", ["1"])
            page = int(pages[0]) if pages[0].isdigit() else 0
            if 1 <= page <= SECTIONS[name].pages:
                return 200, {}, self._hub(name, page, elapsed)
        elif article and int(article.group(1)) < self.published(name, elapsed):
            index = int(article.group(1))
            born = datetime.fromtimestamp(now - elapsed + SECTIONS[name].times[index], timezone.utc)
            head = f'<meta property="article:published_time" content="{born.isoformat()}">'
            body = f'<h1>{name} {index}</h1><p>story {index}</p><a href="{HUB}">back</a>'
            return 200, {}, _page(f"{name} {index}", body, head)
        return 404, {}, _page("not found", "")

    def _hub(self, name: str, page: int, elapsed: float) -> str:
        section = SECTIONS[name]
        newest = self.published(name, elapsed) - 1 - (page - 1) * section.per_page
        links = "".join(
            f'<li><a href="/a/{i}.html">story {i}</a></li>'
            for i in range(newest, max(-1, newest - section.per_page), -1)
        )
        head = more = ""
        if page < section.pages:
            head = f'<link rel="next" href="?page={page + 1}">'
            more = f'<a rel="next" href="?page={page + 1}">older stories</a>'
        return _page(f"{name}, page {page}", f"<h1>{name}</h1><ul>{links}</ul>{more}", head)


def _page(title: str, body: str, head: str = "") -> str:
    return f"<html><head><title>{title}</title>{head}</head><body>{body}</body></html>"


def _handler(site: PushbackSite, name: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            status, headers, body = site.answer(name, self.path, time.time())
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler
