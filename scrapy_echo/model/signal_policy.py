"""ECHO-newpages with change-indicating signals (seed 002): the experimental policy
``echo-cis`` (docs/how-it-works.rst, "Change-indicating signals")."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.curves import FloatArray
from scrapy_echo.model.plan import Plan
from scrapy_echo.model.policies import Decision, EchoNewPages, early_recrawl_values
from scrapy_echo.model.signals import MIN_RECALL, signal_index


class EchoCis(EchoNewPages):
    """ECHO-newpages with change-indicating signals (seed 002; experimental: it joins
    ECHO-newpages once it wins at every budget, docs/benchmarks.rst).

    A source whose signals are informative (recall trusted at
    :data:`~scrapy_echo.model.signals.MIN_RECALL` or more) is due when its signal index
    reaches the value of a crawl, ``V ≥ ω``, instead of at its planned interval, and is
    weighed by that index for early recrawls; every other source is scheduled as by
    ECHO-newpages (docs/how-it-works.rst, "Change-indicating signals")."""

    name = "echo-cis"

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self._signal_plan: tuple[Plan | None, NDArray[np.intp], FloatArray, FloatArray] = (
            None,
            np.zeros(0, dtype=np.intp),
            np.zeros(0),
            np.zeros(0),
        )

    def _informative(self, plan: Plan) -> tuple[NDArray[np.intp], FloatArray, FloatArray]:
        """Kept sources whose signals say enough, with their recall and false-signal rate
        (learned once per plan)."""
        cached_plan, which, recall, false = self._signal_plan
        if cached_plan is plan:
            return which, recall, false
        which, recall, false = np.zeros(0, dtype=np.intp), np.zeros(0), np.zeros(0)
        book = self.signals
        if book is not None and book.received:
            book.grow(len(plan))
            book.decay = np.array(plan.estimates.decay, dtype=np.float64)
            all_recall, all_false = book.quality()
            which = np.flatnonzero((all_recall >= MIN_RECALL) & plan.kept[: len(all_recall)])
            recall, false = all_recall[which], all_false[which]
        self._signal_plan = (plan, which, recall, false)
        return which, recall, false

    def _signal_values(
        self, now: float, last_crawl: FloatArray, plan: Plan
    ) -> tuple[NDArray[np.intp], FloatArray]:
        """The informative sources and their signal index now (-inf while backing off)."""
        which, recall, false = self._informative(plan)
        if not which.size:
            return which, np.zeros(0)
        assert self.signals is not None
        est = plan.estimates
        count, recent = self.signals.recent(which, now)
        elapsed = now - last_crawl[which]
        value = signal_index(
            elapsed,
            est.link_rate[which],
            est.profit[which],
            est.decay[which],
            recall,
            false,
            count,
            recent,
            plan.omega,
        )
        return which, np.where(elapsed >= 0, value, -np.inf)

    def _due_source(self, now: float, last_crawl: FloatArray, plan: Plan) -> Decision | None:
        which, value = self._signal_values(now, last_crawl, plan)
        if not which.size or not plan.omega > 0:
            return super()._due_source(now, last_crawl, plan)
        # τ/I for the others, V/ω for these: either is 1 when a source falls due.
        ratio = (now - last_crawl) * plan.recrawl_rate
        ratio[which] = value / plan.omega
        most = int(ratio.argmax())
        return Decision("source", most) if ratio[most] >= 1.0 else None

    def _early_recrawl(self, now: float, last_crawl: FloatArray, plan: Plan) -> tuple[int, float]:
        best, value = super()._early_recrawl(now, last_crawl, plan)
        which, signal_value = self._signal_values(now, last_crawl, plan)
        if not which.size:
            return best, value
        # These sources are weighed by their signal index, the rest as without signals.
        held = self._held_back(now, last_crawl)
        with np.errstate(over="ignore", invalid="ignore"):
            values = early_recrawl_values(now, np.minimum(held, now), plan)
        values[held >= now] = 0.0
        values[which] = signal_value
        top = int(values.argmax())
        return top, max(float(values[top]), 0.0)


__all__ = ["EchoCis"]
