"""One page's renewal cycle under a threshold on its effective time: the freshness model of
Busa-Fekete et al., *A Scalable Crawling Algorithm Utilizing Noisy Change-Indicating Signals*
(WWW 2025), whose Lemma 1 says the optimal crawl rule is a threshold ``τ^eff ≥ ι``.

Page ``i`` changes as a Poisson process of rate ``Δ = Δ^o + Δ^u``: observable changes emit a
change-indicating signal at once, unobservable ones never do, and false signals come as an
independent Poisson process of rate ``ν``. Requests come at rate ``μ``; a request is served
fresh if the page has not changed since its last crawl.

What the paper's digest states is the model and Lemma 1. The formulas below are derivations
(checked against a Monte-Carlo simulation of the cycle in the tests), not quotations:

- a time ``t`` after a crawl with ``k`` signals since, the page is fresh with probability
  ``e^{-Δ^u t} (ν/(Δ^o+ν))^k = e^{-Δ^u τ^eff}``, ``τ^eff = t + k c``,
  ``c = ln(1 + Δ^o/ν)/Δ^u`` (``ν = 0``: ``c = ∞``, one signal makes the page surely stale;
  ``Δ^o = 0``: ``c = 0``, signals say nothing);
- with ``r = Δ^o + ν`` the signal rate and ``P(n, x)`` the regularized lower incomplete gamma
  function (for integer ``n``, the chance that a Poisson(``x``) count reaches ``n``), the cycle
  lasts ``E[L(ι)] = (1/r) Σ_k P(k+1, r(ι - kc))`` and the page is fresh for
  ``E[F(ι)] = Σ_k ν^k/(Δ+ν)^{k+1} P(k+1, (Δ+ν)(ι - kc))`` of it, the sums over the ``k`` with
  ``kc < ι`` (the cycle outlives time ``s`` with ``k`` signals iff ``s + kc < ι``);
- the crawl value ``V(ι) = μ(E[F] - e^{-Δ^u ι} E[L])``: the per-page Lagrangian
  ``(μE[F] - η)/E[L]`` is stationary exactly where ``V(ι) = η``, because every term of
  ``dE[F]/dι`` is ``e^{-Δ^u ι}`` times the matching term of ``dE[L]/dι``. It rises from 0 to
  the cap ``μ/Δ`` with slope ``μΔ^u e^{-Δ^u ι} E[L]``; without signals it is Cho and
  Garcia-Molina's ``(μ/Δ)[1 - (1 + Δι)e^{-Δι}]``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

# A Poisson(x) count lies within 12 standard deviations (+40) of x but for under 1e-30 of its
# mass: the terms P(n, x) needs beyond that window change no double.
_TAIL_SDS = 12.0
_TAIL_PAD = 40.0
_MAX_CELLS = 1 << 22  # terms summed per numpy call


@dataclass(frozen=True)
class SignalPages:
    """Per-page rates of the model: ``mu`` requests, ``delta_o`` observable (signalled) and
    ``delta_u`` unobservable changes, ``nu`` false signals, all per unit of time."""

    mu: FloatArray
    delta_o: FloatArray
    delta_u: FloatArray
    nu: FloatArray

    @classmethod
    def of(
        cls, *, mu: ArrayLike, delta_o: ArrayLike, delta_u: ArrayLike, nu: ArrayLike
    ) -> SignalPages:
        """Validated pages: ``mu > 0`` and ``delta_u > 0`` (with no unobservable changes the
        effective time is not finite: the signal count alone would be the state), ``delta_o``
        and ``nu`` ``>= 0``, all of one length.

        >>> SignalPages.of(mu=[1.0], delta_o=[0.5], delta_u=[0.5], nu=[0.0]).delta.tolist()
        [1.0]
        """
        arrays = [
            np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in (mu, delta_o, delta_u, nu)
        ]
        names = ("mu", "delta_o", "delta_u", "nu")
        if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1:
            raise ValueError("mu, delta_o, delta_u and nu must be 1-d arrays of one length")
        for name, values, strict in zip(names, arrays, (True, False, True, False), strict=True):
            bad = ~np.isfinite(values) | ((values <= 0) if strict else (values < 0))
            if bad.any():
                rule = "> 0" if strict else ">= 0"
                raise ValueError(f"{name} must be finite and {rule}, got {values[bad][0]!r}")
        return cls(*arrays)

    @classmethod
    def from_quality(
        cls, *, mu: ArrayLike, delta: ArrayLike, recall: ArrayLike, precision: ArrayLike
    ) -> SignalPages:
        """Pages from their change rate and their signals' recall ``Δ^o/Δ`` (``< 1``) and
        precision ``Δ^o/(Δ^o + ν)`` (``> 0``; ignored where the recall is 0)."""
        delta = np.asarray(delta, dtype=np.float64)
        rec = np.asarray(recall, dtype=np.float64)
        prec = np.asarray(precision, dtype=np.float64)
        if ((rec < 0) | (rec >= 1)).any():
            raise ValueError("recall must be in [0, 1)")
        if ((prec <= 0) | (prec > 1)).any():
            raise ValueError("precision must be in (0, 1]")
        delta_o = rec * delta
        return cls.of(
            mu=mu, delta_o=delta_o, delta_u=delta - delta_o, nu=delta_o * (1.0 / prec - 1.0)
        )

    @property
    def delta(self) -> FloatArray:
        return self.delta_o + self.delta_u

    @property
    def cap(self) -> FloatArray:
        """``V(∞) = μ/Δ``: a page whose cap is at most ``η`` is never crawled."""
        return self.mu / self.delta

    def __len__(self) -> int:
        return int(self.mu.size)

    def without_signals(self) -> SignalPages:
        """The same pages with no signals at all (every change unobservable)."""
        zero = np.zeros_like(self.mu)
        return SignalPages(self.mu, zero, self.delta, zero)

    def taken_as_noiseless(self) -> SignalPages:
        """The same pages as a crawler that trusts every signal sees them (``ν = 0``)."""
        return SignalPages(self.mu, self.delta_o, self.delta_u, np.zeros_like(self.mu))

    def signal_step(self) -> FloatArray:
        """``c``: how far one signal pushes the effective time (``∞`` when ``ν = 0`` and
        ``Δ^o > 0``, ``0`` when ``Δ^o = 0``).

        >>> pages = SignalPages.of(mu=[1, 1, 1], delta_o=[1, 0, 1], delta_u=[1, 1, 1], nu=[1, 1, 0])
        >>> pages.signal_step().tolist()
        [0.6931471805599453, 0.0, inf]
        """
        with np.errstate(divide="ignore"):
            ratio = np.where(
                self.nu > 0, self.delta_o / np.where(self.nu > 0, self.nu, 1.0), np.inf
            )
        step = np.log1p(ratio) / self.delta_u
        return np.where(self.delta_o > 0, step, 0.0)

    def effective_time(self, elapsed: ArrayLike, signals: ArrayLike) -> FloatArray:
        """``τ^eff = t + k c`` (a page with no signal stays at ``t`` even where ``c = ∞``)."""
        t = np.asarray(elapsed, dtype=np.float64)
        k = np.asarray(signals, dtype=np.float64)
        step = self.signal_step()
        return t + np.where(k > 0, k * np.where(np.isinf(step), np.inf, step), 0.0)


def poisson_reaches(n: ArrayLike, x: ArrayLike) -> FloatArray:
    """``P(n, x)`` for integer ``n >= 1``: the regularized lower incomplete gamma function, the
    chance a Poisson(``x``) count is at least ``n``. Sums the Poisson terms in log space over the
    window that holds all but 1e-30 of the mass: the short side of ``n`` (so ``1 - ...`` never
    cancels more than the absolute error it can afford), either way no overflow at large ``x``.

    >>> poisson_reaches([1, 2, 3], [1.0, 1.0, 0.0]).round(6).tolist()
    [0.632121, 0.264241, 0.0]
    """
    nn = np.asarray(n, dtype=np.int64)
    xx = np.asarray(x, dtype=np.float64)
    nn, xx = np.broadcast_arrays(nn, xx)
    if (nn < 1).any():
        raise ValueError("n must be >= 1")
    if (xx < 0).any() or np.isnan(xx).any():
        raise ValueError("x must be >= 0")
    flat_n, flat_x = nn.ravel(), xx.ravel()
    out = np.zeros(flat_n.size)
    width = np.ceil(_TAIL_SDS * np.sqrt(flat_x) + _TAIL_PAD).astype(np.int64)
    positive = flat_x > 0
    # Rows padded to a common width cost what the widest row costs: bucket by powers of two.
    bucket = np.ceil(np.log2(np.maximum(width, 1))).astype(np.int64)
    for b in np.unique(bucket[positive]):
        rows = np.flatnonzero(positive & (bucket == b))
        chunk = max(1, _MAX_CELLS // int(2**b))  # bounded memory for very noisy pages
        for first in range(0, rows.size, chunk):
            part = rows[first : first + chunk]
            out[part] = _window_sums(flat_n[part], flat_x[part], int(2**b))
    return out.reshape(nn.shape)


def _window_sums(n: NDArray[np.int64], x: FloatArray, width: int) -> FloatArray:
    upper = n > x  # the tail from n is the short side; else 1 - the head below n
    start = np.where(upper, n, np.maximum(n - width, 0))
    j = start[:, None] + np.arange(width)[None, :]
    keep = np.where(upper[:, None], True, j < n[:, None])
    log_pmf = -x[:, None] + j * np.log(x)[:, None] - _log_factorial(j)
    mass: FloatArray = np.where(keep, np.exp(log_pmf), 0.0).sum(axis=1)
    out: FloatArray = np.where(upper, mass, 1.0 - mass).clip(0.0, 1.0)
    return out


_FACTORIALS: list[FloatArray] = [np.zeros(1)]


def _log_factorial(j: NDArray[np.int64]) -> FloatArray:
    table = _FACTORIALS[0]
    top = int(j.max()) + 1
    if top > table.size:
        size = max(top, 2 * table.size)
        table = np.array([math.lgamma(v + 1.0) for v in range(size)])
        _FACTORIALS[0] = table
    return table[j]


def cycle_means(pages: SignalPages, threshold: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``(E[L(ι)], E[F(ι)])`` per page: the mean cycle length and mean fresh time per cycle
    under the rule "crawl once ``τ^eff >= ι``" (``ι = ∞``: never crawled, both infinite)."""
    iota = np.broadcast_to(np.asarray(threshold, dtype=np.float64), pages.mu.shape).copy()
    if (iota < 0).any() or np.isnan(iota).any():
        raise ValueError("threshold must be >= 0")
    delta = pages.delta
    step = pages.signal_step()
    length = np.full(iota.shape, np.inf)
    fresh = np.full(iota.shape, np.inf)
    finite = np.isfinite(iota)
    # Signals that say nothing (c = 0): the time since the crawl is the whole state.
    plain = finite & (step == 0)
    length[plain] = iota[plain]
    fresh[plain] = -np.expm1(-delta[plain] * iota[plain]) / delta[plain]
    rest = np.flatnonzero(finite & (step > 0))
    if rest.size:
        length[rest], fresh[rest] = _signal_sums(pages, iota, step, rest)
    return length, fresh


