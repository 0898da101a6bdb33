"""The Scrapy commands: ``scrapy echo-report`` on the demo's JOBDIR, ``scrapy echo-discover``
on the local news site."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from scrapy_echo.core import snapshot
from scrapy_echo.crawler.jobdir import FILE_NAME
from tests.local_site import LocalNewsSite, Section

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
SCRAPY = [sys.executable, "-m", "scrapy"]


def test_echo_report_on_the_demos_jobdir(tmp_path: Path) -> None:
    jobdir, out = tmp_path / "jobdir", tmp_path / "report"
    demo = subprocess.run(
        [sys.executable, "-m", "echo_demo", "--seconds", "25", "--warmup", "10",
         "--out", str(tmp_path / "demo"), "--jobdir", str(jobdir)],
        cwd=ROOT / "example_project", capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert f"--jobdir {jobdir}" in demo.stdout  # the demo says how to get the report
    report = subprocess.run(
        [*SCRAPY, "echo-report", "--jobdir", str(jobdir), "--out", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-3000:]

    for name in ("intervals", "new_links", "estimates", "profit", "budget"):
        data = (out / f"{name}.png").read_bytes()
        assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 2000, name
    page = (out / "report.html").read_text()
    HTMLParser().feed(page)  # parses
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<img ") == 5

    # The summary's numbers are the saved state's.
    state = snapshot.read((jobdir / FILE_NAME).read_bytes())
    text = report.stdout
    sources = int(re.search(r"ECHO report: (\d+) sources", text).group(1))
    scheduled, idle = map(int, re.search(r"\((\d+) scheduled, (\d+) idle;", text).groups())
    source_crawls, page_crawls = map(
        int, re.search(r"crawls: (\d+) of sources, (\d+) of new pages", text).groups()
    )
    new_links = int(re.search(r"(\d+) new links", text).group(1))
    waiting = int(re.search(r"(\d+) pages waiting", text).group(1))
    budget = float(re.search(r"budget ([\d.]+) requests/s", text).group(1))
    assert sources == len(state["sources"]) == 24 == scheduled + idle
    assert source_crawls == sum(s.crawls for s in state["sources"]) > 24
    assert page_crawls == state["crawled_pages"] > 0
    assert new_links == sum(s.new_links for s in state["sources"]) >= page_crawls
    assert waiting == len(state["frontier"])
    assert budget == state["history"][-1]["budget"] == 3.0
    clicks = float(re.search(r"([\d.]+) clicks caught", text).group(1))
    assert clicks == pytest.approx(state["learner"].clicks_caught, abs=0.05) and clicks > 0
    # How well each λ estimator predicted the crawls, as the learner scored them.
    scored = int(re.search(r"new links over (\d+) crawls: learned", text).group(1))
    assert scored == state["learner"].predictive.crawls > 0
    # The P estimators' line shows only once clicks have been scored (two click fits apart).
    batches = state["learner"].click_scores.crawls
    assert ("P estimators" in text) == (batches > 0)


def test_echo_discover_finds_the_sections_not_the_articles(tmp_path: Path) -> None:
    site = LocalNewsSite(
        {
            "world": Section(period=0.5),
            "sport": Section(period=1.0),
            "arts": Section(period=60.0),
            "dead": Section(period=None),
        }
    ).start()
    try:
        time.sleep(1.2)  # every live section has a story on the front page
        out = tmp_path / "sources.txt"
        run = subprocess.run(
            [*SCRAPY, "echo-discover", site.url, "-o", str(out), "--interval", "2"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
    finally:
        site.stop()
    found = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    hubs = {site.hub_url(name) for name in ("world", "sport", "arts", "dead")}
    assert found[0] == site.url  # the main page first
    assert hubs <= set(found)
    assert not [url for url in found if "/a/" in url]  # no article, not even arts' (dated)
    assert set(found) - hubs == {site.url, site.url + "/feed.xml"}  # and the advertised feed
