"""The demo: ECHO against stock Scrapy on the same simulated news site, side by side.

Runs ``scrapy crawl news`` (ECHO-newpages) and ``scrapy crawl baseline`` (Scrapy's stock
scheduler recrawling the same hubs round-robin, new articles first) side by side, each against
its own copy of the embedded site with the same seed and at the same request rate, then prints
what the site saw each one catch.

Run from ``example_project/``: ``python -m echo_demo [--seconds 120] [--rate 3] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent


def start_crawl(name: str, args: argparse.Namespace, settings: dict[str, Any]) -> Any:
    """Start ``scrapy crawl name`` in the background; returns the process."""
    out = Path(args.out)
    (out / f"{name}-score.json").unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "scrapy", "crawl", name,
        "-a", f"seed={args.seed}", "-a", f"score_out={out / (name + '-score.json')}",
        "-a", f"warmup={args.warmup}", "-a", f"until={args.seconds - 5}",
        "-s", f"CLOSESPIDER_TIMEOUT={args.seconds}", "-s", f"LOG_LEVEL={args.log_level}",
        "-s", f"LOG_FILE={out / (name + '.log')}",
    ]  # fmt: skip
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    return subprocess.Popen(command, cwd=PROJECT)


def finish_crawl(name: str, process: Any, args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    code = process.wait()
    score_file = out / f"{name}-score.json"
    if code != 0 or not score_file.exists():
        sys.exit(f"the {name} crawl failed (exit {code}); see {out / (name + '.log')}")
    score: dict[str, Any] = json.loads(score_file.read_text())
    return score


def table(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| crawler | articles published | found | crawled | median delay (s) | profit caught "
        "| fraction of upper bound | requests/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, s in rows.items():
        delay = "-" if s.get("median_delay") is None else f"{s['median_delay']:.1f}"
        lines.append(
            f"| {label} | {s['published']} | {s['found']} | {s['fetched']} | {delay} "
            f"| {s['profit']:.1f} | {s['fraction']:.1%} | {s['requests_per_second']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="length of the crawls (120)")
    parser.add_argument("--rate", type=float, default=3.0, help="requests per second (3)")
    parser.add_argument("--seed", type=int, default=0, help="site seed (0)")
    parser.add_argument("--warmup", type=float, default=40.0, help="s before scoring (40)")
    parser.add_argument("--out", default="demo-results", help="logs and scores (demo-results)")
    parser.add_argument("--log-level", default="INFO", help="of the crawls' log files (INFO)")
    parser.add_argument("--jobdir", default=None,
                        help="JOBDIR of the ECHO crawl, for `scrapy echo-report` (default: "
                             "<out>/echo-jobdir)")  # fmt: skip
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    feed = out / "clicks.jsonl"
    feed.unlink(missing_ok=True)

    # Both at once, each against its own copy of the site: two light processes on two cores.
    print(
        f"crawling for {args.seconds:g} s (ECHO and the baseline side by side) ...", file=sys.stderr
    )
    started = time.monotonic()
    jobdir = Path(args.jobdir) if args.jobdir else out / "echo-jobdir"
    shutil.rmtree(jobdir, ignore_errors=True)  # a fresh crawl, not a resumed one
    echo_run = start_crawl(
        "news", args, {"ECHO_CRAWL_RATE": args.rate, "ECHO_CLICK_FEED": feed, "JOBDIR": jobdir}
    )
    baseline_run = start_crawl(
        "baseline",
        args,
        {
            "DOWNLOAD_DELAY": 1.0 / args.rate,
            "RANDOMIZE_DOWNLOAD_DELAY": False,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        },
    )
    echo = finish_crawl("news", echo_run, args)
    baseline = finish_crawl("baseline", baseline_run, args)
    print(f"  done in {time.monotonic() - started:.0f} s", file=sys.stderr)
    rows = {"ECHO-newpages": echo, "stock Scrapy, round-robin": baseline}
    print(table(rows))
    ratio = echo["profit"] / baseline["profit"] if baseline["profit"] else float("inf")
    print(f"\nECHO caught {ratio:.2f}x the baseline's profit (seed {args.seed}, "
          f"{args.rate:g} requests/s; articles published {args.warmup:g}-{args.seconds - 5:g} s "
          "into the crawl are scored).")  # fmt: skip
    (out / "demo.json").write_text(json.dumps(rows, indent=2))
    scrapy = Path(sys.executable).with_name("scrapy")  # the virtualenv's, if that is where
    command = scrapy if scrapy.exists() else "scrapy"
    print(f"\nECHO's state is in {jobdir}; for plots and an HTML report of it:\n"
          f"  {command} echo-report --jobdir {jobdir} --out {out / 'report'}")  # fmt: skip


if __name__ == "__main__":
    main()
