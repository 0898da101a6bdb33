"""Run the test project's spider with real ``scrapy crawl`` in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).parent / "crawl_project"


@dataclass
class CrawlRun:
    returncode: int
    stats: dict[str, Any]
    log: str


def crawl_command(
    stats_out: Path, settings: dict[str, Any], spider: str = "monitor", **args: str
) -> list[str]:
    command = [sys.executable, "-m", "scrapy", "crawl", spider, "-a", f"stats_out={stats_out}"]
    for name, value in args.items():
        command += ["-a", f"{name}={value}"]
    for name, value in settings.items():
        text = json.dumps(value) if isinstance(value, (list, dict)) else str(value)
        command += ["-s", f"{name}={text}"]
    return command


def crawl(
    tmp_path: Path,
    settings: dict[str, Any],
    *,
    timeout: float = 120,
    spider: str = "monitor",
    **args: str,
) -> CrawlRun:
    """``scrapy crawl <spider>`` with ``settings`` (``-s``) and spider ``args`` (``-a``); its
    stats and log."""
    stats_out = tmp_path / f"stats-{len(list(tmp_path.glob('stats-*')))}.json"
    result = subprocess.run(
        crawl_command(stats_out, settings, spider, **args),
        cwd=PROJECT,
        env=crawl_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    stats = json.loads(stats_out.read_text()) if stats_out.exists() else {}
    return CrawlRun(result.returncode, stats, result.stderr)


def start_crawl(
    stats_out: Path, settings: dict[str, Any], *, stderr: Any = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    """``scrapy crawl monitor`` in the background: to kill it, or to run several at once."""
    return subprocess.Popen(
        crawl_command(stats_out, settings),
        cwd=PROJECT,
        env=crawl_env(),
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )


def crawl_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("SCRAPY_SETTINGS_MODULE", None)
    env["PYTHONPATH"] = str(PROJECT) + os.pathsep + env.get("PYTHONPATH", "")
    return env
