"""The hosts of a trace's web, and a replay's per-host gate (docs/simulator.rst, "Hosts").

A live crawl meets hosts that take one request every so many seconds (``DOWNLOAD_DELAY``,
``DOWNLOAD_SLOTS``, robots ``Crawl-delay``), that refuse for a while (503 with
``Retry-After``), and hubs that show a page's worth of links with the rest on next pages. A
trace may say so of its hosts in ``hosts.csv`` (docs/trace-format.rst), one row per host name
of its sources' URLs:

=============== =========================================================================
column          meaning
=============== =========================================================================
``host``        the host name, as in ``sources.csv``'s URLs
``delay``       seconds between two requests to it (empty or 0: none)
``page_size``   links per hub page, the rest on next pages (empty or 0: one page shows all)
``down_from``,  an outage: from then until then every request to it answers 503 with the
``down_until``  ``Retry-After`` that ends it (both empty: none)
=============== =========================================================================

A page is on its source's host. The replay's gate (:class:`HostGate`) keeps each host's next
free moment, so the core dispatches only among sources whose host is free, exactly as the live
scheduler masks busy download slots (:meth:`~scrapy_echo.core.crawl.CrawlCore.dispatch`'s
``blocked``).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.sim.trace_files import csv_rows, find_file


@dataclass(frozen=True)
class WebHosts:
    """What a trace says of its hosts (``hosts.csv``); a host it does not name takes every
    request at once, shows every link on one page and never goes down."""

    delay: dict[str, float] = field(default_factory=dict)
    page_size: dict[str, int] = field(default_factory=dict)
    outages: dict[str, tuple[float, float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for host, value in self.delay.items():
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"delay of {host!r} must be a finite number >= 0, got {value!r}")
        for host, size in self.page_size.items():
            if size < 0:
                raise ValueError(f"page_size of {host!r} must be >= 0, got {size!r}")
        for host, (start, end) in self.outages.items():
            if not (start < end):
                raise ValueError(f"outage of {host!r} must end after it starts: {start!r}, {end!r}")

    def __bool__(self) -> bool:
        return bool(self.delay or self.page_size or self.outages)

    @property
    def names(self) -> list[str]:
        return sorted({*self.delay, *self.page_size, *self.outages})


def host_of(url: str) -> str:
    return urlsplit(url).hostname or ""


def load_hosts(root: Path, known: set[str]) -> WebHosts | None:
    """``hosts.csv`` of the trace in ``root``, if it has one; ``known``: its sources' hosts
    (a row naming another is a mistake, refused)."""
    if find_file(root, "hosts", required=False) is None:
        return None
    delay: dict[str, float] = {}
    page_size: dict[str, int] = {}
    outages: dict[str, tuple[float, float]] = {}
    for row in csv_rows(root, "hosts", ("host",)):
        host = row.text("host")
        if host not in known:
            raise row.error("host", f"{host!r} is no source's host")
        if host in delay or host in page_size or host in outages:
            raise row.error("host", f"{host!r} is listed twice")
        wait = row.number("delay", low=0.0, empty=0.0)
        if wait:
            delay[host] = wait
        size = row.count("page_size")
        if size:
            page_size[host] = size
        start = row.number("down_from", low=0.0, empty=math.nan)
        end = row.number("down_until", low=0.0, empty=math.nan)
        if math.isnan(start) != math.isnan(end):
            raise row.error("down_until", "down_from and down_until go together")
        if not math.isnan(start):
            if end <= start:
                raise row.error("down_until", f"{end!r} is not after down_from ({start!r})")
            outages[host] = (start, end)
    return WebHosts(delay, page_size, outages)


def write_hosts(hosts: WebHosts | None, root: Path) -> None:
    """Write ``hosts.csv`` (none, and an old one removed, for a trace without hosts)."""
    path = root / "hosts.csv"
    (root / "hosts.csv.gz").unlink(missing_ok=True)
    if not hosts:
        path.unlink(missing_ok=True)
        return
    with path.open("w", encoding="utf-8", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["host", "delay", "page_size", "down_from", "down_until"])
        for host in hosts.names:
            start, end = hosts.outages.get(host, ("", ""))
            out.writerow(
                [
                    host,
                    repr(hosts.delay[host]) if host in hosts.delay else "",
                    hosts.page_size.get(host, ""),
                    start if start == "" else repr(start),
                    end if end == "" else repr(end),
                ]
            )


def first_sources(
    link_page: NDArray[np.intp],
    link_source: NDArray[np.intp],
    appeared: NDArray[np.float64],
    pages: int,
) -> NDArray[np.intp]:
    """Each page's source: the one whose link to it appeared first (its host is the page's)."""
    order = np.lexsort((appeared, link_page))
    listed, first = np.unique(link_page[order], return_index=True)
    own = np.zeros(pages, dtype=np.intp)
    own[listed] = link_source[order][first]
    return own


class HostGate:
    """Each host's next free moment in a replay; hosts numbered as the sources' first show
    them, a page on the host of the source that listed it first.

    A request to a host makes it busy for its delay, or for the download, whichever is
    longer (one request at a time per host, as ``CONCURRENT_REQUESTS_PER_DOMAIN = 1``); a
    host that refuses is held until its ``Retry-After`` (at most ``longest_hold``)."""

    def __init__(
        self,
        hosts: WebHosts,
        source_urls: list[str],
        page_source: NDArray[np.intp],
        *,
        download_time: float,
        longest_hold: float,
    ) -> None:
        names: dict[str, int] = {}
        self.host = np.array(
            [names.setdefault(host_of(url), len(names)) for url in source_urls], dtype=np.intp
        )
        self.page_host: list[int] = self.host[page_source].tolist() if self.host.size else []
        self.names = list(names)
        self.delay = [max(hosts.delay.get(name, 0.0), download_time) for name in self.names]
        self.page_size = [hosts.page_size.get(name, 0) for name in self.names]
        self.outage = [hosts.outages.get(name) for name in self.names]
        self.free_at = np.zeros(len(self.names))
        # A Retry-After longer than this holds the host this long (ECHO_FAILURE_BACKOFF_MAX,
        # the live politeness's bound: a host asking for a day would stop its sources).
        self.longest_hold = longest_hold
        self.refusals = 0

    def blocked(self, now: float) -> NDArray[np.bool_] | None:
        """Per source, whether its host is busy at ``now``; ``None`` when none is."""
        busy = self.free_at > now
        return busy[self.host] if busy.any() else None

    def source_host(self, source: int) -> int:
        return int(self.host[source])

    def free(self, host: int, now: float) -> bool:
        return bool(self.free_at[host] <= now)

    def take(self, host: int, now: float) -> float | None:
        """A request to ``host`` at ``now``: the host is busy for its delay. Returns the
        ``Retry-After`` it answers with if it is down (it is then held that long)."""
        outage = self.outage[host]
        if outage is not None and outage[0] <= now < outage[1]:
            self.refusals += 1
            retry_after = outage[1] - now
            # (Held for its Retry-After, and its delay after the refused request still runs.)
            hold = min(retry_after, self.longest_hold)
            self.free_at[host] = now + max(hold, self.delay[host])
            return retry_after
        self.free_at[host] = now + self.delay[host]
        return None

    def capacity_by_url(self, urls: list[str]) -> dict[str, float]:
        """Requests per second each host takes (``1/delay``; ``inf`` without one), keyed by
        the host names of ``urls``, the replay's URLs of the sources in trace order: what the
        live crawl's politeness gives the plan (``Politeness.capacity``)."""
        out: dict[str, float] = {}
        for url, h in zip(urls, self.host.tolist(), strict=True):
            delay = self.delay[h]
            out[host_of(url)] = 1.0 / delay if delay > 0 else math.inf
        return out

    def page_size_of(self, source: int) -> int:
        return self.page_size[int(self.host[source])]


__all__ = ["HostGate", "WebHosts", "first_sources", "host_of", "load_hosts", "write_hosts"]
