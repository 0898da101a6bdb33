"""Scoring a replay: profit caught against the upper bound, delays, and where crawls went.

Profit is the ECHO paper's (docs/model.rst, "Quality metric"): a page crawled at ``t`` earns the
clicks it received at ``t`` or later, from the trace's ground truth. Everything is measured
after the warm-up: the pages created in ``[warmup, duration)``, crawled by the end of the
trace (for the upper bound: the moment they appeared). The dynamic profit is the paper's: the
profit of the pages crawled in each window.

Coverage is the measure of Pham et al. (WSDM 2018, section 3): the share of the new
pages a crawl finds. The paper divides by what recrawling every source every hour finds; here
the divisor is every page created after the warm-up, and a page counts when it is found
within the period (1 h, the paper's cycle; 4 h, its timeliness figure) or at all by the end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.metric import (
    dynamic_profit,
    fraction_of_bound,
    freshness_profit,
    page_profit,
)
from scrapy_echo.sim.engine import Replay
from scrapy_echo.sim.trace import Trace

HOUR = 3600.0


@dataclass(frozen=True)
class Score:
    """One policy at one crawl rate."""

    policy: str
    rate: float
    profit_per_second: float
    upper_bound_per_second: float
    fraction_of_upper_bound: float
    pages_crawled: int
    source_crawls: int
    page_crawls: int
    idle_slots: int
    median_discovery_delay: float  # seconds from creation to discovery, pages found in window
    median_crawl_delay: float  # seconds from creation to crawl, pages crawled in window
    coverage_1h: float  # share of the new pages found within an hour of appearing
    coverage_4h: float
    coverage: float  # found at all by the end of the trace
    dynamic_times: FloatArray
    dynamic_profit: FloatArray  # profit per second over the trailing window at each time

    def as_dict(self) -> dict[str, object]:
        """JSON-ready, without the dynamic series."""
        out = {k: v for k, v in self.__dict__.items() if not k.startswith("dynamic")}
        return {k: (float(v) if isinstance(v, np.floating) else v) for k, v in out.items()}


def upper_bound(trace: Trace, *, half_life: float | None = None) -> tuple[float, FloatArray]:
    """Profit per second after warm-up if every page were crawled when created, and the
    per-page profit behind it; by :func:`page_value`."""
    bound = page_value(trace, trace.page_created, half_life)
    inside = (trace.page_created >= trace.warmup) & (trace.page_created < trace.duration)
    return float(bound[inside].sum()) / (trace.duration - trace.warmup), bound


def score(
    trace: Trace,
    replay: Replay,
    *,
    bound: float | None = None,
    window: float = 86400.0,
    sample_every: float = 1800.0,
    half_life: float | None = None,
) -> Score:
    """Score ``replay`` of ``trace`` by :func:`page_value`; pass ``bound`` to reuse a computed
    upper bound (of the same ``half_life``)."""
    if bound is None:
        bound, _ = upper_bound(trace, half_life=half_life)
    span = trace.duration - trace.warmup
    profit = page_value(trace, replay.crawled, half_life)
    inside = (replay.crawled >= trace.warmup) & (replay.crawled < trace.duration)
    # The same pages as the bound's, those created after the warm-up: counting a backlog of
    # older pages crawled after it could put a policy above the bound.
    created = (trace.page_created >= trace.warmup) & (trace.page_created < trace.duration)
    rate = float(profit[created & inside].sum()) / span
    found = (replay.discovered >= trace.warmup) & (replay.discovered < trace.duration)
    times = np.arange(trace.warmup + window, trace.duration + 1e-9, sample_every)
    if times.size == 0:  # warm-up leaves less than a window: sample what there is
        times = np.array([trace.duration])
    dynamic = dynamic_profit(replay.crawled, profit, window=window, times=times)
    return Score(
        policy=replay.policy,
        rate=replay.settings.crawl_rate,
        profit_per_second=rate,
        upper_bound_per_second=bound,
        fraction_of_upper_bound=fraction_of_bound(rate, bound),
        pages_crawled=int(inside.sum()),
        source_crawls=replay.source_crawls,
        page_crawls=replay.page_crawls,
        idle_slots=replay.idle_slots,
        median_discovery_delay=_median(replay.discovered[found] - trace.page_created[found]),
        median_crawl_delay=_median(replay.crawled[inside] - trace.page_created[inside]),
        coverage_1h=coverage(trace, replay, within=HOUR),
        coverage_4h=coverage(trace, replay, within=4 * HOUR),
        coverage=coverage(trace, replay, within=np.inf),
        dynamic_times=times,
        dynamic_profit=dynamic,
    )


def coverage(trace: Trace, replay: Replay, *, within: float) -> float:
    """Share of the pages created after the warm-up that ``replay`` found within ``within``
    seconds of their creation (``inf``: by the end of the trace); NaN if there are none."""
    created = (trace.page_created >= trace.warmup) & (trace.page_created < trace.duration)
    if not created.any():
        return float("nan")
    delay = replay.discovered[created] - trace.page_created[created]  # NaN: never found
    return float(np.mean(delay <= within))


def page_value(trace: Trace, crawled: FloatArray, half_life: float | None) -> FloatArray:
    """What each page earned, crawled at ``crawled``: the clicks it got from then on (the
    paper's metric), or with ``half_life`` the metric of a crawl without a click feed, 1
    halving every ``half_life`` seconds of delay (:func:`freshness_profit`)."""
    if half_life is not None:
        return freshness_profit(crawled, trace.page_created, half_life=half_life)
    return page_profit(crawled, trace.click_page, trace.click_ts, trace.click_count)


def _median(values: FloatArray) -> float:
    return float(np.median(values)) if values.size else float("nan")
