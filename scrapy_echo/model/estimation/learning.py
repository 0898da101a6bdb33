"""What the crawler has learned about each source, turned into estimates for the policy.

One object serves the simulator and the live crawler alike: it is told of each source crawl
(how many new links it found), each new page crawled (its source and estimated appearance
time) and each batch of clicks, and at every re-solve it answers with ``λ, P, μ`` per source
(:class:`scrapy_echo.model.decisions.policies.Estimates`), cold-start defaults filling what it does
not know yet.

Clicks may arrive for a page before the crawler has fetched it: they wait in
:class:`~scrapy_echo.model.estimation.pending_clicks.PendingClicks` for up to
``pending_horizon`` seconds.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Hashable, Iterable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.estimation.click_refit import (
    ClickRefit,
    fit_click_table,
    fit_data,
    fit_from_data,
    pad_rows,
)
from scrapy_echo.model.estimation.clicks import ClickHistogram, ClickTable, usable_clicks
from scrapy_echo.model.estimation.crawl_history import CrawlHistory
from scrapy_echo.model.estimation.estimators import DecayFit
from scrapy_echo.model.estimation.pending_clicks import PendingClicks
from scrapy_echo.model.estimation.predictive import (
    CANDIDATES,
    PROFIT_CANDIDATES,
    PredictiveScores,
)
from scrapy_echo.model.estimation.priors import ColdStart, candidate_estimates
from scrapy_echo.model.estimation.site_prior import site_pseudo_links
from scrapy_echo.model.estimation.yield_predictor import YieldPredictor
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.plan import Estimates


class SourceLearner:
    """Estimates ``λ, P, μ`` per source from crawl yields and clicks.

    Parameters
    ----------
    sources : int
        Sources known at the start (more may be added with :meth:`grow`).
    history : int
        Crawls of a source behind its ``λ`` (the paper: 7).
    bin_width, bins : float, int
        Age bins of the click fit (the paper: 20 minutes).
    grace : float
        How long past the fit's horizon a page still takes late clicks (the push period).
    cold : ColdStart
        Defaults for sources without data.
    pending_horizon : float
        How long clicks for a not-yet-crawled page are kept, seconds.
    refit_every : float
        Least seconds between two fits of ``P, μ`` (the fit costs more than a solve).
    max_pending : int
        Most such clicks kept at once; the oldest are dropped first.
    """

    def __init__(
        self,
        sources: int,
        *,
        history: int = 7,
        bin_width: float = 1200.0,
        bins: int = 72,
        grace: float = 3600.0,
        cold: ColdStart | None = None,
        pending_horizon: float = 86400.0,
        max_pending: int = 1_000_000,
        refit_every: float = 3600.0,
    ) -> None:
        self.crawls = CrawlHistory(sources, history=history)
        self.clicks = ClickHistogram(bin_width=bin_width, bins=bins, grace=grace)
        self.cold = cold if cold is not None else ColdStart()
        self._pending = PendingClicks(pending_horizon, max_pending)
        self.received = 0.0  # every click the feed brought: a check that none came twice
        self._sources = sources
        self._fit: DecayFit | None = None
        self._clicks_changed = True
        self._click_batches = 0  # batches folded in: a refit done elsewhere knows if it saw all
        self._fitted_at = -math.inf
        self._mean_clicks: NDArray[np.float64] = np.zeros(0)
        self._mean_known: NDArray[np.bool_] | None = None
        # How much more the pages' clicks vary than Poisson counts, as of the last fit: the
        # learned prior of P counts each source's pages divided by it (model.dispersion).
        self.dispersion = 1.0
        self.refit_every = float(refit_every)
        # The candidate λ scored on the crawls to come, the candidate P on the clicks to come
        # (docs/how-it-works.rst, "Estimators that earn their place"); Pham et al.'s regression
        # is one candidate λ.
        self.predictive = PredictiveScores(CANDIDATES)
        self.click_scores = PredictiveScores(PROFIT_CANDIDATES)
        self.yields = YieldPredictor()
        # The click table's sums at the last fit, and each source's μ then: the next fit
        # scores the candidate P by the clicks that came in between. (Not saved: a restored
        # learner scores from its second fit on, and weighs crawls alike until a re-solve.)
        self._click_base: tuple[bool, FloatArray, FloatArray] | None = None
        self._scored_decay: FloatArray = np.zeros(0)
        self._value: FloatArray = np.zeros(0)  # per source: its weight in the λ scores
        self._yield_cache: tuple[float, FloatArray | None] | None = None  # (fitted at, rates)
        # Of the spread of sources' log rates, the share their sites explain, as last
        # measured (model.site_prior); None while the policy does not pool by site.
        self.site_share: float | None = None
        # The μ the fit searches: from far slower than the horizon (such curves are flat
        # there, and the fit's coverage rule keeps it from extrapolating them) to so fast
        # that every click lands in a page's first bin.
        self.decay_min = 1e-3 / (bins * bin_width)
        self.decay_max = 10.0 / bin_width

    @property
    def sources(self) -> int:
        return self._sources

    @property
    def clicks_caught(self) -> float:
        """Clicks on crawled pages stamped at or after their crawl: the profit the crawl
        caught, as the paper counts it (clicks before the crawl are no one's catch)."""
        return self.clicks.caught

    @property
    def pending_clicks(self) -> int:
        """Click rows waiting for their page to be crawled."""
        return self._pending.count

    @property
    def dropped_clicks(self) -> int:
        """Click rows dropped before their page was crawled (too old or too many)."""
        return self._pending.dropped

    def grow(self, sources: int) -> None:
        """Make room for ``sources`` sources (added at run time)."""
        if sources > self._sources:
            self.crawls.grow(sources)
            self._sources = sources

    def record_crawl(
        self, source: int, time: float, new_links: int, *, cut: float = 0.0, floor: bool = False
    ) -> None:
        """A crawl, as
        :meth:`scrapy_echo.model.estimation.crawl_history.CrawlHistory.record` takes it."""
        if source >= self._sources:  # (inline: this runs at every source crawl)
            self.grow(source + 1)
        if self.crawls.filled[source]:  # (a first crawl only records what is there)
            span = time - self.crawls.newest[source]
            # Scored over the seconds its count covers, a full hub's count as a floor.
            covered = span - min(max(cut, 0.0), span)
            # Weighted by what a link of the source is worth (docs/how-it-works.rst,
            # "Estimators that earn their place"): a rate matters to the plan as its pages do.
            value = self._value
            weight = float(value[source]) if source < value.size else 1.0
            self.predictive.observe(source, covered, new_links, floor=floor, weight=weight)
        self.crawls.record(source, time, new_links, cut=cut, floor=floor)
        self.yields.observe(source, time, new_links)

    def add_page(
        self, page: Hashable, *, source: int, appeared: float, crawled: float | None = None
    ) -> None:
        """A new page of ``source`` was crawled at ``crawled``; it appeared at about
        ``appeared``."""
        self.grow(source + 1)
        self.clicks.add_page(page, source=source, appeared=appeared, crawled=crawled)
        waiting = self._pending.release(page)
        if waiting:
            ts, counts = zip(*waiting, strict=True)
            self.clicks.add_clicks([page] * len(waiting), ts, counts)
            self._clicks_changed = True
            self._click_batches += 1

    def source_of_page(self, page: Hashable) -> int | None:
        """The source a tracked (young) page was found on, if it is tracked."""
        return self.clicks.source_of(page)

    def add_clicks(
        self, pages: Iterable[Hashable], ts: Iterable[float], counts: Iterable[float]
    ) -> None:
        """Fold in a batch of click rows, already validated (a row the model cannot take is
        ignored: :func:`~scrapy_echo.model.estimation.clicks.usable_clicks`)."""
        pages, ts, counts = list(pages), list(ts), list(counts)
        usable = usable_clicks(np.asarray(ts, dtype=np.float64), np.asarray(counts, np.float64))
        if not usable.all():
            # Left in, one would date the waiting rows (their trimming goes by the latest).
            kept = np.flatnonzero(usable).tolist()
            pages, ts, counts = (
                [pages[i] for i in kept],
                [ts[i] for i in kept],
                [counts[i] for i in kept],
            )
        self.received += math.fsum(counts)
        unknown = self.clicks.add_clicks(pages, ts, counts)
        if len(unknown) < len(pages):
            self._clicks_changed = True
            self._click_batches += 1
        for i in unknown:
            self._pending.hold(pages[i], ts[i], counts[i])
        if unknown:
            self._pending.trim(max(ts))

    def estimates(
        self,
        now: float,
        *,
        learned_priors: bool = False,
        earned: bool = False,
        censoring: bool = False,
        floors: bool = True,
        sites: NDArray[np.intp] | None = None,
    ) -> Estimates:
        """``λ, P, μ`` for every source, as of ``now``; with ``censoring``, ``λ`` counts the
        crawls of hubs that overflowed for what they are (docs/how-it-works.rst, "Hubs that
        show only their latest links"); with ``sites`` (each source's site index), its rate
        borrows from its site's other sources as far as sites tell rates apart
        (docs/how-it-works.rst, "Rates pooled by site"). With ``learned_priors``, every
        candidate ``λ`` (learned, plain, Pham et al.'s yield predictor) and ``P`` (learned, plain)
        is rated for the crawls and clicks to come, and the learned ``λ`` and ``P`` are used
        (``P`` with its optimism); with ``earned`` too, for each the candidate that has
        predicted best so far (:attr:`predictive`, :attr:`click_scores`; docs/how-it-works.rst,
        "Estimators that earn their place").

        The click fit is redone only when clicks came in since the last one, at most every
        ``refit_every`` seconds (the click feed is pushed hourly while intervals are re-solved
        every half hour); pages crawled since, with no clicks yet, join it then."""
        n = self._sources
        if self.click_refit_due(now):
            self.install_click_refit(self.click_refit(now)())
        fit = self._fit
        assert fit is not None  # (just installed if there was none)
        links, span = self.crawls.window(aware=censoring, floors=floors)
        horizon = self.clicks.bins * self.clicks.bin_width
        long_run = self.crawls.long_run(aware=censoring)
        lent: tuple[FloatArray, FloatArray] | None = None
        self.site_share = None  # (a policy that stopped pooling reports none)
        if sites is not None:
            lent_links, lent_span, self.site_share = site_pseudo_links(
                *long_run, _site_rows(sites, n)
            )
            lent = (lent_links, lent_span)

        found = candidate_estimates(
            links, span, fit, self.cold, long_run, horizon=horizon, lent=lent,
            learned=learned_priors, dispersion=self.dispersion,
        )  # fmt: skip
        yields = self._yield_rates(now) if learned_priors else None
        rates = {**found.rates, "yield": _filled(yields, found.rates["learned"])}
        if learned_priors:  # every candidate rated for the crawls and clicks to come
            self.predictive.predict([rates[name] for name in self.predictive.names])
            self.click_scores.predict([found.profits[n] for n in self.click_scores.names])
        lam, prof, mu = found.rates["plain"], found.profits["plain"], found.decay
        if learned_priors:
            lam, prof = rates["learned"], found.profits["optimistic"]
            if earned:  # each the one that has predicted best (the learned P with its optimism)
                lam = rates[self.predictive.names[self.predictive.chosen]]
                if self.click_scores.names[self.click_scores.chosen] == "plain":
                    prof = found.profits["plain"]
        self._scored_decay = mu
        # Each source's clicks per page, over their mean: the weight of its crawls' scores.
        value = found.profits["learned"]
        self._value = value / value.mean() if value.size and value.mean() > 0 else np.ones(n)
        known = self._mean_known
        mean = prof if known is None else np.where(known, self._mean_clicks, prof)
        shows = self.crawls.shown(floors=floors) if censoring else None
        return Estimates(lam, prof, mu, mean, shows)

    def click_refit_due(self, now: float) -> bool:
        """Whether :meth:`estimates` at ``now`` would fit ``P, μ`` again first."""
        fit = self._fit
        stale = self._clicks_changed and now - self._fitted_at >= self.refit_every
        return fit is None or stale or fit.profit.size != self._sources

    def click_refit(self, now: float) -> Callable[[], ClickRefit]:
        """The click fit in two steps, as :meth:`estimates` does it: the table is taken now,
        and the function returned fits it on any thread (seconds at 100 k sources, which a
        live crawl's reactor must not wait for); :meth:`install_click_refit` takes its result
        back, on this one."""
        table, rows, batches = self.clicks.taken(now), self._sources, self._click_batches
        decay = (self.decay_min, self.decay_max)
        return lambda: fit_click_table(table(), now, rows, batches, decay)

    def install_click_refit(self, refit: ClickRefit) -> None:
        """Use a fit :meth:`click_refit` made; clicks that came in since it took its table
        leave the fit stale (the next re-solve fits again). One older than the fit in use
        (a re-solve fitted inline meanwhile) is dropped."""
        if refit.at < self._fitted_at:
            return
        self._score_clicks(refit.table, refit.rows)
        self._fit, self._mean_clicks, self._mean_known = (
            refit.fit, refit.mean_clicks, refit.mean_known,
        )  # fmt: skip
        self.dispersion = refit.table.dispersion
        if refit.batches == self._click_batches:
            self._clicks_changed = False
        self._fitted_at = refit.at

    def clicked_sources(self) -> NDArray[np.bool_]:
        """Per source, whether its ``P, μ`` come from its own pages' clicks (as of the last
        :meth:`estimates`), not from the cold start."""
        fit = self._fit
        fitted = np.zeros(0, dtype=bool) if fit is None else fit.fitted
        return pad_rows(fitted, self._sources)

    # -- persistence ----------------------------------------------------------------------
    def to_data(self) -> dict[str, Any]:
        """Plain data for a snapshot; :meth:`from_data` reverses it (the click fit too: a
        restored learner refits when the one saved would have, so it estimates as it would)."""
        return self.captured()()

    def captured(self) -> Callable[[], dict[str, Any]]:
        """:meth:`to_data` in two steps: what changes is copied now, and the function returned
        builds the data from the copies on any thread, later (a crawl's save must not stall
        it: the per-source lists are the slow part)."""
        crawls = self.crawls.captured()
        clicks = {
            key: value.copy() if isinstance(value, np.ndarray) else value
            for key, value in self.clicks.to_data().items()
        }
        data = {
            "sources": self._sources,
            "clicks": clicks,
            "cold": dataclasses.asdict(self.cold),
            "pending_horizon": self._pending.horizon,
            "max_pending": self._pending.most,
            "pending": self._pending.to_data(),
            "dropped_clicks": self._pending.dropped,
            "received": self.received,
            "refit_every": self.refit_every,
            "fit": fit_data(self._fit, self._mean_clicks, self._mean_known, self.dispersion),
            "fitted_at": self._fitted_at,
            "clicks_changed": self._clicks_changed,
            "predictive": self.predictive.to_data(),
            "click_scores": self.click_scores.to_data(),
        }
        yields = self.yields.captured()
        return lambda: {**data, "crawls": crawls(), "yields": yields()}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> SourceLearner:
        """The learner :meth:`to_data` described; ``ValueError``, ``KeyError`` or
        ``TypeError`` if the data is not one."""
        crawls = CrawlHistory.from_dict(data["crawls"])
        clicks = ClickHistogram.from_data(data["clicks"])
        out = cls(
            int(data["sources"]),
            history=crawls.history,
            bin_width=clicks.bin_width,
            bins=clicks.bins,
            grace=clicks.grace,
            cold=ColdStart(**data["cold"]),
            pending_horizon=float(data["pending_horizon"]),
            max_pending=int(data["max_pending"]),
            refit_every=float(data["refit_every"]),
        )
        out.crawls, out.clicks = crawls, clicks
        out.crawls.grow(out.sources)
        out._pending.load(data["pending"])
        out._pending.dropped = int(data["dropped_clicks"])
        out.received = float(data["received"])
        if data["fit"] is not None:
            out._fit, out._mean_clicks, out._mean_known, out.dispersion = fit_from_data(data["fit"])
        out._fitted_at = float(data["fitted_at"])
        out._clicks_changed = bool(data["clicks_changed"])
        # (A snapshot from before a candidate was added starts its scores afresh.)
        scores = PredictiveScores.from_data(data["predictive"])
        if scores.names == out.predictive.names:
            out.predictive = scores
        if "click_scores" in data:
            out.click_scores = PredictiveScores.from_data(data["click_scores"])
        if "yields" in data:
            out.yields = YieldPredictor.from_data(data["yields"])
        return out

    def _yield_rates(self, now: float) -> FloatArray | None:
        """Pham et al.'s predicted rates, worked out again only when its fit is redone (every
        few hours: a pass over every source's window costs more than a re-solve's worth)."""
        self.yields.train(now)
        if self._yield_cache is None or self._yield_cache[0] != self.yields.trained_at:
            self._yield_cache = (self.yields.trained_at, self.yields.rates(now))
        return self._yield_cache[1]

    def _score_clicks(self, table: ClickTable, rows: int) -> None:
        """Score the candidate ``P`` by the clicks the tracked pages drew since the last fit:
        per source, Poisson with mean ``P`` times its pages' share of the curve
        ``e^{-μ kΔ} - e^{-μ (k+1)Δ}`` over the bins observed since (docs/how-it-works.rst,
        "Estimators that earn their place")."""
        whole = table.cumulative is not None
        pages = pad_rows(table.pages.astype(np.float64), rows)
        sums = pad_rows(table.increments, rows) * pages
        base, self._click_base = self._click_base, (whole, sums, pages)
        decay = self._scored_decay
        if base is None or base[0] != whole or decay.size == 0:
            return  # (nothing to compare with, or the table counts other bins now)
        before = min(base[1].shape[0], decay.size)
        new_clicks = np.maximum(sums[:before] - base[1][:before], 0.0)
        new_pages = np.maximum(pages[:before] - base[2][:before], 0.0)
        edges = np.arange(table.pages.shape[1] + 1) * table.bin_width
        curve = -np.diff(np.exp(-decay[:before, None] * edges[None, :]), axis=1)
        self.click_scores.observe_all((new_pages * curve).sum(axis=1), new_clicks.sum(axis=1))


def _filled(rates: FloatArray | None, fallback: FloatArray) -> FloatArray:
    """``rates`` where known (finite), ``fallback`` elsewhere."""
    if rates is None:
        return fallback
    known = np.zeros(fallback.size, dtype=bool)
    known[: rates.size] = np.isfinite(rates[: fallback.size])
    return np.where(known, pad_rows(rates, fallback.size), fallback)


def _site_rows(sites: NDArray[np.intp], rows: int) -> NDArray[np.intp]:
    """``sites`` for exactly ``rows`` sources; a source it does not cover is a site of its
    own (no siblings)."""
    sites = np.asarray(sites, dtype=np.intp)[:rows]
    missing = rows - sites.size
    start = int(sites.max(initial=-1)) + 1
    return np.concatenate([sites, np.arange(start, start + missing, dtype=np.intp)])