def _signal_sums(
    pages: SignalPages, iota: FloatArray, step: FloatArray, rows: NDArray[np.int64]
) -> tuple[FloatArray, FloatArray]:
    rate = pages.delta_o[rows] + pages.nu[rows]
    total = pages.delta[rows] + pages.nu[rows]
    it, c, nu = iota[rows], step[rows], pages.nu[rows]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        terms = np.where(np.isinf(c), 1.0, np.ceil(it / c))
    # Terms with k far above the Poisson mean of the signal count add nothing.
    cut = np.ceil(total * it + _TAIL_SDS * np.sqrt(total * it) + _TAIL_PAD)
    count = np.maximum(np.minimum(terms, cut), 1).astype(np.int64)
    owner = np.repeat(np.arange(rows.size), count)
    k = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    with np.errstate(invalid="ignore"):
        left = np.maximum(it[owner] - np.where(k > 0, k * c[owner], 0.0), 0.0)
    length = np.bincount(owner, poisson_reaches(k + 1, rate[owner] * left), rows.size) / rate
    with np.errstate(divide="ignore", invalid="ignore"):
        log_share = np.where(k > 0, k * np.log(nu[owner] / total[owner]), 0.0)
    weight = np.exp(log_share) / total[owner]
    fresh = np.bincount(owner, weight * poisson_reaches(k + 1, total[owner] * left), rows.size)
    return length.astype(np.float64), fresh.astype(np.float64)


