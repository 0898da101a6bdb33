"""The continuous optimum of Busa-Fekete et al., *A Scalable Crawling Algorithm Utilizing
Noisy Change-Indicating Signals* (WWW 2025), Theorem 1 as reconstructed here: every page
crawls once its effective time reaches its own threshold ``ι_i``, the thresholds solving
``V_i(ι_i) = η`` for one common ``η``, and ``η`` set (by bisection) so that the crawl rates
``1/E[L_i(ι_i)]`` add up to the budget ``R``.

The digest of the paper states Lemma 1 (threshold rules are optimal) but not Theorem 1's
formulas: the common-``η`` form is the Lagrangian (KKT) condition of maximizing the requests
served fresh, ``Σ μ_i E[F_i]/E[L_i]``, subject to ``Σ 1/E[L_i] = R``, with ``V_i`` of
:mod:`scrapy_echo.model.refetch.signal_renewal`. Without signals it is exactly the periodic
optimum of Cho and Garcia-Molina, *Effective page refresh policies for web crawlers*, which
Azar et al., *Tractable near-optimal policies for crawling*, take as the baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scrapy_echo.model.refetch.signal_renewal import (
    FloatArray,
    SignalPages,
    crawl_value,
    cycle_means,
    value_and_slope,
)

# Solver tolerances: relative widths at which a bracket counts as closed. Both are far below
# what any simulation can resolve, and well above the 1e-15 the sums are accurate to.
THRESHOLD_TOL = 1e-11
BUDGET_TOL = 1e-9
MAX_STEPS = 200  # bisection halvings: a bracket of 2^200 relative width closes
# V_i reaches within about 1e-16 of its cap only logarithmically late (rate ~ Δ/37), so
# a page whose cap is within this of η is taken as never crawled; the rate it would have had
# is given back by _absorb_residual to the one marginal page.
CAP_MARGIN = 1e-12
MAX_DOUBLINGS = 64


@dataclass(frozen=True)
class SignalOptimum:
    """The optimum for budget ``budget``: per page ``thresholds`` (``inf``: never crawled),
    ``rates`` (crawls per unit time), ``freshness`` (share of time fresh) and ``loss``
    (requests served stale per unit time); ``eta`` the common crawl value at the thresholds."""

    budget: float
    eta: float
    thresholds: FloatArray
    rates: FloatArray
    freshness: FloatArray
    loss: FloatArray
    mu: FloatArray

    @property
    def accuracy(self) -> float:
        """``Σ μ_i f_i / Σ μ_i``: the share of requests served fresh."""
        return float((self.mu * self.freshness).sum() / self.mu.sum())

    @property
    def total_loss(self) -> float:
        return float(self.loss.sum())


def thresholds_for(pages: SignalPages, eta: float, *, tol: float = THRESHOLD_TOL) -> FloatArray:
    """``ι_i`` with ``V_i(ι_i) = η`` (``inf`` where the cap ``μ_i/Δ_i <= η``): bracketed by
    doubling, then Newton steps (``dV/dι`` is known in closed form) that fall back to halving
    whenever they leave the bracket, all pages at once."""
    if not eta > 0:
        raise ValueError(f"eta must be > 0, got {eta!r}")
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1), got {tol!r}")
    out = np.full(len(pages), np.inf)
    live = np.flatnonzero(pages.cap * (1.0 - CAP_MARGIN) > eta)
    if not live.size:
        return out
    sub = _subset(pages, live)
    low = np.zeros(live.size)
    high = 1.0 / sub.delta  # grown below until V(high) >= eta
    for _ in range(MAX_DOUBLINGS):
        short = crawl_value(sub, high) < eta
        if not short.any():
            break
        low = np.where(short, high, low)
        high = np.where(short, 2.0 * high, high)
    reached = crawl_value(sub, high) >= eta  # else η is the cap to rounding: never crawled
    guess = 0.5 * (low + high)
    for _ in range(MAX_STEPS):
        value, slope = value_and_slope(sub, guess)
        gap = value - eta
        low = np.where(gap < 0, guess, low)
        high = np.where(gap >= 0, guess, high)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = guess - gap / slope
        # Newton lands from one side, so the bracket need not close: a tiny step also ends it.
        done = (np.abs(newton - guess) <= tol * guess) | ((high - low) <= tol * high) | (gap == 0)
        if done.all():
            break
        inside = np.isfinite(newton) & (newton > low) & (newton < high)
        guess = np.where(inside, newton, 0.5 * (low + high))
    out[live] = np.where(reached, guess, np.inf)
    return out


def _subset(pages: SignalPages, rows: np.ndarray) -> SignalPages:
    return SignalPages(pages.mu[rows], pages.delta_o[rows], pages.delta_u[rows], pages.nu[rows])


def at_thresholds(
    pages: SignalPages, thresholds: FloatArray, *, budget: float, eta: float
) -> SignalOptimum:
    """Rates, freshness and loss of the threshold rule ``thresholds`` (never-crawled pages:
    rate 0, freshness 0, every request stale)."""
    length, fresh = cycle_means(pages, thresholds)
    crawled = np.isfinite(thresholds)
    rates = np.where(crawled, 1.0 / np.where(crawled, length, 1.0), 0.0)
    freshness = np.where(crawled, np.where(crawled, fresh, 0.0) * rates, 0.0)
    loss = pages.mu * (1.0 - freshness)
    return SignalOptimum(budget, eta, thresholds, rates, freshness, loss, pages.mu)


def signal_optimum(pages: SignalPages, budget: float, *, tol: float = BUDGET_TOL) -> SignalOptimum:
    """The Theorem 1 optimum at ``budget`` crawls per unit time: bisection on ``log η`` for
    ``Σ rates = budget`` (the sum falls as ``η`` rises, every ``ι_i`` rising with it).

    >>> pages = SignalPages.of(mu=[1.0, 1.0], delta_o=[0.0, 0.0], delta_u=[1.0, 1.0], nu=[0.0, 0.0])
    >>> opt = signal_optimum(pages, 2.0)
    >>> [round(float(v), 6) for v in opt.thresholds]  # two equal pages share the budget: period 1
    [1.0, 1.0]
    """
    if not budget > 0 or not np.isfinite(budget):
        raise ValueError(f"budget must be a finite number > 0, got {budget!r}")
    if not 0 < tol < 1:
        raise ValueError(f"tol must be in (0, 1), got {tol!r}")
    top = float(pages.cap.max())
    low, high = np.log(top) - 60.0, np.log(top)  # Σ rates: ~∞ at the low end, 0 at the top
    chosen = high  # (the side that spends at most the budget, unless a middle hits it)
    for _ in range(MAX_STEPS):
        middle = 0.5 * (low + high)
        total = _rates(pages, thresholds_for(pages, float(np.exp(middle)))).sum()
        if abs(total - budget) <= tol * budget:
            chosen = middle
            break
        if high - low < 1e-15:
            break
        if total > budget:
            low = middle
        else:
            high = middle
        chosen = high
    eta = float(np.exp(chosen))
    thresholds = thresholds_for(pages, eta)
    if _rates(pages, thresholds).sum() < budget * (1.0 - tol):
        thresholds = _absorb_residual(pages, budget, thresholds, thresholds_for(pages, np.exp(low)))
    return at_thresholds(pages, thresholds, budget=budget, eta=eta)


def _rates(pages: SignalPages, thresholds: FloatArray) -> FloatArray:
    length, _ = cycle_means(pages, thresholds)
    finite = np.isfinite(thresholds)
    return np.where(finite, 1.0 / np.where(finite, length, 1.0), 0.0)


def _absorb_residual(
    pages: SignalPages, budget: float, high: FloatArray, low: FloatArray
) -> FloatArray:
    """The bracket on ``η`` closed on a jump of ``Σ rates``: one page's cap lies inside it, and
    its rate falls from its value at ``low`` to (numerically) 0 at ``high``. That page takes
    the rest of the budget: its threshold is set so that ``Σ rates = budget`` exactly, its
    ``V`` equal to the cap (and to ``η``) to rounding, so the KKT condition still holds."""
    rates_high, rates_low = _rates(pages, high), _rates(pages, low)
    marginal = int(np.argmax(rates_low - rates_high))
    target = budget - (rates_high.sum() - rates_high[marginal])
    one = _subset(pages, np.array([marginal]))
    short, long_ = float(low[marginal]), float(high[marginal])
    if not np.isfinite(long_):
        long_ = 2.0 * short
        while 1.0 / cycle_means(one, [long_])[0][0] > target:
            long_ *= 2.0
    for _ in range(MAX_STEPS):  # E[L] rises with the threshold: bisection on it
        middle = 0.5 * (short + long_)
        if 1.0 / cycle_means(one, [middle])[0][0] > target:
            short = middle
        else:
            long_ = middle
        if long_ - short <= THRESHOLD_TOL * long_:
            break
    out = high.copy()
    out[marginal] = 0.5 * (short + long_)
    return out


__all__ = ["SignalOptimum", "at_thresholds", "signal_optimum", "thresholds_for"]
