"""The Grafana dashboard drawn against a demo crawl: what an operator would see.

Runs ``scrapy crawl news`` (ECHO-newpages on the embedded site) with its metrics endpoint on,
scrapes it every ``--every`` seconds, then draws each panel of
``docs/grafana/scrapy-echo-dashboard.json`` where Grafana would put it, from the same PromQL
(:mod:`.promql_subset`), into a PNG. No Grafana or Prometheus needed; with them, import the
JSON instead (docs/metrics.rst).

Run from ``example_project/``: ``python -m echo_demo.dashboard [--seconds 120] [--out
dashboard.png]`` (needs ``scrapy-echo[metrics,plots]``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from echo_demo.promql_subset import Sample, Scrapes, evaluate

PROJECT = Path(__file__).resolve().parent.parent
DASHBOARD = PROJECT.parent / "docs" / "grafana" / "scrapy-echo-dashboard.json"


def scrape(url: str) -> Sample:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def run_crawl(seconds: float, every: float, rate: float) -> Scrapes:
    """The demo crawl, scraped every ``every`` s while it runs."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "crawl.log"
        command = [
            sys.executable, "-m", "scrapy", "crawl", "news",
            "-s", "ECHO_METRICS_PORT=0", "-s", f"ECHO_CRAWL_RATE={rate}",
            "-s", "ECHO_METRICS_SOURCES=6", "-s", f"CLOSESPIDER_TIMEOUT={seconds}",
            "-s", f"LOG_FILE={log}", "-s", "LOG_LEVEL=INFO",
        ]  # fmt: skip
        crawl = subprocess.Popen(command, cwd=PROJECT)
        url, scrapes, started = None, [], time.monotonic()
        while crawl.poll() is None:
            time.sleep(every)
            if url is None:
                found = re.search(r"ECHO metrics on (http://\S+/metrics)", _read(log))
                url = found.group(1) if found else None
            if url is not None:
                with contextlib.suppress(OSError):  # (the crawl closing)
                    scrapes.append((time.monotonic() - started, scrape(url)))
        if crawl.returncode != 0:
            sys.exit(f"the crawl failed (exit {crawl.returncode}):\n{_read(log)[-3000:]}")
    return scrapes


def _read(log: Path) -> str:
    return log.read_text() if log.exists() else ""


def draw(dashboard: dict[str, Any], scrapes: Scrapes, out: Path, window: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.gridspec import GridSpec

    panels = dashboard["panels"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels)
    plt.style.use("dark_background")
    fig = plt.figure(figsize=(18, rows * 0.42))
    grid = GridSpec(rows, 24, figure=fig, hspace=2.2, wspace=1.6, top=0.95)
    times = [t for t, _ in scrapes]
    for panel in panels:
        x, y, w, h = (panel["gridPos"][k] for k in "xywh")
        ax = fig.add_subplot(grid[y : y + h - 1, x : x + w])
        for target in panel["targets"]:
            lines: dict[str, list[float]] = {}
            for i in range(len(scrapes)):
                for labels, value in evaluate(target["expr"], scrapes, i, window).items():
                    name = _legend(target["legendFormat"], dict(labels))
                    lines.setdefault(name, [float("nan")] * len(scrapes))[i] = value
            for name, values in sorted(lines.items()):
                ax.plot(times, values, label=name, linewidth=1.3)
        unit = panel["fieldConfig"]["defaults"].get("unit", "")
        ax.set_title(panel["title"], fontsize=10, loc="left")
        ax.set_ylabel({"s": "seconds", "reqps": "requests/s"}.get(unit, ""), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.2)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="upper left", ncol=2, framealpha=0.3)
    fig.suptitle(f"{dashboard['title']}: the demo crawl, {times[-1]:.0f} s (x axis: s into "
                 f"the crawl; rates over {window:g} s)", fontsize=12)  # fmt: skip
    fig.savefig(out, dpi=80, bbox_inches="tight")


def _legend(pattern: str, labels: dict[str, str]) -> str:
    text = re.sub(r"\{\{(\w+)\}\}", lambda m: labels.get(m.group(1), ""), pattern)
    return re.sub(r"^https?://[^/]+", "", text) or text  # a source by its path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="length of the crawl (120)")
    parser.add_argument("--every", type=float, default=2.0, help="s between scrapes (2)")
    parser.add_argument("--rate", type=float, default=3.0, help="requests per second (3)")
    parser.add_argument("--window", type=float, default=20.0,
                        help="s every rate() is taken over (20)")  # fmt: skip
    parser.add_argument("--out", default="dashboard.png", help="the PNG (dashboard.png)")
    args = parser.parse_args()
    dashboard = json.loads(DASHBOARD.read_text())
    print(f"crawling for {args.seconds:g} s with the metrics endpoint on ...", file=sys.stderr)
    scrapes = run_crawl(args.seconds, args.every, args.rate)
    if len(scrapes) < 3:
        sys.exit("too few scrapes to draw: is prometheus_client installed?")
    draw(dashboard, scrapes, Path(args.out), args.window)
    print(f"{len(scrapes)} scrapes; the dashboard drawn in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
