"""The crawl's figures for Prometheus, served over HTTP while it runs (docs/metrics.rst).

``ECHO_METRICS_PORT`` turns it on (the ``metrics`` extra installs ``prometheus_client``). The
endpoint is served by the crawl's own reactor, so each scrape reads the crawl state where it
lives, between two events, with no copy kept and no lock. Every worker serves its own figures
(requests by lane, budget, rate, Scrapy's counters); the per-source ones and the re-solves come
from the process that holds the state: the one process, or in Redis mode the planner of the
moment. Sources get labels of their own only for the ``ECHO_METRICS_SOURCES`` of most value
(clicks per second their new pages bring, as last planned); the rest are summed under
``source="_other"``, so a crawl of 100 k sources exports a few hundred series, not millions.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
from scrapy.exceptions import NotConfigured
from twisted.web.resource import Resource
from twisted.web.server import Site

from scrapy_echo.crawler.page_delays import BOUNDS
from scrapy_echo.crawler.runtime import EchoRuntime

if TYPE_CHECKING:
    from prometheus_client.core import Metric
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

LANES = ("source", "page", "refresh", "plain", "followup")
OTHER = "_other"  # the label of the sources summed together


class EchoMetrics:
    """Scrapy extension: the ``/metrics`` endpoint (added by the add-on; it does nothing
    unless ``ECHO_METRICS_PORT`` is set)."""

    def __init__(self, crawler: Crawler, runtime: EchoRuntime) -> None:
        self.crawler = crawler
        self.runtime = runtime
        self.port: Any = None  # (Twisted's IListeningPort)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> EchoMetrics:
        runtime = EchoRuntime.of(crawler)
        if runtime.config.metrics_port is None:
            raise NotConfigured  # (bare: Scrapy then disables it without a warning)
        try:
            import prometheus_client  # noqa: F401
        except ImportError:  # asked for, and not to be had: the crawl does not start
            raise ImportError(
                "ECHO_METRICS_PORT is set but prometheus_client is not installed: "
                "pip install 'scrapy-echo[metrics]'"
            ) from None
        extension = cls(crawler, runtime)
        from scrapy import signals

        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    def spider_opened(self) -> None:
        from prometheus_client import CollectorRegistry
        from twisted.internet import reactor

        registry = CollectorRegistry(auto_describe=False)  # (one per crawl: no globals)
        registry.register(EchoCollector(self.crawler, self.runtime))
        root: Any = Resource()  # type: ignore[no-untyped-call]
        root.putChild(b"metrics", _Endpoint(registry))
        config = self.runtime.config
        assert config.metrics_port is not None
        site: Any = Site(root)  # type: ignore[no-untyped-call]
        listen: Any = reactor.listenTCP
        self.port = listen(config.metrics_port, site, interface=config.metrics_address)
        address = self.port.getHost()
        logger.info("ECHO metrics on http://%s:%d/metrics", address.host, address.port)
        if self.crawler.stats is not None:
            self.crawler.stats.set_value("echo/metrics/port", address.port)

    def spider_closed(self) -> None:
        if self.port is not None:
            self.port.stopListening()
            self.port = None


class _Endpoint(Resource):
    """``GET /metrics``: the registry's figures in Prometheus's text format, made on the
    reactor's thread."""

    isLeaf = True

    def __init__(self, registry: Any) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.registry = registry

    def render_GET(self, request: Any) -> bytes:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        return generate_latest(self.registry)


class EchoCollector:
    """Reads the crawl's figures at each scrape (on the reactor's thread)."""

    def __init__(self, crawler: Crawler, runtime: EchoRuntime) -> None:
        self.crawler = crawler
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        runtime = self.runtime
        stats = self.crawler.stats.get_stats() if self.crawler.stats is not None else {}
        requests = CounterMetricFamily(
            "echo_requests", "Requests the scheduler handed to Scrapy, by lane", labels=["lane"]
        )
        for lane in LANES:
            requests.add_metric([lane], float(stats.get(f"echo/scheduler/dequeued/{lane}", 0)))
        yield requests
        yield CounterMetricFamily(
            "echo_responses", "Responses received (Scrapy's count)",
            value=float(stats.get("response_received_count", 0)),
        )  # fmt: skip
        yield GaugeMetricFamily(
            "echo_budget_pages_per_second", "The crawl budget (ECHO_CRAWL_RATE, or as measured)",
            value=runtime.crawl_rate(),
        )  # fmt: skip
        rate = runtime.throughput.rate(runtime.clock()) or 0.0
        yield GaugeMetricFamily(
            "echo_rate_pages_per_second",
            "Responses per second lately (in Redis mode the planner's figure is the fleet's)",
            value=rate,
        )
        yield GaugeMetricFamily(
            "echo_holds_state", "1 if this process holds the crawl state (one process, or the "
            "planner in Redis mode): the per-source figures come from it", value=float(
                runtime.holds_state),
        )  # fmt: skip
        yield from _stats(stats)
        if runtime.holds_state:
            yield from _state_metrics(runtime, stats)
            yield from _source_metrics(runtime)


def _stats(stats: dict[str, Any]) -> Iterator[Metric]:
    """Every numeric ``echo/*`` stat (docs/reference.rst lists them), as is: counters and
    gauges alike, one series each (the keys are a fixed set)."""
    from prometheus_client.core import GaugeMetricFamily

    family = GaugeMetricFamily(
        "echo_stat", "ECHO's Scrapy stats (docs/reference.rst), by name", labels=["stat"]
    )
    for key, value in sorted(stats.items()):
        if key.startswith("echo/") and isinstance(value, (int, float)):
            family.add_metric([key], float(value))
    yield family