def crawl_value(pages: SignalPages, threshold: ArrayLike) -> FloatArray:
    """``V(ι) = μ(E[F] - e^{-Δ^u ι} E[L])``, the cap ``μ/Δ`` at ``ι = ∞``.

    >>> p = SignalPages.of(mu=[2.0], delta_o=[0.0], delta_u=[1.0], nu=[0.0])
    >>> bool(np.isclose(crawl_value(p, [1.0])[0], 2.0 * (1 - 2 * np.exp(-1.0))))
    True
    """
    return value_and_slope(pages, threshold)[0]


def crawl_value_slope(pages: SignalPages, threshold: ArrayLike) -> FloatArray:
    """``dV/dι = μΔ^u e^{-Δ^u ι} E[L(ι)]`` (0 at ``ι = ∞``): positive, so ``V`` rises."""
    return value_and_slope(pages, threshold)[1]


def value_and_slope(pages: SignalPages, threshold: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``(V(ι), dV/dι)`` from one evaluation of the sums (a Newton step needs both)."""
    iota = np.broadcast_to(np.asarray(threshold, dtype=np.float64), pages.mu.shape)
    length, fresh = cycle_means(pages, iota)
    finite = np.isfinite(iota)
    with np.errstate(invalid="ignore", over="ignore"):
        decayed = np.exp(-pages.delta_u * iota) * length
        value = np.where(finite, pages.mu * (fresh - decayed), pages.cap)
        slope = np.where(finite, pages.mu * pages.delta_u * decayed, 0.0)
    return value, slope


def periodic_value(mu: ArrayLike, delta: ArrayLike, elapsed: ArrayLike) -> FloatArray:
    """Cho and Garcia-Molina's (and Azar et al.'s) crawl value without signals,
    ``(μ/Δ)[1 - (1 + Δτ)e^{-Δτ}]``, in closed form for the per-slot index."""
    m = np.asarray(mu, dtype=np.float64)
    d = np.asarray(delta, dtype=np.float64)
    x = d * np.asarray(elapsed, dtype=np.float64)
    return (m / d) * (-np.expm1(-x) - x * np.exp(-x))


__all__ = [
    "SignalPages",
    "crawl_value",
    "crawl_value_slope",
    "cycle_means",
    "periodic_value",
    "poisson_reaches",
    "value_and_slope",
]
