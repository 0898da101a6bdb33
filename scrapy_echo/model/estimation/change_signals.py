"""Change-indicating signals (Busa-Fekete et al.): what a source's signals since its last crawl say
about the new links waiting on it, and how far each source's signals can be trusted.

A signal names a source: a ping, a sitemap's or feed's date moving, a partner's stream of
changed URLs. It is noisy. Of a source's new links a share ``r`` (recall) come with a signal;
false signals come at a rate ``ν`` of their own. Both are learned per source from what the
crawls find (:class:`SignalBook`), and shrunk toward pooled values by the weight of their
evidence, as every other estimate (:mod:`scrapy_echo.model.estimation.priors`).

Given its signals, the expected profit waiting on source ``i`` a time ``t`` after its last crawl
(docs/how-it-works.rst, "Change-indicating signals") is::

    W = λ (1 - r) P (1 - e^{-μ t}) / μ  +  q P Σ_j e^{-μ (now - t_j)},   q = r λ / (r λ + ν)

(unsignalled links, plus each signal's chance ``q`` of being a new link, decayed since it
came), and the index of a recrawl now is the paper's with ``W`` in place of its expectation
without signals, ``V = W (1 + μ t) - λ P t``: with ``r = 0`` it is ECHO's ``(λP/μ) g(μt)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray

# Prior weights, in signals and in crawl intervals: a source's recall and false-signal rate
# move off the pooled values only once its own crawls have shown some of each.
PRIOR_SIGNALS = 4.0
# A source whose recall is estimated below this is scheduled as if it had no signals: its
# signals say too little to move the schedule (and pure noise must not move it).
MIN_RECALL = 0.1
# How many standard deviations of its signal count a recall must clear MIN_RECALL by. Every
# source is tested again at each plan, a thousand plans a month: at 2, pure noise passed for
# one source of 150 within five simulated days (tests/test_sim.py); at 3, none there.
TRUST_SDS = 3.0
# Bounds on the weight of the pooled recall, in links (:func:`_recall_prior`).
MIN_PRIOR_LINKS = 4.0
MAX_PRIOR_LINKS = 1000.0
# The most new links one signal may count for in the effective time, in units of the new links
# the source's signals have been followed by (docs/how-it-works.rst, "A signal counts for a few
# links at most"). The seed's step grows without bound as the recall nears 1, and the recall is
# learned from the links crawls find new, fewer than the links the signals were about where
# other sources list them first or the hub overflows.
SIGNAL_WORTH_CAP = 4.0


class SignalBook:
    """Per source: the signals since its last crawl (their count, and their sum decayed by
    the source's ``μ``), and what past crawls showed of their quality (signals and new links
    over crawl intervals, and signals over intervals that found nothing)."""

    def __init__(self) -> None:
        self._sources = 0
        self.decay = np.zeros(0)  # μ per source, set by the policy at each plan
        self.count = np.zeros(0)  # signals since the last crawl
        self._sum = np.zeros(0)  # Σ e^{-μ (ref - t_j)} over them
        self._ref = np.zeros(0)  # the time that sum is at
        self._signals = np.zeros(0)  # Σ signals in crawl intervals
        self._links = np.zeros(0)  # Σ new links found at their ends
        self._span = np.zeros(0)  # Σ their lengths
        self._empty_span = np.zeros(0)  # the same, over intervals that found nothing
        self._empty_signals = np.zeros(0)
        self.received = 0  # signals ever received

    def __len__(self) -> int:
        return self._sources

    def grow(self, sources: int) -> None:
        extra = sources - self._sources
        if extra <= 0:
            return
        self._sources = sources
        for name in (
            *("decay", "count", "_sum", "_ref", "_signals", "_links", "_span"),
            *("_empty_span", "_empty_signals"),
        ):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(extra)]))

    _SAVED = ("count", "_sum", "_ref", "_signals", "_links", "_span", "_empty_span",
              "_empty_signals")  # fmt: skip

    def to_data(self) -> dict[str, Any]:
        """Plain data for a snapshot (arrays copied); :meth:`from_data` reads it."""
        data: dict[str, Any] = {
            name.lstrip("_"): getattr(self, name).copy() for name in self._SAVED
        }
        data["received"] = self.received
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> SignalBook:
        """The book :meth:`to_data` saved; ``ValueError`` if the arrays do not fit together."""
        book = cls()
        arrays = [np.asarray(data[name.lstrip("_")], dtype=np.float64) for name in cls._SAVED]
        sources = arrays[0].shape[0] if arrays[0].ndim == 1 else -1
        if sources < 0 or any(a.shape != (sources,) for a in arrays):
            raise ValueError("signal book arrays of different shapes")
        if not all(np.isfinite(a).all() for a in arrays):
            raise ValueError("signal book values not finite")
        book.grow(sources)
        for name, array in zip(cls._SAVED, arrays, strict=True):
            setattr(book, name, array)
        book.received = int(data["received"])
        return book

    def add(self, source: int, ts: float) -> None:
        """A signal named ``source`` at ``ts``."""
        if source >= self._sources:
            self.grow(source + 1)
        if self.count[source]:
            fade = math.exp(-float(self.decay[source]) * max(ts - float(self._ref[source]), 0.0))
            self._sum[source] = self._sum[source] * fade + 1.0
        else:
            self._sum[source] = 1.0
        self._ref[source] = max(ts, float(self._ref[source]))
        self.count[source] += 1
        self.received += 1

    def crawled(self, source: int, span: float, new_links: int) -> None:
        """``source`` was crawled ``span`` seconds after its previous crawl and showed
        ``new_links`` new links: its pending signals are settled against that."""
        if source >= self._sources:
            self.grow(source + 1)
        count = float(self.count[source])
        self.count[source] = self._sum[source] = 0.0
        if not span > 0:
            return
        self._span[source] += span
        self._signals[source] += count
        self._links[source] += new_links
        if new_links == 0:
            self._empty_span[source] += span
            self._empty_signals[source] += count

    def quality(self) -> tuple[FloatArray, FloatArray]:
        """Recall ``r`` and false-signal rate ``ν`` (1/s) per source.

        ``ν`` is the signal rate over intervals that found nothing (their signals were all
        false), shrunk toward the pooled share of false signals at the source's own signal
        rate; the signals left over were true, and ``r`` is
        their share of the new links found, shrunk toward the pooled recall as far as the
        sources' recalls are alike (:func:`_recall_prior`). A recall is 0 unless it is
        clearly above :data:`MIN_RECALL` (no evidence: no trust)."""
        if not self._sources:
            return np.zeros(0), np.zeros(0)
        # The prior: the pooled share of signals that are false, at the source's own signal
        # rate σ (rates differ by orders of magnitude between sources; shares much less),
        # weighing as much as the time the source's signals take to number PRIOR_SIGNALS.
        total_signals = float(self._signals.sum())
        empty_span = float(self._empty_span.sum())
        false_share = 0.0
        if empty_span > 0 and total_signals > 0:
            pooled_false = float(self._empty_signals.sum()) / empty_span
            false_share = min(pooled_false * float(self._span.sum()) / total_signals, 1.0)
        rate = _ratio(self._signals, self._span)
        prior_span = _ratio(np.full_like(rate, PRIOR_SIGNALS), rate)
        weighed = self._empty_span + prior_span  # the seconds ν rests on
        false = _ratio(self._empty_signals + false_share * PRIOR_SIGNALS * (rate > 0), weighed)
        # The signals left over were true.
        true_signals = self._signals - false * self._span
        # What the false signals add to the spread of true_signals: their Poisson count, and
        # the error of ν times the span it is charged over.
        false_noise = false * self._span * (1.0 + _ratio(self._span, weighed))
        pooled, weight = _recall_prior(true_signals, self._signals, self._links, false_noise)
        prior = pooled * weight
        # Trusted only if still MIN_RECALL with TRUST_SDS standard deviations of the signal
        # count taken off: signals that fire as often without a change as with one must come
        # out at 0, not at their noise.
        low = (true_signals - TRUST_SDS * np.sqrt(self._signals) + prior) / (self._links + weight)
        recall = np.clip((true_signals + prior) / (self._links + weight), 0.0, 1.0)
        return np.where(low >= MIN_RECALL, recall, 0.0), false

    def links_per_signal(self) -> FloatArray:
        """Per source, the new links its crawls found per signal received in their
        intervals, shrunk toward the pooled ratio by :data:`PRIOR_SIGNALS` signals (the
        pooled ratio where a source has had none; 1 before any)."""
        total = float(self._signals.sum())
        pooled = float(self._links.sum()) / total if total > 0 else 1.0
        return (self._links + pooled * PRIOR_SIGNALS) / (self._signals + PRIOR_SIGNALS)

    def recent(self, sources: NDArray[np.intp], now: float) -> tuple[FloatArray, FloatArray]:
        """For each of ``sources``: its signals since its last crawl, and their sum
        ``Σ_j e^{-μ (now - t_j)}``."""
        age = np.maximum(now - self._ref[sources], 0.0)
        return self.count[sources], self._sum[sources] * np.exp(-self.decay[sources] * age)


def _ratio(top: FloatArray, bottom: FloatArray) -> FloatArray:
    """``top / bottom``, 0 where ``bottom`` is not positive."""
    return np.divide(top, bottom, out=np.zeros_like(top), where=bottom > 0)


def _recall_prior(
    true_signals: FloatArray, signals: FloatArray, links: FloatArray, false_noise: FloatArray
) -> tuple[float, float]:
    """The pooled recall and its weight in links, empirical Bayes: the sources' recalls
    spread around the pooled one by ``τ²`` (their observed spread less what sampling
    explains), and a Beta prior of that mean and variance weighs ``R(1 - R)/τ² - 1`` links
    (docs/how-it-works.rst, "Change-indicating signals"). Sources alike in quality, one feed
    for all, borrow much from each other; a feed that covers some sources and not others,
    little. A pooled recall not clearly above :data:`MIN_RECALL` is no prior at all."""
    total_links = float(links.sum())
    if total_links <= 0:
        return 0.0, MIN_PRIOR_LINKS
    mean = float(true_signals.sum()) / total_links
    low = (float(true_signals.sum()) - TRUST_SDS * math.sqrt(float(signals.sum()))) / total_links
    if low < MIN_RECALL:
        return 0.0, MIN_PRIOR_LINKS
    pooled = min(mean, 1.0)
    seen = links > 0
    raw = true_signals[seen] / links[seen]
    spread = float(np.sum(links[seen] * (raw - mean) ** 2)) / total_links
    # Var(true_i / l_i) ≈ (l_i r (1 - r) + false_noise_i) / l_i², weighted by l_i.
    sampling = float(np.sum(pooled * (1 - pooled) + false_noise[seen] / links[seen]))
    between = max(spread - sampling / total_links, 1e-9)
    weight = pooled * (1 - pooled) / between - 1.0
    return pooled, float(np.clip(weight, MIN_PRIOR_LINKS, MAX_PRIOR_LINKS))


def signal_index(
    elapsed: FloatArray,
    link_rate: FloatArray,
    profit: FloatArray,
    decay: FloatArray,
    recall: FloatArray,
    false_rate: FloatArray,
    count: FloatArray,
    recent: FloatArray,
    omega: float,
) -> FloatArray:
    """The value of recrawling each source now, given its signals (docs/how-it-works.rst,
    "Change-indicating signals"): the paper's index for its unsignalled links alone,
    ``(λ (1 - r) P / μ) g(μ t)``, plus what its pending signals promise, each a new page with
    probability ``q = r λ / (r λ + ν)``, worth its decayed ``P`` less the crawl ``ω`` that
    fetches it: ``q (P Σ_j e^{-μ (now - t_j)} - ω k)``, at least 0.

    With no signal (``r = 0``) it is ECHO's index ``(λP/μ) g(μt)``:

    >>> one = [np.array([x]) for x in (600.0, 1e-3, 2.0, 1e-4, 0, 0, 0, 0)]
    >>> round(float(signal_index(*one, omega=1.0)[0]), 6)
    0.034592
    """
    t = np.maximum(np.asarray(elapsed, dtype=np.float64), 0.0)
    lam, prof, mu = link_rate, profit, decay
    precision = _precision(recall, lam, false_rate)
    unsignalled = lam * (1.0 - recall) * prof * _g_over_mu(mu, t)
    promised = precision * np.maximum(prof * recent - omega * count, 0.0)
    return np.asarray(unsignalled + promised, dtype=np.float64)


def effective_time_index(
    elapsed: FloatArray,
    link_rate: FloatArray,
    profit: FloatArray,
    decay: FloatArray,
    recall: FloatArray,
    false_rate: FloatArray,
    count: FloatArray,
    *,
    most_links: FloatArray | None = None,
) -> FloatArray:
    """Busa-Fekete et al.'s index carried over whole (docs/how-it-works.rst,
    "Change-indicating signals"): ECHO's index at the *effective time*
    ``τ^eff = t + k c``, ``c = -ln(1 - q) / ((1 - r) λ)``, the time without signals after
    which the source is as likely to have a new link as it is now after ``t`` and ``k``
    signals. It never falls: time and signals only push it forward (their Lemma 1). A
    source whose signals catch every link (``r = 1``) or never fire falsely (``q = 1``)
    jumps to the cap ``λP/μ`` at its first signal. ``most_links``: per source, the most new
    links one signal counts for (``c`` at most ``most_links / λ``; "A signal counts for a
    few links at most").

    Without signals it is ECHO's index:

    >>> one = [np.array([x]) for x in (600.0, 1e-3, 2.0, 1e-4, 0, 0, 0)]
    >>> round(float(effective_time_index(*one)[0]), 6)
    0.034592
    """
    t = np.maximum(np.asarray(elapsed, dtype=np.float64), 0.0)
    lam, mu = link_rate, decay
    precision = _precision(recall, lam, false_rate)
    with np.errstate(divide="ignore", invalid="ignore"):
        unsignalled = (1.0 - recall) * lam
        step = np.where(precision > 0, -np.log1p(-np.minimum(precision, 1.0)) / unsignalled, 0.0)
        if most_links is not None:
            step = np.minimum(step, np.where(lam > 0, most_links / lam, 0.0))
        tau = np.where(count > 0, t + count * step, t)
        # (Past every finite time the index is its cap λP/μ.)
        value = np.where(np.isfinite(tau), lam * profit * _g_over_mu(mu, tau), lam * profit / mu)
    return np.asarray(value, dtype=np.float64)


def _g_over_mu(mu: FloatArray, t: FloatArray) -> FloatArray:
    """``g(μt)/μ``, and ``t`` where ``μ = 0`` (no decay: the paper's ``λPτ``)."""
    x = mu * t
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        value = np.where(mu > 0, -np.expm1(-x) / mu - t * np.exp(-x), t)
    return np.asarray(value, dtype=np.float64)


def _precision(recall: FloatArray, link_rate: FloatArray, false_rate: FloatArray) -> FloatArray:
    """``q = rλ / (rλ + ν)``, the chance a signal is a new link (0 without true signals)."""
    true_rate = recall * link_rate
    with np.errstate(divide="ignore", invalid="ignore"):
        value = np.where(true_rate > 0, true_rate / (true_rate + false_rate), 0.0)
    return np.asarray(value, dtype=np.float64)


__all__ = ["MIN_RECALL", "PRIOR_SIGNALS", "SignalBook", "effective_time_index", "signal_index"]