def _state_metrics(runtime: EchoRuntime, stats: dict[str, Any]) -> Iterator[Metric]:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    state = runtime.state
    yield CounterMetricFamily("echo_resolves", "Re-solves of the schedule", value=runtime.solves)
    yield CounterMetricFamily(
        "echo_resolve_seconds", "Seconds this process spent re-solving",
        value=runtime.solve_seconds,
    )  # fmt: skip
    yield GaugeMetricFamily(
        "echo_resolve_last_seconds", "Seconds the last re-solve took",
        value=runtime.last_solve_seconds,
    )  # fmt: skip
    yield CounterMetricFamily(
        "echo_new_pages", "New pages the sources revealed",
        value=float(stats.get("echo/pages/new", 0)),
    )  # fmt: skip
    yield GaugeMetricFamily("echo_pages_waiting", "New pages waiting for a crawl",
                            value=len(state.frontier))  # fmt: skip
    sources = GaugeMetricFamily("echo_sources", "Sources, by status", labels=["status"])
    counts = {"active": 0, "retired": 0, "removed": 0}
    for status in state.sources:
        counts[status.state] += 1
    for name, count in counts.items():
        sources.add_metric([name], count)
    yield sources
    delays = runtime.delays
    cumulative, buckets = 0, []
    for bound, count in zip((*BOUNDS, math.inf), delays.buckets, strict=True):
        cumulative += count
        buckets.append(("+Inf" if math.isinf(bound) else f"{bound:g}", cumulative))
    yield HistogramMetricFamily(
        "echo_page_delay_seconds",
        "How long new pages waited: from their estimated appearance to their fetch",
        buckets=buckets,
        sum_value=delays.total,
    )


def _source_metrics(runtime: EchoRuntime) -> Iterator[Metric]:
    """Per source, for the most valuable ones; the rest summed as ``_other``."""
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

    state = runtime.state
    statuses = state.sources
    n = len(statuses)
    plan = runtime.policy.plan
    value = _padded(plan.estimates.link_rate * plan.estimates.profit, n)
    interval = _padded(np.where(plan.kept, plan.intervals, np.inf), n, fill=np.inf)
    top = _top(value, runtime.config.metrics_sources)
    overflows = state.overflow.overflows
    labels = ["source"]
    families: dict[str, Any] = {
        "crawls": CounterMetricFamily("echo_source_crawls", "Crawls of the source", labels=labels),
        "new_links": CounterMetricFamily(
            "echo_source_new_links", "New links the source's crawls found", labels=labels),
        "overflows": CounterMetricFamily(
            "echo_source_overflows", "Crawls that found the hub overflowed (links it hid)",
            labels=labels),
        "failures": GaugeMetricFamily(
            "echo_source_failures", "Failed crawls in a row", labels=labels),
        "value": GaugeMetricFamily(
            "echo_source_value", "Clicks per second its new pages bring, as last planned",
            labels=labels),
    }  # fmt: skip
    delay = SummaryMetricFamily(
        "echo_source_page_delay_seconds", "How long its new pages waited for their fetch",
        labels=labels,
    )  # fmt: skip
    planned = GaugeMetricFamily(
        "echo_source_interval_seconds", "Its planned recrawl interval (+Inf: not scheduled)",
        labels=labels,
    )  # fmt: skip
    status_of = GaugeMetricFamily(
        "echo_source_status", "1 for its status (active, retired, removed)",
        labels=["source", "status"],
    )  # fmt: skip
    summed = ("crawls", "new_links", "overflows", "value")  # (what adds up across sources)
    other = dict.fromkeys((*summed, "delay_sum", "delay_count"), 0.0)
    chosen = set(top.tolist())
    for i, status in enumerate(statuses):
        figures = {
            "crawls": status.crawls,
            "new_links": status.new_links,
            "overflows": overflows[i] if i < len(overflows) else 0,
            "failures": status.failures,
            "value": float(value[i]),
        }
        waited = runtime.delays.by_source.get(status.url, (0.0, 0))
        if i not in chosen:
            for key in summed:
                other[key] += figures[key]
            other["delay_sum"] += waited[0]
            other["delay_count"] += waited[1]
            continue
        for key, figure in figures.items():
            families[key].add_metric([status.url], float(figure))
        delay.add_metric([status.url], count_value=int(waited[1]), sum_value=waited[0])
        planned.add_metric([status.url], float(interval[i]))
        status_of.add_metric([status.url, status.state], 1.0)
    if n > len(chosen):
        for key in summed:
            families[key].add_metric([OTHER], other[key])
        count = int(other["delay_count"])
        delay.add_metric([OTHER], count_value=count, sum_value=other["delay_sum"])
    yield from families.values()
    yield from (delay, planned, status_of)


def _padded(values: Any, n: int, fill: float = 0.0) -> Any:
    """``values`` cut or padded with ``fill`` to ``n`` (sources added since the last plan)."""
    out = np.full(n, fill, dtype=float)
    m = min(n, len(values))
    out[:m] = values[:m]
    return out


def _top(values: Any, k: int) -> Any:
    """The indices of the ``k`` largest ``values`` (ties: the first sources first)."""
    if k <= 0 or len(values) == 0:
        return np.zeros(0, dtype=int)
    if k >= len(values):
        return np.arange(len(values))
    order = np.argsort(-values, kind="stable")
    return order[:k]


__all__ = ["EchoCollector", "EchoMetrics"]
