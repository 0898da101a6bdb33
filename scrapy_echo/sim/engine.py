"""Replay a trace against a crawl policy with a simulated clock.

The crawler has ``N`` crawl slots per second. At each slot the policy picks a source or a
waiting new page (the same :mod:`scrapy_echo.model.policies` objects the Scrapy scheduler
runs). Crawling a source reveals the links on it at that moment: a link is new if the source
did not show it at its previous crawl and its page was never seen before; the first crawl of a
source only records what is there. Crawling a page earns the clicks it gets from then on.

What the policy learns, it learns as the live crawler does (:class:`SourceLearner`): new-link
counts per source crawl, and clicks delivered every push period for the pages it crawled,
never from the future. Intervals are re-solved every re-solve period.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from scrapy_echo.model.curves import FloatArray
from scrapy_echo.model.frontier import Frontier
from scrapy_echo.model.learning import SourceLearner
from scrapy_echo.model.policies import Decision, Policy
from scrapy_echo.sim.links import LinkIndex
from scrapy_echo.sim.trace import Trace


@dataclass(frozen=True)
class SimSettings:
    """How the simulated crawler runs (defaults: the paper's)."""

    crawl_rate: float  # crawls per second, sources and pages together
    resolve_period: float = 1800.0  # seconds between re-solves of the intervals
    push_period: float = 3600.0  # seconds between deliveries of the click log
    history: int = 7  # crawls of a source behind its λ estimate
    click_bin: float = 1200.0  # seconds per age bin of the click fit
    click_bins: int = 72  # age bins fitted (a day at 20 min)
    # True: the click log has every click of a crawled page, also those before the crawl
    # (site analytics). False: only clicks after the crawl (a search engine's own log: a page
    # it has not indexed gets no clicks from it).
    clicks_before_crawl: bool = True

    def __post_init__(self) -> None:
        for name in ("crawl_rate", "resolve_period", "push_period", "click_bin"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        for name in ("history", "click_bins"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")


@dataclass
class Replay:
    """What happened in one run: per page, when it was discovered and crawled (NaN: never)."""

    policy: str
    settings: SimSettings
    discovered: FloatArray
    crawled: FloatArray
    source_crawls: int = 0
    page_crawls: int = 0
    idle_slots: int = 0
    solves: int = 0
    omega: list[tuple[float, float]] = field(default_factory=list)  # (time, ω) per re-solve


def simulate(
    trace: Trace,
    policy: Policy,
    settings: SimSettings,
    *,
    progress: Callable[[float], None] | None = None,
) -> Replay:
    """Run ``policy`` over ``trace``; ``progress`` gets the fraction done now and then."""
    links = LinkIndex(trace)
    n_src, n_pages = trace.n_sources, trace.n_pages
    learner = SourceLearner(
        n_src,
        history=settings.history,
        bin_width=settings.click_bin,
        bins=settings.click_bins,
        grace=settings.push_period,
        refit_every=settings.push_period,
    )
    frontier = Frontier(n_src)
    last_crawl = np.full(n_src, np.nan)
    seen = bytearray(n_pages)  # pages the crawler has seen linked
    replay = Replay(policy.name, settings, np.full(n_pages, np.nan), np.full(n_pages, np.nan))
    clicks = _ClickLog(trace)

    slot = 1.0 / settings.crawl_rate
    slots = math.floor(trace.duration * settings.crawl_rate)
    next_resolve = 0.0
    next_push = settings.push_period
    report_every = max(1, slots // 200)
    for k in range(slots):
        now = k * slot
        if now >= next_push:
            pages, ts, counts = clicks.until(next_push)
            if not settings.clicks_before_crawl:
                crawled = replay.crawled[pages] if pages else np.zeros(0)
                logged = (crawled <= np.asarray(ts)).tolist()  # NaN (never crawled): False
                pages = [x for x, keep in zip(pages, logged, strict=True) if keep]
                ts = [x for x, keep in zip(ts, logged, strict=True) if keep]
                counts = [x for x, keep in zip(counts, logged, strict=True) if keep]
            learner.add_clicks(pages, ts, counts)
            next_push += settings.push_period
        if now >= next_resolve:
            plan = policy.replan(learner.estimates(now), settings.crawl_rate)
            replay.solves += 1
            replay.omega.append((now, plan.omega))
            next_resolve += settings.resolve_period
        decision = policy.choose(now, last_crawl, frontier)
        if decision is None:
            replay.idle_slots += 1
        elif decision.kind == "page":
            _crawl_page(decision, now, frontier, learner, replay)
        else:
            _crawl_source(decision.source, now, links, last_crawl, seen, frontier, learner, replay)
        if progress is not None and k % report_every == 0:
            progress(k / slots)
    if progress is not None:
        progress(1.0)
    return replay


def _crawl_page(
    decision: Decision,
    now: float,
    frontier: Frontier,
    learner: SourceLearner,
    replay: Replay,
) -> None:
    page = frontier.pop(decision.source)
    replay.page_crawls += 1
    index = int(page.page)  # type: ignore[call-overload]
    replay.crawled[index] = now
    learner.add_page(index, source=page.source, appeared=page.appeared, crawled=now)


def _crawl_source(
    source: int,
    now: float,
    links: LinkIndex,
    last_crawl: FloatArray,
    seen: bytearray,
    frontier: Frontier,
    learner: SourceLearner,
    replay: Replay,
) -> None:
    replay.source_crawls += 1
    previous = float(last_crawl[source])
    last_crawl[source] = now
    if math.isnan(previous):
        # The first crawl only records what is there: those links are old.
        for page in links.visible(source, now):
            seen[page] = 1
        learner.record_crawl(source, now, 0)
        return
    new = []
    for page in links.appeared_between(source, previous, now):
        if not seen[page]:  # also skips a link that reappeared within this window
            seen[page] = 1
            new.append(page)
    learner.record_crawl(source, now, len(new))
    # Appearance is unknown to a crawler: the midpoint of the window it must lie in.
    appeared = 0.5 * (previous + now)
    for page in new:
        replay.discovered[page] = now
        frontier.push(source, page, appeared=appeared, discovered=now)


class _ClickLog:
    """The trace's clicks, handed out in time order, one push at a time."""

    def __init__(self, trace: Trace) -> None:
        self.page = trace.click_page
        self.ts = trace.click_ts
        self.count = trace.click_count
        self.position = 0

    def until(self, time: float) -> tuple[list[int], list[float], list[float]]:
        end = int(np.searchsorted(self.ts, time, side="right"))
        start, self.position = self.position, end
        return (
            self.page[start:end].tolist(),
            self.ts[start:end].tolist(),
            self.count[start:end].tolist(),
        )
