"""A discrete-event simulation of the setting of Busa-Fekete et al., *A Scalable Crawling
Algorithm Utilizing Noisy Change-Indicating Signals* (WWW 2025): pages that change as Poisson
processes, observable changes that emit a signal at once, false signals of their own Poisson
rate, and crawl slots at a constant total rate ``R`` (one every ``1/R``), each given to one
page by a :class:`scrapy_echo.model.decisions.freshness_policies.SlotPolicy`.

Accuracy is the share of requests served fresh. Requests are Poisson(``μ_i``) and independent
of everything else, so a page's fresh requests in a window are drawn as Poisson(``μ_i F_i``)
and its stale ones as Poisson(``μ_i (W - F_i)``), ``F_i`` its fresh time in the window of
length ``W``: the same distribution as drawing every request, at a cost per page, not per
request. ``expected_accuracy`` (``Σ μ_i F_i / Σ μ_i W``) is the same figure without the
request noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.decisions.freshness_policies import SlotPolicy
from scrapy_echo.model.refetch.signal_renewal import FloatArray, SignalPages


@dataclass(frozen=True)
class WindowResult:
    """What happened in ``[start, end)``: crawls per page, fresh time per page, requests."""

    start: float
    end: float
    crawls: NDArray[np.int64]
    fresh_time: FloatArray
    requests: int
    fresh_requests: int
    mu: FloatArray

    @property
    def accuracy(self) -> float:
        return self.fresh_requests / self.requests if self.requests else float("nan")

    @property
    def expected_accuracy(self) -> float:
        length = self.end - self.start
        return float((self.mu * self.fresh_time).sum() / (self.mu.sum() * length))

    @property
    def crawl_rate(self) -> float:
        return float(self.crawls.sum() / (self.end - self.start))


def simulate(
    pages: SignalPages,
    policy: SlotPolicy | Callable[[float], SlotPolicy],
    *,
    budget: Sequence[tuple[float, float]],
    horizon: float,
    windows: Sequence[tuple[float, float]],
    seed: int,
) -> list[WindowResult]:
    """Run ``policy`` from time 0 (every page just crawled) to ``horizon``. ``budget`` lists
    ``(from_time, R)`` steps, the first from 0; a callable ``policy`` is asked for a new
    policy at each step (given the new ``R``), a policy object is kept throughout. Returns one
    :class:`WindowResult` per ``(start, end)`` in ``windows``."""
    if not budget or budget[0][0] != 0.0:
        raise ValueError("budget must start with a step at time 0")
    if any(rate <= 0 for _, rate in budget) or any(
        b[0] >= a[0] for a, b in zip(budget[1:], budget, strict=False)
    ):
        raise ValueError("budget rates must be > 0 and step times increasing")
    if not horizon > 0:
        raise ValueError(f"horizon must be > 0, got {horizon!r}")
    if any(not 0 <= s < e <= horizon for s, e in windows):
        raise ValueError("windows must satisfy 0 <= start < end <= horizon")
    rng = np.random.default_rng(seed)
    m = len(pages)
    slots = _slot_times(budget, horizon)
    times, owner, true = _signals(pages, horizon, rng)
    batch = np.searchsorted(times, slots, side="right")  # signals up to each slot
    last = np.zeros(m)
    count = np.zeros(m, dtype=np.int64)
    stale = rng.exponential(1.0 / pages.delta_u)
    crawls = np.zeros((len(windows), m), dtype=np.int64)
    fresh = np.zeros((len(windows), m))
    step_at = [t for t, _ in budget]
    current = _policy_for(policy, budget[0][1])
    done = 0
    for index, now in enumerate(slots):
        if len(step_at) > 1 and now >= step_at[1]:
            step_at.pop(0)
            budget = budget[1:]
            current = _policy_for(policy, budget[0][1]) if callable(policy) else current
        upto = int(batch[index])
        if upto > done:
            got = owner[done:upto]
            np.add.at(count, got, 1)
            hit = true[done:upto]
            np.minimum.at(stale, got[hit], times[done:upto][hit])
            done = upto
        page = current.choose(now - last, count)
        _account(fresh, windows, page, last[page], min(stale[page], now))
        for w, (start, end) in enumerate(windows):
            crawls[w, page] += start <= now < end
        last[page] = now
        count[page] = 0
        # Changes after this crawl: unobservable ones from now, signalled ones come as signals.
        stale[page] = now + rng.exponential(1.0 / pages.delta_u[page])
    # Signals past the last slot still end fresh spells before the horizon.
    rest = owner[done:][true[done:]]
    np.minimum.at(stale, rest, times[done:][true[done:]])
    for page in range(m):
        _account(fresh, windows, page, last[page], min(stale[page], horizon))
    return [_window(pages, windows[w], crawls[w], fresh[w], rng) for w in range(len(windows))]


def _policy_for(policy: SlotPolicy | Callable[[float], SlotPolicy], rate: float) -> SlotPolicy:
    return policy(rate) if callable(policy) else policy


def _slot_times(budget: Sequence[tuple[float, float]], horizon: float) -> FloatArray:
    pieces = []
    for (start, rate), (end, _) in zip(budget, [*budget[1:], (horizon, 0.0)], strict=True):
        count = int(np.floor((end - start) * rate + 1e-9))
        pieces.append(start + (np.arange(count) + 1.0) / rate)
    slots = np.concatenate(pieces)
    return slots[slots < horizon]


def _signals(
    pages: SignalPages, horizon: float, rng: np.random.Generator
) -> tuple[FloatArray, NDArray[np.int64], NDArray[np.bool_]]:
    """Every signal to ``horizon``, in time order: its page and whether a change sent it (an
    observable change, share ``Δ^o/(Δ^o+ν)`` of a page's signals)."""
    rate = pages.delta_o + pages.nu
    number = rng.poisson(rate * horizon)
    owner = np.repeat(np.arange(len(pages)), number)
    times = rng.uniform(0.0, horizon, owner.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(rate > 0, pages.delta_o / rate, 0.0)
    true = rng.random(owner.size) < precision[owner]
    order = np.argsort(times, kind="stable")
    return times[order], owner[order], true[order]


def _account(
    fresh: FloatArray, windows: Sequence[tuple[float, float]], page: int, since: float, until: float
) -> None:
    for w, (start, end) in enumerate(windows):
        fresh[w, page] += max(0.0, min(until, end) - max(since, start))


def _window(
    pages: SignalPages,
    window: tuple[float, float],
    crawls: NDArray[np.int64],
    fresh: FloatArray,
    rng: np.random.Generator,
) -> WindowResult:
    length = window[1] - window[0]
    good = rng.poisson(pages.mu * fresh)
    bad = rng.poisson(pages.mu * np.maximum(length - fresh, 0.0))
    total = int(good.sum() + bad.sum())
    return WindowResult(window[0], window[1], crawls, fresh, total, int(good.sum()), pages.mu)


__all__ = ["WindowResult", "simulate"]
