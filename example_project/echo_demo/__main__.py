"""The demo: ECHO against stock Scrapy on the same simulated news site, side by side.

Runs ``scrapy crawl news`` (ECHO-newpages) and ``scrapy crawl baseline`` (Scrapy's stock
scheduler recrawling the same hubs round-robin, new articles first) one after the other, each
against its own copy of the embedded site with the same seed and at the same request rate, then
prints what the site saw each one catch.

Run from ``example_project/``: ``python -m echo_demo [--seconds 75] [--rate 3] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parent.parent


def run_crawl(name: str, args: argparse.Namespace, settings: dict[str, Any]) -> dict[str, Any]:
    out = Path(args.out)
    score_file = out / f"{name}-score.json"
    score_file.unlink(missing_ok=True)
    command = [
        sys.executable, "-m", "scrapy", "crawl", name,
        "-a", f"seed={args.seed}", "-a", f"score_out={score_file}",
        "-a", f"warmup={args.warmup}",
        "-s", f"CLOSESPIDER_TIMEOUT={args.seconds}", "-s", f"LOG_LEVEL={args.log_level}",
        "-s", f"LOG_FILE={out / (name + '.log')}",
    ]  # fmt: skip
    for key, value in settings.items():
        command += ["-s", f"{key}={value}"]
    print(f"running {name} for {args.seconds:g} s ...", file=sys.stderr, flush=True)
    started = time.monotonic()
    result = subprocess.run(command, cwd=PROJECT, check=False)
    if result.returncode != 0 or not score_file.exists():
        sys.exit(f"the {name} crawl failed (exit {result.returncode}); see {out / (name + '.log')}")
    print(f"  done in {time.monotonic() - started:.0f} s", file=sys.stderr)
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
    parser.add_argument("--seconds", type=float, default=75.0, help="length of each crawl (75)")
    parser.add_argument("--rate", type=float, default=3.0, help="requests per second (3)")
    parser.add_argument("--seed", type=int, default=0, help="site seed (0)")
    parser.add_argument("--warmup", type=float, default=20.0, help="s before scoring (20)")
    parser.add_argument("--out", default="demo-results", help="logs and scores (demo-results)")
    parser.add_argument("--log-level", default="INFO", help="of the crawls' log files (INFO)")
    args = parser.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    args.out = str(out)
    feed = out / "clicks.jsonl"
    feed.unlink(missing_ok=True)

    echo = run_crawl("news", args, {"ECHO_CRAWL_RATE": args.rate, "ECHO_CLICK_FEED": feed})
    baseline = run_crawl(
        "baseline",
        args,
        {
            "DOWNLOAD_DELAY": 1.0 / args.rate,
            "RANDOMIZE_DOWNLOAD_DELAY": False,
            "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        },
    )
    rows = {"ECHO-newpages": echo, "stock Scrapy, round-robin": baseline}
    print(table(rows))
    ratio = echo["profit"] / baseline["profit"] if baseline["profit"] else float("inf")
    print(f"\nECHO caught {ratio:.2f}x the baseline's profit (seed {args.seed}, "
          f"{args.rate:g} requests/s, scored after {args.warmup:g} s).")  # fmt: skip
    (out / "demo.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
