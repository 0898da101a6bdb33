"""``scrapy echo-report``: plots and a one-page HTML report of a crawl's saved ECHO state."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return "(--jobdir DIR | --redis URL --spider NAME) [--out DIR]"

    def short_desc(self) -> str:
        return "Report on a crawl's ECHO state: summary, plots and an HTML page"

    def long_desc(self) -> str:
        return (
            "Reads the state an ECHO crawl saved, in its JOBDIR or (distributed mode) in Redis, "
            "re-solves its schedule with the last budget it used (or --budget), prints a "
            "summary and writes intervals.png, new_links.png, estimates.png, profit.png, "
            "budget.png and report.html to --out."
        )

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        parser.add_argument("--jobdir", help="the crawl's JOBDIR")
        parser.add_argument("--redis", help="REDIS_URL of a distributed crawl")
        parser.add_argument("--spider", help="the spider's name (with --redis)")
        parser.add_argument("--prefix", default=None, help="ECHO_REDIS_KEY_PREFIX (echo)")
        parser.add_argument("--out", default="echo-report", help="output folder (echo-report)")
        parser.add_argument("--budget", type=float, default=None, help="requests/s to solve for")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from scrapy_echo.report import Report

        snapshot = self._load(opts)
        assert self.settings is not None
        policy = self.settings.get("ECHO_POLICY", "echo-newpages")
        report = Report.from_snapshot(snapshot, policy=policy, budget=opts.budget)
        try:
            written = report.write(Path(opts.out))
        except ImportError:
            raise UsageError("plots need matplotlib: pip install 'scrapy-echo[plots]'") from None
        print(report.summary_text())
        print(f"wrote {len(written)} files to {opts.out}: {', '.join(p.name for p in written)}")

    def _load(self, opts: argparse.Namespace) -> dict[str, Any]:
        if bool(opts.jobdir) == bool(opts.redis):
            raise UsageError("give one of --jobdir DIR or --redis URL (with --spider NAME)")
        if opts.jobdir:
            from scrapy_echo.jobdir import FILE_NAME, LEGACY_FILE_NAME, read_checkpoint

            for name in (FILE_NAME, LEGACY_FILE_NAME):
                path = Path(opts.jobdir) / name
                if path.exists():
                    return read_checkpoint(path)
            raise UsageError(f"no ECHO state in {opts.jobdir} (no {FILE_NAME})")
        return self._load_redis(opts)

    def _load_redis(self, opts: argparse.Namespace) -> dict[str, Any]:
        from scrapy.settings import BaseSettings

        from scrapy_echo import snapshot
        from scrapy_echo.codec import CodecError
        from scrapy_echo.distributed.scheduler import redis_client
        from scrapy_echo.distributed.store import RedisStore

        if not opts.spider:
            raise UsageError("--redis needs --spider NAME")
        assert self.settings is not None
        prefix = opts.prefix or self.settings.get("ECHO_REDIS_KEY_PREFIX", "echo")
        client = redis_client(BaseSettings({"REDIS_URL": opts.redis}))
        loaded = RedisStore(client, f"{prefix}:{opts.spider}").load_snapshot()
        if loaded is None:
            raise UsageError(f"no ECHO state in Redis under {prefix}:{opts.spider}")
        try:
            return snapshot.read(loaded[0])
        except CodecError as exc:
            raise UsageError(f"the ECHO state in Redis is not a state snapshot: {exc}") from None
