"""How far each source's estimated ``λ`` is from its true rate after a replay, the plain
count and the censoring-aware one side by side (docs/how-it-works.rst, "Hubs that show only
their latest links").

A source's estimate is the long-run rate of all its crawls, fading over ``memory`` seconds
(3 days), so that the daily cycle averages out; its true rate, the trace's links on it faded
the same way: each weighs ``e^{-(end - appeared)/memory}``, over the same faded span. (The
plain average over the trace would differ from any estimate made at its end by the weekly
cycle: a trace that ends on a weekend.) The sources that matter are those the
replay crawled less often than their hub fills up, ``λ × (duration / crawls) > K``, so that
every crawl of theirs is likely to overflow, and at least ``min_crawls`` times: no estimator
gets a rate within 20% from a handful of crawls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scrapy_echo.core.crawl import CrawlCore
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.sim.trace import Trace


@dataclass(frozen=True)
class RateErrors:
    """Estimated over true ``λ`` for the hubs crawled less often than they fill up."""

    hubs: int  # such hubs (with both estimates)
    plain: FloatArray  # estimate / true, per hub: the paper's count
    aware: FloatArray  # the same, censoring-aware
    overflows: int  # crawls found overflowed, all sources

    @staticmethod
    def _line(ratios: FloatArray) -> str:
        if not ratios.size:
            return "no such hub"
        within = float(np.mean(np.abs(ratios - 1.0) <= 0.2))
        return (
            f"median {np.median(ratios):.3f} of the true rate, median error "
            f"{np.median(np.abs(ratios - 1.0)):.1%}, {within:.0%} within 20%"
        )

    def text(self) -> str:
        return (
            f"{self.hubs} hubs crawled less often than they fill up, 10 times or more "
            f"({self.overflows} crawls overflowed)\n"
            f"  plain λ:            {self._line(self.plain)}\n"
            f"  censoring-aware λ:  {self._line(self.aware)}"
        )


def true_rates(trace: Trace, memory: float | None = None) -> FloatArray:
    """Links per second on each source at the trace's end: over the whole trace, or with
    ``memory``, faded as the long-run estimate fades its crawls."""
    if memory is None:
        counts = np.bincount(trace.link_source, minlength=trace.n_sources)
        return np.asarray(counts / trace.duration, dtype=np.float64)
    weight = np.exp(-(trace.duration - trace.link_appeared) / memory)
    links = np.bincount(trace.link_source, weights=weight, minlength=trace.n_sources)
    span = memory * -np.expm1(-trace.duration / memory)
    return np.asarray(links / span, dtype=np.float64)


def rate_errors(
    trace: Trace, core: CrawlCore, crawls: list[int], *, min_crawls: int = 10
) -> RateErrors:
    """Both estimates of the replay's final state against the true rates, for the hubs
    crawled (``crawls`` per source) less often than they fill up, ``min_crawls`` or more."""
    if not trace.source_shows.size:
        raise ValueError("the trace says nothing of how many links its hubs show (sources.csv)")
    history = core.state.learner.crawls
    true = true_rates(trace, history.memory)
    with np.errstate(invalid="ignore", divide="ignore"):
        links, span = history.long_run()
        plain = np.where(span > 0, links / span, np.nan)
        links, span = history.long_run(aware=True)
        aware = np.where(span > 0, links / span, np.nan)
    n = min(trace.n_sources, plain.size)
    count = np.array(crawls[:n], dtype=np.float64)
    per_crawl = true_rates(trace)[:n] * trace.duration / np.maximum(count, 1.0)
    shows = trace.source_shows[:n]
    fills = (shows > 0) & (per_crawl > shows) & (count >= min_crawls) & (true[:n] > 0)
    fills &= np.isfinite(plain[:n])
    which = np.flatnonzero(fills & np.isfinite(aware[:n]))
    return RateErrors(
        hubs=int(which.size),
        plain=plain[which] / true[which],
        aware=aware[which] / true[which],
        overflows=int(sum(core.state.overflow.overflows)),
    )


__all__ = ["RateErrors", "rate_errors", "true_rates"]
