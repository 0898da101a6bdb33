"""``scrapy echo-discover``: content sources for a list of sites, by the ECHO paper's procedure.

Lefortier et al. (section 3) found that the pages where new pages appear are few and close to
the main page: 3k sources covered 80% of new ephemeral pages, and 86% of sources were a main
page or one hop from it. So for each host this command:

1. fetches the main page twice, ``--interval`` seconds apart;
2. takes the same-site pages it links to on both visits (links that stay are sections, lists
   and feeds; links that come and go are the new pages themselves);
3. fetches each of those and drops those that state a publication date within the last
   ``--max-age`` days (an article still on the front page is content, not a source);
4. writes the main page, the feeds it advertises and the pages kept, one URL per line, ready
   for ``ECHO_SOURCES``.

With ``--interval 0`` there is one visit, and a linked page is kept only if it is dated older
than ``--max-age`` days. Links and feeds on hosts the address guard refuses (link-local,
metadata, loopback or private other than the given hosts') are neither fetched nor written.

Limits: sources deeper than one hop are not found; a section linked only some of the time is
missed; a dated hub is dropped. Start the crawl with the list and let ECHO's schedule tell
which sources are worth their crawls.
"""

from __future__ import annotations

import argparse
import csv
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, ClassVar

import scrapy
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import DontCloseSpider, UsageError

from scrapy_echo.crawler.settings import read_sources
from scrapy_echo.sources.address_guard import AddressGuard
from scrapy_echo.sources.outlinks import extract_outlinks, published_time

_FEED_TYPES = ("application/rss+xml", "application/atom+xml")


class DiscoverSpider(scrapy.Spider):
    name = "echo-discover"
    custom_settings = {"ADDONS": {}, "ECHO_ENABLED": False}  # noqa: RUF012 (Scrapy's own)

    def __init__(self, mains: list[str], interval: float, max_age: float, max_links: int,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.mains, self.interval, self.max_links = mains, interval, max_links
        self.guard = AddressGuard.for_crawl(mains)  # (the pages' links are theirs, not ours)
        self.newest_old = time.time() - max_age * 86400  # dated after this: new content
        self.visits: dict[str, list[set[str]]] = defaultdict(list)
        self.feeds: dict[str, list[str]] = defaultdict(list)
        self.kept: dict[str, list[str]] = defaultdict(list)
        self.first_done = 0.0
        self.second_sent = False

    @classmethod
    def from_crawler(cls, crawler: Any, *args: Any, **kwargs: Any) -> DiscoverSpider:
        spider: DiscoverSpider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.idle, signal=scrapy.signals.spider_idle)
        return spider

    async def start(self) -> Any:
        for main in self.mains:
            yield scrapy.Request(main, self.parse_main, dont_filter=True, cb_kwargs={"main": main})

    def parse_main(self, response: Any, main: str) -> Any:
        links = extract_outlinks(response, None, same_site=True, limit=5000, guard=self.guard)
        self.visits[main].append({link.url for link in links} - {main})
        if len(self.visits[main]) == 1:
            self.first_done = time.time()
            for href in response.css("link[rel=alternate]"):
                if href.attrib.get("type", "") in _FEED_TYPES and href.attrib.get("href"):
                    feed = response.urljoin(href.attrib["href"])
                    if self.guard.allows(feed):
                        self.feeds[main].append(feed)
        if self.interval <= 0 or len(self.visits[main]) == 2:
            yield from self._check(main)

    def _check(self, main: str) -> Any:
        visits = self.visits[main]
        candidates = set.intersection(*visits) if self.interval > 0 else visits[0]
        for url in sorted(candidates)[: self.max_links]:
            yield scrapy.Request(url, self.parse_candidate, cb_kwargs={"main": main})

    def parse_candidate(self, response: Any, main: str) -> None:
        stated = published_time(response)
        recent = stated is not None and stated > self.newest_old
        # Two visits: it stayed on the main page and is not fresh content. One visit: only
        # what is dated old.
        keep = not recent if self.interval > 0 else stated is not None and not recent
        if keep:
            self.kept[main].append(response.request.url)

    def idle(self) -> None:
        if self.interval <= 0 or self.second_sent:
            return
        if time.time() < self.first_done + self.interval:
            raise DontCloseSpider  # the engine asks again in a few seconds
        self.second_sent = True
        for main in self.mains:
            if self.visits[main]:
                request = scrapy.Request(main, self.parse_main, dont_filter=True,
                                         cb_kwargs={"main": main})  # fmt: skip
                self.crawler.engine.crawl(request)
        raise DontCloseSpider


class Command(ScrapyCommand):
    requires_project = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_LEVEL": "INFO"}

    def syntax(self) -> str:
        return "HOSTS -o FILE [--interval S] [--max-age DAYS]"

    def short_desc(self) -> str:
        return "Find content sources for a list of sites (main pages and their sections)"

    def long_desc(self) -> str:
        return (__doc__ or "").strip()

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("-o", "--output", required=True, help="sources file to write")
        parser.add_argument(
            "--interval",
            type=float,
            default=600.0,
            help="seconds between the two visits of each main page (600; "
            "0: one visit, keep only pages dated older than --max-age)",
        )
        parser.add_argument(
            "--max-age",
            type=float,
            default=3.0,
            help="a page dated within this many days is content (3)",
        )
        parser.add_argument("--max-links", type=int, default=300,
                            help="linked pages checked per host (300)")  # fmt: skip

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give the hosts: a file with one per line, or a comma list")
        hosts = [h.strip() for h in _read_hosts(args[0]) if h.strip()]
        mains = list(read_sources([h if "://" in h else f"https://{h}/" for h in hosts]))
        assert self.crawler_process is not None
        crawler = self.crawler_process.create_crawler(DiscoverSpider)
        self.crawler_process.crawl(crawler, mains=mains, interval=opts.interval,
                                   max_age=opts.max_age, max_links=opts.max_links)  # fmt: skip
        self.crawler_process.start()
        spider: DiscoverSpider = crawler.spider  # type: ignore[assignment]
        lines = [f"# echo-discover: {len(mains)} hosts, visits {opts.interval:g} s apart"]
        for main in mains:
            found = [main, *spider.feeds[main], *sorted(spider.kept[main])]
            lines += list(dict.fromkeys(found)) if spider.visits[main] else []
            print(f"{main}: {len(found) - 1} sources besides the main page"
                  if spider.visits[main] else f"{main}: unreachable, skipped")  # fmt: skip
        Path(opts.output).write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {len(lines) - 1} sources to {opts.output}")


def _read_hosts(value: str) -> list[str]:
    """Hosts from a comma list or a file: one a line (``#`` starts a comment), or a CSV whose
    header names a ``site`` column, as ``scrapy echo-rank-sites`` writes."""
    path = Path(value)
    if "," not in value and path.exists():
        text = path.read_text(encoding="utf-8-sig")  # spreadsheets start files with a BOM
        lines = [ln.split("#")[0] for ln in text.splitlines()]
        filled = [ln for ln in lines if ln.strip()]
        header = [cell.strip().lower() for cell in next(csv.reader(filled[:1]), [])]
        if "site" in header:
            column = header.index("site")
            return [row[column] for row in csv.reader(filled[1:]) if len(row) > column]
        return lines
    return value.split(",")
