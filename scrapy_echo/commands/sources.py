"""``scrapy echo-sources``: list, add and remove a crawl's sources, running or not."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import NotConfigured, UsageError

from scrapy_echo.commands import saved_state


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "(--jobdir DIR | --redis URL --spider NAME) (list | add URL... | remove URL...)"

    def short_desc(self) -> str:
        return "List, add or remove the sources of an ECHO crawl"

    def long_desc(self) -> str:
        return (
            "list: every source in the crawl's saved state, with its status (active, retired, "
            "removed), crawls, new links and failures, and commands not yet applied. add and "
            "remove: with --jobdir, left in the JOBDIR for the crawl, which applies them "
            "within 5 s while it runs, else when it starts; with --redis, sent to the planner "
            "as events. Adding a retired or removed source brings it back."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        saved_state.add_options(parser)
        parser.add_argument("--json", action="store_true", help="list as JSON Lines")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if not args or args[0] not in ("list", "add", "remove"):
            raise UsageError("say list, add URL... or remove URL...")
        operation, urls = args[0], args[1:]
        assert self.settings is not None
        saved_state.check(opts)
        if operation == "list":
            if urls:
                raise UsageError("list takes no URL")
            self._list(opts)
            return
        if not urls:
            raise UsageError(f"{operation} needs at least one URL")
        try:
            if opts.jobdir:
                from scrapy_echo.inputs.source_control import append_commands

                append_commands(Path(opts.jobdir), operation, urls)
            else:
                self._send(opts, operation, urls)
        except NotConfigured as exc:
            raise UsageError(str(exc)) from None
        print(f"{operation}: {len(urls)} source{'s' * (len(urls) != 1)}")

    def _send(self, opts: argparse.Namespace, operation: str, urls: list[str]) -> None:
        from scrapy_echo.core.events import SourceAdded, SourceRemoved, to_json
        from scrapy_echo.crawler.settings import read_sources

        assert self.settings is not None
        read_sources(urls)
        store = saved_state.redis_store(opts, self.settings)
        pipe = store.client.pipeline(transaction=True)
        for url in urls:
            event = SourceAdded(url) if operation == "add" else SourceRemoved(url)
            pipe.xadd(store.keys["events"], {"d": json.dumps(to_json(event))})
        pipe.execute()

    def _list(self, opts: argparse.Namespace) -> None:
        assert self.settings is not None
        snapshot = saved_state.load(opts, self.settings)
        rows = [status.summary() for status in snapshot["sources"]]
        if opts.jobdir:
            from scrapy_echo.inputs.source_control import pending_commands

            rows += [
                {"url": url, "status": f"pending {operation}"}
                for operation, url in pending_commands(Path(opts.jobdir))
            ]
        if opts.json:
            for row in rows:
                print(json.dumps(row))
            return
        print(f"{'status':<16} {'crawls':>7} {'new links':>10} {'failures':>9}  url")
        for row in rows:
            print(
                f"{row['status']:<16} {row.get('crawls', ''):>7} {row.get('new_links', ''):>10} "
                f"{row.get('failures', ''):>9}  {row['url']}"
            )
