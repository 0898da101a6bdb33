"""A small news site served from a thread, for end-to-end crawls of the real plugin.

Sections publish an article every ``period`` seconds from the site's start (``None``: a dead
section), or at the offsets ``times`` gives; each hub page lists its latest ``hub_items``
articles plus navigation links to every section, with an ETag (a matching ``If-None-Match``
gets a 304). The server records every hit and when each article was first fetched, and can
write a click feed for the fetched articles: each gets ``profit`` expected clicks in all,
decaying at rate ``decay`` from publication. It can also write a feed of noisy change signals
naming the hubs (:meth:`LocalNewsSite.write_signals`).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import math
import random
import re
import threading
import time
import weakref
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Section:
    period: float | None  # seconds between articles; None: never publishes
    hub_items: int = 10
    profit: float = 1.0  # expected clicks per article, in all
    decay: float = 0.2  # 1/s
    times: tuple[float, ...] | None = None  # s after the start of each article, if not periodic
    edits: float | None = None  # s between edits of each article after it appears (None: never)


class LocalNewsSite:
    """``host``: the loopback address it binds (each is its own download slot); ``disallow``:
    path prefixes its robots.txt disallows; ``crawl_delay``: the ``Crawl-delay`` it asks
    for there; ``dies_after``: seconds after which it answers
    every request with 503; ``slow``: (share, seconds): that share of the articles (every
    ``1/share``-th) answers only after that many seconds; ``flaky``: how each article's first
    requests fail, in order (``"timeout"``: no answer for ``flaky_sleep`` s, then a 503;
    ``"503"``), before it answers."""

    def __init__(
        self,
        sections: dict[str, Section],
        *,
        host: str = "127.0.0.1",
        disallow: tuple[str, ...] = (),
        crawl_delay: float | None = None,
        dies_after: float | None = None,
        slow: tuple[float, float] | None = None,
        flaky: tuple[str, ...] = (),
        flaky_sleep: float = 5.0,
    ) -> None:
        self.sections = sections
        self.host = host
        self.disallow = disallow
        self.crawl_delay = crawl_delay
        self.dies_after = dies_after
        self.slow = slow
        self.flaky, self.flaky_sleep = flaky, flaky_sleep
        self.attempts: Counter[str] = Counter()  # requests per article path
        self.started = time.time()
        self.hits: Counter[str] = Counter()
        # (time, path) of every request; the time is the connection's accept (one request a
        # connection: HTTP/1.0), before a handler thread starts, which lags on a loaded machine
        self.hit_log: list[tuple[float, str]] = []
        self.first_fetch: dict[str, float] = {}
        self.lock = threading.Lock()
        self._server = _StampingServer((host, 0), _handler(self))
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def hub_url(self, name: str) -> str:
        return f"{self.url}/s/{name}/"

    def start(self) -> LocalNewsSite:
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        for thread in self._threads:
            thread.join(timeout=5)

    # -- content --------------------------------------------------------------------------
    def published(self, name: str, now: float | None = None) -> int:
        """How many articles ``name`` has published by ``now``."""
        section = self.sections[name]
        elapsed = (time.time() if now is None else now) - self.started
        if section.times is not None:
            return bisect.bisect_right(section.times, elapsed)
        if section.period is None:
            return 0
        return max(0, math.floor(elapsed / section.period))

    def published_at(self, name: str, index: int) -> float:
        section = self.sections[name]
        if section.times is not None:
            return self.started + section.times[index]
        assert section.period is not None
        return self.started + (index + 1) * section.period

    def hits_since(self, path: str, since: float) -> int:
        return sum(1 for t, p in self.hit_log if p == path and t >= since)

    def article_hits(self, name: str) -> int:
        return sum(n for path, n in self.hits.items() if path.startswith(f"/a/{name}/"))

    # -- clicks ---------------------------------------------------------------------------
    def write_clicks(self, feed: Path, *, every: float = 0.25, extra_lines: list[str] = ()) -> None:
        """Append click rows for fetched articles to ``feed`` every ``every`` seconds (after
        ``extra_lines``, written first as they are), until :meth:`stop`."""
        with open(feed, "a", encoding="utf-8") as handle:
            for line in extra_lines:
                handle.write(line + "\n")
        thread = threading.Thread(target=self._click_loop, args=(feed, every), daemon=True)
        thread.start()
        self._threads.append(thread)

    def _click_loop(self, feed: Path, every: float) -> None:
        last = time.time()
        while not self._stop.wait(every):
            now = time.time()
            rows = self.click_rows(last, now)
            with open(feed, "a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows)
            last = now

    # -- change signals ---------------------------------------------------------------------
    def write_signals(
        self, feed: Path, *, recall: float, precision: float, seed: int, every: float = 0.1
    ) -> None:
        """Append signal rows naming hubs to ``feed`` as they fall due, until :meth:`stop`:
        each article's hub is signalled when it appears with probability ``recall``, and
        false signals at random times make a signal true with probability ``precision``."""
        rows = self.signal_times(recall=recall, precision=precision, seed=seed)
        thread = threading.Thread(target=self._signal_loop, args=(feed, rows, every), daemon=True)
        thread.start()
        self._threads.append(thread)

    def signal_times(
        self, *, recall: float, precision: float, seed: int
    ) -> list[tuple[float, str]]:
        """``(seconds after the start, hub URL)`` of every signal, sorted; only sections with
        ``times``."""
        rng = random.Random(seed)
        rows = []
        for name, section in self.sections.items():
            if not section.times:
                continue
            true = [t for t in section.times if rng.random() < recall]
            false_count = round(len(true) * (1.0 - precision) / precision)
            false = [rng.uniform(0.0, section.times[-1]) for _ in range(false_count)]
            rows += [(t, self.hub_url(name)) for t in true + false]
        return sorted(rows)

    def _signal_loop(self, feed: Path, rows: list[tuple[float, str]], every: float) -> None:
        done = 0
        while not self._stop.wait(every) and done < len(rows):
            elapsed = time.time() - self.started
            due = bisect.bisect_right(rows, (elapsed, "\uffff"))
            with open(feed, "a", encoding="utf-8") as handle:
                handle.writelines(
                    json.dumps({"url": url, "ts": self.started + t}) + "\n"
                    for t, url in rows[done:due]
                )
            done = due

    def click_rows(self, last: float, now: float) -> list[dict[str, object]]:
        """Click rows for the clicks fetched articles got between ``last`` and ``now``."""
        rows = []
        with self.lock:
            fetched = list(self.first_fetch.items())
        for path, fetched_at in fetched:
            name, index = _parse_article(path)
            spec = self.sections[name]
            born = self.published_at(name, index)
            a1, a2 = max(last, fetched_at) - born, now - born
            if a2 <= a1:
                continue
            clicks = spec.profit * (math.exp(-spec.decay * a1) - math.exp(-spec.decay * a2))
            if clicks > 1e-9:
                rows.append({"url": self.url + path, "ts": now, "clicks": clicks})
        return rows

    def profit_caught(self, since: float, until: float) -> float:
        """What the fetched articles published in ``[since, until)`` were still worth when
        first fetched: each ``profit e^{-decay (fetched - published)}``."""
        total = 0.0
        with self.lock:
            fetched = list(self.first_fetch.items())
        for path, fetched_at in fetched:
            name, index = _parse_article(path)
            spec = self.sections[name]
            born = self.published_at(name, index)
            if since <= born < until:
                total += spec.profit * math.exp(-spec.decay * max(0.0, fetched_at - born))
        return total


class _StampingServer(ThreadingHTTPServer):
    """Notes when each connection was accepted, for the handler to stamp its request with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.accepted: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()

    def process_request(self, request: Any, client_address: Any) -> None:
        self.accepted[request] = time.time()
        super().process_request(request, client_address)


