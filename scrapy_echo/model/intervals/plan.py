"""What a policy plans from: per-source estimates, and the schedule solved from them."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray

BoolArray = NDArray[np.bool_]


@dataclass(frozen=True)
class Estimates:
    """Per-source model parameters: ``λ`` (links/s), ``P`` (clicks/page), ``μ`` (1/s)."""

    link_rate: FloatArray
    profit: FloatArray
    decay: FloatArray
    # Plain average clicks per page (ECHO-greedy's P), where the learner knows it; else P.
    mean_clicks: FloatArray | None = None
    # How many links each source's hub shows, where a crawl found it full (0: never seen
    # full); with a censoring-aware λ, echo-newpages plans those as full hubs
    # (model.full_hubs).
    shows: FloatArray | None = None

    @classmethod
    def empty(cls) -> Estimates:
        return cls(np.zeros(0), np.zeros(0), np.zeros(0))

    @property
    def average_profit(self) -> FloatArray:
        return self.profit if self.mean_clicks is None else self.mean_clicks

    def __len__(self) -> int:
        return int(self.link_rate.size)

    def copy(self) -> Estimates:
        """Its own arrays: for a solve on another thread while the learner's change."""

        def own(a: FloatArray | None) -> FloatArray | None:
            return None if a is None else np.array(a, dtype=np.float64)

        return Estimates(
            np.array(self.link_rate, dtype=np.float64),
            np.array(self.profit, dtype=np.float64),
            np.array(self.decay, dtype=np.float64),
            own(self.mean_clicks),
            own(self.shows),
        )


@dataclass(frozen=True)
class Plan:
    """What a policy derived from its estimates at the last re-solve."""

    estimates: Estimates
    intervals: FloatArray  # seconds; inf = not recrawled
    omega: float  # value of one crawl, clicks
    kept: BoolArray
    # Per source, the value of a crawl on its host where a host's capacity binds (max(ω, ν_h));
    # None: ω for every source.
    host_omega: FloatArray | None = None

    @classmethod
    def empty(cls) -> Plan:
        return cls(Estimates.empty(), np.zeros(0), 0.0, np.zeros(0, bool))

    def __len__(self) -> int:
        return int(self.intervals.size)

    @cached_property
    def recrawl_rate(self) -> FloatArray:
        """``1/I`` per source, 0 where not recrawled on schedule (so ``τ/I = τ · rate``)."""
        with np.errstate(divide="ignore"):
            return np.where(np.isfinite(self.intervals), 1.0 / self.intervals, 0.0)

    @cached_property
    def index_terms(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(μ, λP/μ, λP·[μ = 0])`` of kept sources (zeros elsewhere), so that
        ``V(τ) = (λP/μ) g(μτ) + λP τ [μ = 0]`` is a few vector operations. (Full-length
        arrays: with a budget above the new-link rate nearly every source is kept, and
        gathering a subset costs more than it saves.)"""
        est = self.estimates
        value = est.link_rate * est.profit
        decays = self.kept & (est.decay > 0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            scale = np.where(decays, value / np.where(decays, est.decay, 1.0), 0.0)
        linear = np.where(self.kept & (est.decay == 0), value, 0.0)
        return np.where(decays, est.decay, 0.0), scale, linear

    def padded(self, sources: int) -> Plan:
        """The plan for ``sources`` sources: any added since the re-solve are unknown (no
        value, never recrawled on schedule; policies still give them a first crawl)."""
        extra = sources - len(self)
        if extra <= 0:
            return self
        zeros = np.zeros(extra)
        est = self.estimates
        return replace(
            self,
            estimates=Estimates(
                np.concatenate([est.link_rate, zeros]),
                np.concatenate([est.profit, zeros]),
                np.concatenate([est.decay, zeros]),
                None if est.mean_clicks is None else np.concatenate([est.mean_clicks, zeros]),
                None if est.shows is None else np.concatenate([est.shows, zeros]),
            ),
            intervals=np.concatenate([self.intervals, np.full(extra, np.inf)]),
            kept=np.concatenate([self.kept, np.zeros(extra, bool)]),
            host_omega=None
            if self.host_omega is None
            else np.concatenate([self.host_omega, np.full(extra, self.omega)]),
        )
