"""The refresh lane: which fetched pages to fetch again, and when (docs/how-it-works.rst,
"Refreshing pages that change").

A page fetched at ``t`` is stale once it changes (a correction, a live blog's update), at a
rate ``1/Δ`` learned per group (the host of its source: a site's pages are edited alike) from
refetches that found it changed or not (content digest or ETag), with Ford et al.'s
pseudo-observations as the prior (:class:`~scrapy_echo.model.refetch.change_book.ChangeBook`, the
prior fitted to all groups). Its refresh is worth Ford et al.'s cost trade with ECHO's prices: a
crawl costs ``C_c = ω`` (ECHO's value of a crawl, in clicks), and a stale page costs
``C_s = stale_cost × P μ e^{-μ·age}``, the clicks per second it still draws served stale. So
each page is refetched every ``t* = g⁻¹(C_c / (C_s Δ̂)) Δ̂``, and never once ``C_c ≥ C_s Δ̂``:
as the page ages its clicks fade and its interval grows; once no refetch pays and most of its
clicks have come, it leaves the lane. If the refreshes would take more than the lane's share
of the budget, ``C_c`` is raised until they fit.

Ford et al.'s risk controls: ``Δ̂`` is the group's estimate as it stands, and the interval is
shrunk by the most conservative ratio the paper's Sec. 6 calls for, the largest shrink whose
expected share of very stale intervals (stale longer than the known-``Δ`` interval) is at most
``very_stale``, given the information the group's refetches carry
(:func:`~scrapy_echo.model.refetch.refresh.conservative_shrink`); then clipped to
``[shortest, longest]``, so no page is refetched sooner than ``shortest`` after its last fetch.
A young group is refetched sooner, and so learns; a well-known one at ``t*`` itself.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.refetch.change_book import ChangeBook
from scrapy_echo.model.refetch.change_rates import DEFAULT_PRIOR, PseudoObservations, RateEstimate
from scrapy_echo.model.refetch.content import changed as content_changed
from scrapy_echo.model.refetch.refresh import LONGEST_REFRESH, SHORTEST_REFRESH, VERY_STALE_BOUND
from scrapy_echo.model.refetch.refresh_plan import (
    fit_to_cap,
    group_shrinks,
    optimal_ratios,
    plan_risks,
    planned_intervals,
)

TRIES = 3  # refetches of a page handed out without coming back before it leaves the lane
_MOVED = 60.0  # seconds a page's due time must move by to be pushed again


@dataclass
class Tracked:
    """A fetched page the lane may refetch."""

    url: str  # as fetched (the page's key folds http into https)
    group: int
    source: int
    appeared: float
    fetched: float  # its last fetch
    digest: str | None
    interval: float = math.inf  # seconds between refetches, as last planned (inf: none)
    due: float = math.inf  # when its refetch is due (its entry in the heap)
    taken: int = 0  # times handed out since its last fetch (a refetch under way, or lost)


class RefreshLane:
    """Fetched pages, their groups' change rates, and a heap of when each is due.

    ``share``: the most of the crawl budget refetches may take; ``stale_cost``: what a click
    on a stale copy loses (1: the whole click); ``prior_period``: the mean seconds between
    changes the prior stands for before any refetch (Ford et al.'s pseudo-observations, a change
    after 1 h and none after 57 h: 57.5 h), scaled; ``max_pages``: pages tracked at most (the
    oldest go first); ``shortest``, ``longest``: seconds between refetches of a page at least
    and at most (a page no refetch pays for is not refetched at all); ``very_stale``: the
    share of refresh intervals expected very stale the shrink allows a group.

    After each :meth:`plan`: ``very_stale_share``, the expected share of the planned refresh
    intervals that are very stale; ``underestimate_risk``, the expected share of tracked pages
    whose rate is over twice its estimate; ``shrink``, the mean shrink of a planned refetch."""

    def __init__(
        self,
        *,
        share: float,
        stale_cost: float = 1.0,
        prior_period: float = 1.0 / DEFAULT_PRIOR.rate(),
        max_pages: int = 100_000,
        shortest: float = SHORTEST_REFRESH,
        longest: float = LONGEST_REFRESH,
        very_stale: float = VERY_STALE_BOUND,
    ) -> None:
        if not 0 <= share < 1:
            raise ValueError(f"share must be in [0, 1), got {share!r}")
        if not (math.isfinite(stale_cost) and stale_cost > 0):
            raise ValueError(f"stale_cost must be a finite number > 0, got {stale_cost!r}")
        if not (math.isfinite(prior_period) and prior_period > 0):
            raise ValueError(f"prior_period must be a finite number > 0, got {prior_period!r}")
        if max_pages < 1:
            raise ValueError(f"max_pages must be >= 1, got {max_pages!r}")
        if not (math.isfinite(longest) and 0 < shortest <= longest):
            raise ValueError(
                f"shortest and longest must be finite seconds, 0 < shortest <= longest, got "
                f"{shortest!r}, {longest!r}"
            )
        if not (math.isfinite(very_stale) and 0 < very_stale < 1):
            raise ValueError(f"very_stale must be a number in (0, 1), got {very_stale!r}")
        self.shortest, self.longest, self.very_stale = shortest, longest, very_stale
        self.share, self.stale_cost, self.max_pages = share, stale_cost, max_pages
        scale = prior_period * DEFAULT_PRIOR.rate()
        self.prior_period = prior_period
        self.book = ChangeBook(
            prior=PseudoObservations(DEFAULT_PRIOR.changed * scale, DEFAULT_PRIOR.unchanged * scale)
        )
        self.pages: dict[Hashable, Tracked] = {}  # insertion order: oldest first
        self._due: list[tuple[float, int, Hashable]] = []
        self._ticket = 0  # heap tiebreak: pages need not be comparable
        self.refetches = 0
        self.planned_rate = 0.0  # refetches per second the last plan asked for
        self.changes = 0  # refetches that found the page changed
        self.incomparable = 0  # refetches with nothing to compare to the fetch before
        # The slots the lane was asked for (capped: see take_slot) and served.
        self.asks, self.served = 0.0, 0
        # What the last plan expects (the class docstring); NaN before any plan.
        self.very_stale_share = self.underestimate_risk = self.shrink = math.nan

    @property
    def enabled(self) -> bool:
        return self.share > 0

    def fetched(
        self, page: Hashable, *, url: str, group: int, source: int, appeared: float, t: float,
        digest: str | None,
    ) -> None:  # fmt: skip
        """A page was fetched (first or again) at ``t`` with content ``digest``."""
        if not self.enabled:
            return
        known = self.pages.get(page)
        if known is None:
            self.pages[page] = Tracked(url, group, source, appeared, t, digest)
            if len(self.pages) > self.max_pages:
                del self.pages[next(iter(self.pages))]
            return
        if digest is not None and known.digest is not None and t > known.fetched:
            differs = content_changed(known.digest, digest)
            if differs is None:  # (fetches that share neither an ETag nor a body hash)
                self.incomparable += 1
            else:
                self.book.observe(known.group, t - known.fetched, differs)
                self.changes += differs
        self.refetches += 1
        known.fetched, known.digest = t, digest if digest is not None else known.digest
        known.taken = 0
        self._push(page, known)

    def plan(
        self, now: float, *, omega: float, budget: float, profit: FloatArray, decay: FloatArray
    ) -> float:
        """Each tracked page's interval from its group's change rate and its source's ``P, μ``
        (per source, as the plan's estimates); returns the refetches per second planned."""
        if not self.enabled or not self.pages or not math.isfinite(omega):
            return 0.0
        self.book.grow(max(t.group for t in self.pages.values()) + 1)
        if self.book.groups >= 10:
            fitted = self.book.fit_prior()
            if fitted is not None:
                self.book.prior = fitted
        estimate = self.book.rates()
        pages = list(self.pages)
        tracked = [self.pages[p] for p in pages]
        groups = np.array([t.group for t in tracked], dtype=np.intp)
        sources = np.array([t.source for t in tracked], dtype=np.intp)
        inside = sources < profit.size
        age = now - np.array([t.appeared for t in tracked])
        mu = np.where(inside, decay[np.minimum(sources, decay.size - 1)], 0.0)
        p = np.where(inside, profit[np.minimum(sources, profit.size - 1)], 0.0)
        stale = self.stale_cost * np.nan_to_num(p * mu * np.exp(-mu * np.maximum(age, 0.0)))
        crawl_cost = max(omega, 1e-300)
        rate, shrink_by_group = self.group_schedule(estimate, groups, crawl_cost, stale)
        delta = 1.0 / np.maximum(rate[groups], 1e-300)
        shrink = shrink_by_group[groups]
        intervals = self._intervals(crawl_cost, stale, delta, shrink)
        # A page whose clicks no longer pay for a refetch at ECHO's price, and have mostly
        # come (three lifetimes: 95%), leaves: they only fade. One priced out by a passing ω
        # or by the lane's share stays, and may come back.
        with np.errstate(invalid="ignore"):
            faded = ~(age * mu < 3.0)  # (no decay known: never faded by age alone)
        leaving = (np.isinf(intervals) & faded & (mu > 0)).tolist()
        cap = self.share * budget
        if np.sum(1.0 / intervals) > cap:
            crawl_cost = fit_to_cap(
                cap, crawl_cost, lambda cost: self._intervals(cost, stale, delta, shrink)
            )
            intervals = self._intervals(crawl_cost, stale, delta, shrink)
        risks = plan_risks(
            estimate.information[groups], intervals, optimal_ratios(crawl_cost, stale, delta),
            delta, shrink, ~np.array(leaving, dtype=bool), shortest=self.shortest,
        )  # fmt: skip
        self.very_stale_share, self.underestimate_risk, self.shrink = risks
        for page, t, interval, leaves in zip(
            pages, tracked, intervals.tolist(), leaving, strict=True
        ):
            if leaves:
                del self.pages[page]
                continue
            t.interval = interval
            due = t.fetched + interval
            # Pushed again only when its due time moved: a re-solve every half hour moves
            # every page's a little, and the heap would grow by all of them each time.
            if not t.taken and not abs(due - t.due) <= max(0.01 * interval, _MOVED):
                self._push(page, t)
        self.planned_rate = float(np.sum(1.0 / intervals))
        return self.planned_rate

    def group_schedule(
        self, estimate: RateEstimate, groups: NDArray[np.intp], crawl_cost: float,
        stale: FloatArray,
    ) -> tuple[FloatArray, FloatArray]:  # fmt: skip
        """Per group, the rate its pages' intervals are planned at (its estimate ``λ̂``, as
        the paper schedules) and their shrink, set at the longest optimal ratio among its
        pages at ECHO's price (the one most at risk: the very stale share grows with it)."""
        rate = estimate.rate
        ratio = optimal_ratios(crawl_cost, stale, 1.0 / np.maximum(rate[groups], 1e-300))
        return rate, group_shrinks(ratio, groups, estimate.information, bound=self.very_stale)

    def _intervals(
        self, crawl_cost: float, stale: FloatArray, delta: FloatArray, shrink: FloatArray
    ) -> FloatArray:
        return planned_intervals(
            crawl_cost, stale, delta, shrink, shortest=self.shortest, longest=self.longest
        )

    def due(self, now: float) -> Hashable | None:
        """A page due for a refetch by ``now`` (the most overdue), taken off the heap. If its
        refetch never comes back (a 404, a download error), it is due again an interval (an
        hour at least) later, and after :data:`TRIES` such it leaves the lane."""
        heap = self._due
        while heap and heap[0][0] <= now:
            when, _, page = heapq.heappop(heap)
            tracked = self.pages.get(page)
            if tracked is None or when != tracked.due:
                continue  # an entry since replaced
            if now < tracked.fetched + self.shortest:  # (a shortest raised since: restored)
                self._push(page, tracked, tracked.fetched + self.shortest)
                continue
            if tracked.taken >= TRIES:
                del self.pages[page]
                continue
            tracked.taken += 1
            self._push(page, tracked, now + max(tracked.interval, 3600.0))
            return page
        return None

    def take_slot(self, now: float) -> Hashable | None:
        """A page to refetch in this crawl slot, if one is due (:meth:`due`) and the lane is
        within its share of the slots it was asked for; None otherwise. Ask at every slot:
        the share counts the asks."""
        # No credit piles up from idle slots: at most a few refetches' worth ahead.
        self.asks = min(self.asks + 1, self.served / self.share + 20)
        if self.served > self.share * self.asks:
            return None
        page = self.due(now)
        if page is not None:
            self.served += 1
        return page

    def give_back_slot(self, page: Hashable, when: float) -> None:
        """A page :meth:`take_slot` gave that could not leave now: the slot is not spent, and
        the page is due again at ``when``."""
        self.served -= 1
        self.put_back(page, when)

    def slots_spent(self) -> float:
        """The share of the slots asked for that refetches took, at most :attr:`share` (the
        plan of new pages spends the rest of the budget)."""
        return min(self.served / self.asks, self.share) if self.asks else 0.0

    def drop(self, pages: Iterable[Hashable]) -> None:
        """Take ``pages`` out of the lane: never fetched again."""
        for page in pages:
            self.pages.pop(page, None)

    def next_due(self) -> float:
        """The earliest time :meth:`due` may hand out a page (inf: none is planned); an entry
        since replaced may make it early, never late."""
        return self._due[0][0] if self._due else math.inf

    def put_back(self, page: Hashable, when: float) -> None:
        """A page :meth:`due` gave that could not leave now: due again at ``when``."""
        tracked = self.pages.get(page)
        if tracked is not None:
            tracked.taken = max(tracked.taken - 1, 0)
            # Never sooner than the shortest interval after its last fetch.
            self._push(page, tracked, max(when, tracked.fetched + self.shortest))

    def _push(self, page: Hashable, tracked: Tracked, when: float | None = None) -> None:
        due = tracked.fetched + tracked.interval if when is None else when
        tracked.due = due
        if math.isfinite(due):
            self._ticket += 1
            heapq.heappush(self._due, (due, self._ticket, page))

    def source_of(self, page: Hashable) -> int | None:
        tracked = self.pages.get(page)
        return None if tracked is None else tracked.source

    def to_data(self) -> dict[str, Any]:
        rank: dict[Hashable, int] = {}
        for when, ticket, page in self._due:
            tracked = self.pages.get(page)
            if tracked is not None and when == tracked.due:  # (not an entry since replaced)
                rank[page] = min(rank.get(page, ticket), ticket)
        return {
            "share": self.share,
            "stale_cost": self.stale_cost,
            "prior_period": self.prior_period,
            "max_pages": self.max_pages,
            "shortest": self.shortest,
            "longest": self.longest,
            "very_stale": self.very_stale,
            "book": self.book.to_data(),
            # Each page's place among the due ones (None: not due), so that pages due at the
            # same time leave in the same order after a restore.
            "pages": [
                [
                    *(page, t.url, t.group, t.source, t.appeared, t.fetched, t.digest),
                    *(t.interval, t.due, t.taken, rank.get(page)),
                ]
                for page, t in self.pages.items()
            ],
            "refetches": self.refetches,
            "changes": self.changes,
            "incomparable": self.incomparable,
            "slots": [self.asks, self.served],
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> RefreshLane:
        """From :meth:`to_data`; ``ValueError``, ``KeyError`` or ``TypeError`` if it is not."""
        out = cls(
            share=float(data["share"]),
            stale_cost=float(data["stale_cost"]),
            prior_period=float(data["prior_period"]),
            max_pages=int(data["max_pages"]),
            # (Absent from lanes saved before the risk controls: their defaults. A crawl that
            # resumes takes its own settings anyway: core.snapshot.)
            shortest=float(data.get("shortest", SHORTEST_REFRESH)),
            longest=float(data.get("longest", LONGEST_REFRESH)),
            very_stale=float(data.get("very_stale", VERY_STALE_BOUND)),
        )
        out.book = ChangeBook.from_data(data["book"])
        ranked = []
        for row in data["pages"]:
            page, url, group, source, appeared, fetched, digest, interval, due, taken, rank = row
            tracked = Tracked(
                str(url),
                int(group), int(source), float(appeared), float(fetched),
                None if digest is None else str(digest), float(interval), float(due), int(taken),
            )  # fmt: skip
            out.pages[page] = tracked
            if rank is not None:
                ranked.append((int(rank), page))
        for _, page in sorted(ranked):
            out._push(page, out.pages[page], out.pages[page].due)
        out.refetches, out.changes = int(data["refetches"]), int(data["changes"])
        out.incomparable = int(data["incomparable"])
        asks, served = data["slots"]
        out.asks, out.served = float(asks), int(served)
        return out


__all__ = ["RefreshLane", "Tracked"]