_ARTICLE = re.compile(r"^/a/([\w-]+)/(\d+)\.html$")
_HUB = re.compile(r"^/s/([\w-]+)/$")


def _parse_article(path: str) -> tuple[str, int]:
    match = _ARTICLE.match(path)
    assert match
    return match.group(1), int(match.group(2))


def _handler(site: LocalNewsSite) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            server: Any = self.server
            stamp = server.accepted.pop(self.request, None) or time.time()
            with site.lock:
                site.hits[path] += 1
                site.hit_log.append((stamp, path))
            hub, article = _HUB.match(path), _ARTICLE.match(path)
            dead = site.dies_after is not None and time.time() - site.started >= site.dies_after
            if dead:
                self._send(503, "<html><body>down</body></html>")
            elif path == "/robots.txt":
                rules = "".join(f"Disallow: {prefix}\n" for prefix in site.disallow)
                if site.crawl_delay is not None:
                    rules += f"Crawl-delay: {site.crawl_delay:g}\n"
                self._send(200, f"User-agent: *\n{rules}", content_type="text/plain")
            elif path == "/":
                self._front()
            elif hub and hub.group(1) in site.sections:
                self._hub(hub.group(1))
            elif article and article.group(1) in site.sections:
                self._article(path, article.group(1), int(article.group(2)))
            else:
                self._send(404, "<html><body>not found</body></html>")

        def _hub(self, name: str) -> None:
            count = site.published(name)
            etag = f'"{name}-{count}"'
            if self.headers.get("If-None-Match") == etag:
                with site.lock:
                    site.hits["304"] += 1
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            latest = range(count - 1, max(-1, count - 1 - site.sections[name].hub_items), -1)
            nav = "".join(f'<a href="/s/{other}/">{other}</a> ' for other in site.sections)
            items = "".join(f'<li><a href="/a/{name}/{i}.html">story {i}</a></li>' for i in latest)
            self._send(200, f"<html><body><nav>{nav}</nav><ul>{items}</ul></body></html>", etag)

        def _front(self) -> None:
            """Sections, the newest story of each, and a feed link: a main page."""
            nav = "".join(f'<a href="/s/{name}/">{name}</a> ' for name in site.sections)
            newest = "".join(
                f'<li><a href="/a/{name}/{site.published(name) - 1}.html">top {name}</a></li>'
                for name in site.sections
                if site.published(name)
            )
            feed = '<link rel="alternate" type="application/rss+xml" href="/feed.xml">'
            self._send(200, f"<html><head>{feed}</head><body><nav>{nav}</nav>"
                            f"<ul>{newest}</ul></body></html>")  # fmt: skip

        def _article(self, path: str, name: str, index: int) -> None:
            if index >= site.published(name):
                self._send(404, "<html><body>not yet</body></html>")
                return
            with site.lock:
                site.attempts[path] += 1
                attempt = site.attempts[path]
            if attempt <= len(site.flaky):
                if site.flaky[attempt - 1] == "timeout":
                    time.sleep(site.flaky_sleep)
                # (After a timeout the client is gone: that was the point.)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(503, "<html><body>try again</body></html>")
                return
            with site.lock:
                site.first_fetch.setdefault(path, time.time())
            if site.slow is not None and index % round(1 / site.slow[0]) == 0:
                time.sleep(site.slow[1])
            published = site.published_at(name, index)
            born = datetime.fromtimestamp(published, timezone.utc)
            edits = site.sections[name].edits
            version = 0 if edits is None else math.floor((time.time() - published) / edits)
            self._send(
                200,
                '<html><head><meta property="article:published_time" '
                f'content="{born.isoformat()}"></head><body><h1>{name} {index}</h1>'
                f'<p>version {version}</p><a href="/s/{name}/">back</a></body></html>',
            )

        def _send(
            self,
            status: int,
            body: str,
            etag: str | None = None,
            content_type: str = "text/html; charset=utf-8",
        ) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            if etag:
                self.send_header("ETag", etag)
            self.end_headers()
            self.wfile.write(data)

    return Handler
