"""The metrics endpoint: scraped while a real ``scrapy crawl`` runs against the local site."""

from __future__ import annotations

import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from scrapy.exceptions import NotConfigured
from scrapy.utils.test import get_crawler

from scrapy_echo.crawler.metrics import EchoMetrics, _top
from scrapy_echo.crawler.page_delays import BOUNDS, PageDelays
from tests.crawling import start_crawl
from tests.local_site import LocalNewsSite, Section

FAST = {"ECHO_RESOLVE_INTERVAL": 1, "ECHO_FAILURE_BACKOFF": 1, "LOG_LEVEL": "INFO"}


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the endpoint, by name and labels."""
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def by_source(samples: dict[Any, float], name: str) -> dict[str, float]:
    return {dict(labels)["source"]: v for (n, labels), v in samples.items() if n == name}


def test_a_running_crawl_serves_its_figures(tmp_path: Path) -> None:
    sections = {f"s{i}": Section(period=0.4 + 0.4 * i) for i in range(4)}
    site = LocalNewsSite(sections).start()
    log = tmp_path / "crawl.log"
    settings = {
        **FAST,
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in sections),
        "ECHO_CRAWL_RATE": 6,
        "CLOSESPIDER_TIMEOUT": 12,
        "ECHO_METRICS_PORT": 0,  # any free port: the log says which
        "ECHO_METRICS_SOURCES": 2,  # two sources labelled, two summed as _other
    }
    try:
        with log.open("wb") as err:
            crawl = start_crawl(tmp_path / "stats.json", settings, stderr=err)
            try:
                url = wait_for_endpoint(log)
                samples = scrape(url)
                while samples.get(("echo_page_delay_seconds_count", ()), 0) < 5:
                    assert crawl.poll() is None, log.read_text()[-3000:]
                    time.sleep(0.5)
                    samples = scrape(url)
            finally:
                code = crawl.wait(timeout=60)
        assert code == 0, log.read_text()[-3000:]
    finally:
        site.stop()
    requests = {dict(labels)["lane"]: v for (n, labels), v in samples.items()
                if n == "echo_requests_total"}  # fmt: skip
    assert requests["source"] > 0 and requests["page"] > 0
    assert samples[("echo_budget_pages_per_second", ())] == 6
    assert samples[("echo_holds_state", ())] == 1
    assert samples[("echo_sources", (("status", "active"),))] == 4
    assert samples[("echo_resolves_total", ())] >= 1
    assert samples[("echo_resolve_seconds_total", ())] > 0
    # Per source: the two most valuable labelled, the other two summed; nothing lost.
    links = by_source(samples, "echo_source_new_links_total")
    assert len(links) == 3 and "_other" in links
    labelled = set(links) - {"_other"}
    assert labelled <= {site.hub_url(name) for name in sections}
    assert sum(links.values()) == samples[("echo_stat", (("stat", "echo/pages/new"),))]
    crawls = by_source(samples, "echo_source_crawls_total")
    assert sum(crawls.values()) >= requests["source"] - 6  # (crawls under way not counted)
    values = by_source(samples, "echo_source_value")
    assert min(values[s] for s in labelled) >= values["_other"] / 2  # the top ones by value
    # Freshness: the histogram and the per-source summaries count the same pages.
    waited = by_source(samples, "echo_source_page_delay_seconds_count")
    assert sum(waited.values()) == samples[("echo_page_delay_seconds_count", ())] >= 5
    inf = samples[("echo_page_delay_seconds_bucket", (("le", "+Inf"),))]
    assert inf == samples[("echo_page_delay_seconds_count", ())]
    assert samples[("echo_page_delay_seconds_sum", ())] > 0
    # The crawl over, the port is closed.
    with pytest.raises(urllib.error.URLError):
        scrape(url)


def wait_for_endpoint(log: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"ECHO metrics on (http://\S+/metrics)", log.read_text())
        if found:
            return found.group(1)
        time.sleep(0.2)
    raise AssertionError(f"no metrics endpoint in the log: {log.read_text()[-3000:]}")


def test_metrics_off_unless_a_port_is_set_and_refused_without_the_library(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    addon = {"ADDONS": {"scrapy_echo.Addon": 0}}
    with pytest.raises(NotConfigured) as off:
        EchoMetrics.from_crawler(get_crawler(settings_dict=addon))
    assert not off.value.args  # (bare: Scrapy disables it without a warning)
    with pytest.raises(NotConfigured, match=r"ECHO_METRICS_PORT .* must be a port"):
        EchoMetrics.from_crawler(get_crawler(settings_dict={**addon, "ECHO_METRICS_PORT": 70000}))
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # not installed
    with pytest.raises(ImportError, match=r"pip install 'scrapy-echo\[metrics\]'"):
        get_crawler(settings_dict={**addon, "ECHO_METRICS_PORT": 0})  # (its extensions made)


def test_page_delays_bucket_as_prometheus_counts_them() -> None:
    delays = PageDelays()
    for waited in (0.0, 10.0, 10.5, 86_400.0, 90_000.0):
        delays.fetched("http://a/", appeared=1000.0, t=1000.0 + waited)
    delays.fetched("http://a/", appeared=float("nan"), t=1000.0)  # appearance unknown
    assert delays.count == 5 and delays.by_source["http://a/"][1] == 5
    # "le" buckets: 0 and 10 s are within the first (<= 10), a day within the day's.
    assert delays.buckets[0] == 2 and delays.buckets[1] == 1
    assert delays.buckets[BOUNDS.index(86_400.0)] == 1 and delays.buckets[-1] == 1


def test_the_sources_labelled_are_the_most_valuable() -> None:
    import numpy as np

    assert _top(np.array([1.0, 5.0, 3.0, 5.0]), 2).tolist() == [1, 3]
    assert _top(np.array([1.0, 2.0]), 5).tolist() == [0, 1]
    assert _top(np.array([1.0, 2.0]), 0).tolist() == []


def test_in_redis_mode_each_worker_serves_its_own_and_the_planner_the_states(
    tmp_path: Path, redis_url: str
) -> None:
    from tests.test_distributed_crawl import Workers

    sections = {f"s{i}": Section(period=0.5 + 0.5 * i) for i in range(3)}
    site = LocalNewsSite(sections).start()
    settings = {
        **FAST,
        "REDIS_URL": redis_url,
        "ECHO_REDIS_KEY_PREFIX": f"m{time.time_ns()}",
        "ECHO_SOURCES": ",".join(site.hub_url(name) for name in sections),
        "ECHO_CRAWL_RATE": 4,
        "ECHO_METRICS_PORT": 0,
    }
    workers = Workers(tmp_path, settings)
    try:
        workers.start()
        workers.start()
        urls = [wait_for_endpoint(tmp_path / f"worker-{n}.log") for n in range(2)]
        deadline = time.monotonic() + 60
        while True:
            scraped = [scrape(url) for url in urls]
            holders = [s for s in scraped if s[("echo_holds_state", ())] == 1]
            if holders and holders[0].get(("echo_page_delay_seconds_count", ()), 0) >= 5:
                break
            assert time.monotonic() < deadline, workers.logs()[-3000:]
            time.sleep(0.5)
        codes = workers.stop()
    finally:
        site.stop()
    assert codes == [0, 0], workers.logs()[-3000:]
    # One planner holds the state: the per-source figures come from it alone.
    assert len(holders) == 1
    (planner,) = holders
    (other,) = [s for s in scraped if s is not planner]
    assert sum(by_source(planner, "echo_source_crawls_total").values()) > 0
    assert by_source(other, "echo_source_crawls_total") == {}
    assert ("echo_page_delay_seconds_count", ()) not in other
    # Every worker counts what it fetched: the fleet's requests are the sum.
    for samples in scraped:
        assert samples[("echo_budget_pages_per_second", ())] == 4
    fleet_pages = sum(s[("echo_requests_total", (("lane", "page"),))] for s in scraped)
    assert fleet_pages > 0
