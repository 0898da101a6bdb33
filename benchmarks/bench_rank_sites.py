"""Site ranking speed: ``echo-rank-sites``'s work on a 10^7-row page-view log, against reading
the same file's rows with Python's csv module.

Generates a synthetic CSV log (scrapy_echo.sim.pageview_synth: temporal and non-temporal sites, a
huge non-temporal one and a tiny temporal one, 60 daily bins) of about ``--rows`` rows once,
cached under ``--cache``. Then prints the median time of the full ranking as the command runs
it (read and check every row, sites (hosts) of the pages, fit, fit the pages alive at the
log's start at their possible births, classify, score, write the CSV), the
share of each stage, and the ratio to the baseline (``csv.reader`` over the file, rows
discarded), timed in the same run; then one end-to-end run of ``scrapy echo-rank-sites``.

Run: python benchmarks/bench_rank_sites.py [--rows 10000000] [--repeat 3] [--cache DIR]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from scrapy_echo.inputs.pageview_log import read_page_views, sites_of_pages
from scrapy_echo.model import temporal_sites as ts
from scrapy_echo.model.birth_lag import classify_with_birth_lags, fit_birth_lags
from scrapy_echo.sim.pageview_synth import default_sites, write_log


def log_file(rows: int, cache: Path, seed: int) -> tuple[Path, str]:
    path = cache / f"pageviews-{rows}-{seed}.csv"
    if path.exists():
        return path, "cached"
    cache.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    pilot = write_log(cache / "pilot.csv", default_sites(scale=0.1, seed=seed), seed=seed)
    (cache / "pilot.csv").unlink()
    scale = 0.1 * rows / pilot.rows  # rows grow with the pages, pages with the scale
    write_log(path.with_suffix(".part"), default_sites(scale=scale, seed=seed), seed=seed)
    path.with_suffix(".part").rename(path)  # a cut-short run leaves no half file behind
    return path, f"generated in {time.perf_counter() - start:.1f} s"


def baseline(path: Path) -> int:
    count = 0
    with open(path, newline="", encoding="utf-8") as handle:
        for _ in csv.reader(handle):
            count += 1
    return count


def rank(path: Path, out: Path) -> tuple[dict[str, float], int, int]:
    """The command's pipeline; the seconds of each stage, pages and sites."""
    marks = [time.perf_counter()]
    log = read_page_views(path)
    marks.append(time.perf_counter())
    site, names = sites_of_pages(log.urls)  # hosts, the command's default
    marks.append(time.perf_counter())
    t = log.ts / 86400.0
    curves = ts.fit_interest_curves(log.page, t, log.views, pages=len(log.urls))
    marks.append(time.perf_counter())
    lags = fit_birth_lags(log.page, t, log.views, curves)  # pages alive at the log's start
    marks.append(time.perf_counter())
    classes = classify_with_birth_lags(curves, lags)
    scores = ts.score_sites(site, curves, classes, sites=len(names))
    marks.append(time.perf_counter())
    chosen = scores.order[scores.score[scores.order] >= 0.5]
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["site", "score"])
        writer.writerows([names[i], f"{scores.score[i]:.6f}"] for i in chosen.tolist())
    marks.append(time.perf_counter())
    stages = ("read", "sites", "fit", "births", "classify+score", "write")
    return dict(zip(stages, np.diff(marks).tolist(), strict=True)), len(log.urls), len(names)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "scrapy_echo_bench"
    )
    args = parser.parse_args()

    path, origin = log_file(args.rows, args.cache, args.seed)
    out = args.cache / "ranked.csv"
    base_times, rank_runs = [], []
    for _ in range(args.repeat):  # interleaved, so drift on a noisy machine hits both alike
        start = time.perf_counter()
        rows = baseline(path) - 1
        base_times.append(time.perf_counter() - start)
        rank_runs.append(rank(path, out))
    pages, sites = rank_runs[0][1], rank_runs[0][2]
    size = path.stat().st_size / 2**20
    print(
        f"log: {rows:,} rows, {pages:,} pages, {sites} sites ({path.name}, {size:.0f} MiB; "
        f"{origin})"
    )
    base = statistics.median(base_times)
    totals = [sum(stages.values()) for stages, _, _ in rank_runs]
    total = statistics.median(totals)
    shares = ", ".join(
        f"{name} {statistics.median(run[0][name] for run in rank_runs):.2f}"
        for name in rank_runs[0][0]
    )
    print(
        f"baseline, csv.reader over the rows: median {base:.2f} s "
        f"(min {min(base_times):.2f}, max {max(base_times):.2f}, {args.repeat} runs)"
    )
    print(
        f"rank sites: median {total:.2f} s (min {min(totals):.2f}, max {max(totals):.2f}, "
        f"{args.repeat} runs; {shares} s; {rows / total / 1e6:.2f} M rows/s)"
    )
    print(f"ratio ranking / baseline: {total / base:.2f}x")
    start = time.perf_counter()
    command = subprocess.run(
        [sys.executable, "-m", "scrapy", "echo-rank-sites", str(path), "-o", str(out)],
        cwd=args.cache,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if command.returncode:
        sys.exit(f"scrapy echo-rank-sites failed:\n{command.stderr[-2000:]}")
    written = command.stdout.strip().splitlines()[-1]
    print(f"end to end, scrapy echo-rank-sites (1 run): {seconds:.2f} s ({written})")


if __name__ == "__main__":
    main()
