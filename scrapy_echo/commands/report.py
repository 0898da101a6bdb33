"""``scrapy echo-report``: plots and a one-page HTML report of a crawl's saved ECHO state."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, ClassVar

from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from scrapy_echo.commands import saved_state


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
        saved_state.add_options(parser)
        parser.add_argument("--out", default="echo-report", help="output folder (echo-report)")
        parser.add_argument("--budget", type=float, default=None, help="requests/s to solve for")

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        from scrapy_echo.commands.state_report import Report

        assert self.settings is not None
        snapshot = saved_state.load(opts, self.settings)
        policy = self.settings.get("ECHO_POLICY", "echo-newpages")
        report = Report.from_snapshot(snapshot, policy=policy, budget=opts.budget)
        try:
            written = report.write(Path(opts.out))
        except ImportError:
            raise UsageError("plots need matplotlib: pip install 'scrapy-echo[plots]'") from None
        print(report.summary_text())
        print(f"wrote {len(written)} files to {opts.out}: {', '.join(p.name for p in written)}")
