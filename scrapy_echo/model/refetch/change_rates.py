"""Change rates from censored observations: was a page changed between two fetches or not
(content hash or ETag), pooled per group (a site or section): the estimators of Ford, Grimes
and Tassone and those they build on (docs/how-it-works.rst, "Refreshing pages that change").

- :func:`change_rates`: the maximum-likelihood rate for irregular intervals (the paper's
  eq. 2, Cho and Garcia-Molina), ``Σ_changed t/(e^{λt} - 1) = Σ_unchanged t``, solved for every
  group at once, with two pseudo-observations added to each group (the prior: a change seen
  after 1 h and none after 57 h, which alone give ``Δ̂ = 1/log(58/57) ≈ 57.5 h``). Without a
  prior, a group that never changed gets ``Δ̂ =`` the sum of its intervals and one that always
  changed its shortest interval (the paper's substitutes).
- :func:`regular_interval_rate`: Cho and Garcia-Molina's estimator for a fixed interval ``C``
  (eq. 1, read the right way round: ``λ̂C = -log((n - X + ½)/(n + ½))``).
- :func:`fit_prior`: the pseudo-observation pair fitted to many groups (empirical Bayes).

The left side of eq. 2 is ``(1/λ) Σ φ(λt)`` with ``φ(x) = x/(e^x - 1)``, decreasing and
convex in ``λ``. Since ``1 - x/2 ≤ φ(x) ≤ 1``, the root lies in ``[L/(U + T/2), L/U]``
(``L`` changes, ``T`` their total time, ``U`` unchanged time). Newton from the lower end of
a convex decreasing function never overshoots: it climbs to the root monotonically, with no
bracketing needed. Minus the derivative, ``J = Σ t²/(4 sinh²(λt/2))``, is the observed
information, and ``I = λ̂²J = Σ (x/(2 sinh(x/2)))²`` (``x = λ̂t``, each change counting at most
1) that of ``log λ̂``: :func:`scrapy_echo.model.refetch.refresh.underestimate_risk`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scrapy_echo.model.intervals.curves import FloatArray

MIN_GROUPS = 10  # fit_prior needs at least this many groups with observations
_GRID = 160  # λ values the prior fit integrates over
_CHUNK = 4096  # observations per block of the prior fit's likelihood table


@dataclass(frozen=True)
class PseudoObservations:
    """The prior: one change observed after ``changed`` seconds and no change after
    ``unchanged`` seconds, added to every group. Their likelihood
    ``(1 - e^{-λa}) e^{-λb} = e^{-λb} - e^{-λ(a+b)}`` is, normalised, the density of a sum of two
    exponentials with rates ``b`` and ``a + b``: the prior of ``λ`` they stand for."""

    changed: float
    unchanged: float

    def __post_init__(self) -> None:
        for name in ("changed", "unchanged"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")

    def rate(self) -> float:
        """``λ̂`` from the two points alone.

        >>> round(1 / DEFAULT_PRIOR.rate() / 3600, 2)  # hours
        57.5
        """
        return math.log1p(self.changed / self.unchanged) / self.changed


DEFAULT_PRIOR = PseudoObservations(changed=3600.0, unchanged=57 * 3600.0)


@dataclass(frozen=True)
class RateEstimate:
    """Per group: ``rate`` (``λ̂``, 1/s; NaN without any data or prior), ``information`` (of
    ``log λ̂``; 0 where eq. 2 had no root), ``solved`` (eq. 2 solved, not a substitute); and
    whether Newton ``converged`` within ``iterations``."""

    rate: FloatArray
    information: FloatArray
    solved: NDArray[np.bool_]
    converged: bool
    iterations: int

    @property
    def delta(self) -> FloatArray:
        """``Δ̂ = 1/λ̂``, seconds."""
        with np.errstate(divide="ignore"):
            out: FloatArray = 1.0 / self.rate
        return out


@dataclass(frozen=True)
class ChangeSums:
    """What eq. 2 needs per group: each changed interval (``group``, ``interval``,
    ``weight`` = how many), the unchanged seconds summed, the shortest changed interval."""

    groups: int
    group: NDArray[np.int64]
    interval: FloatArray
    weight: FloatArray
    unchanged: FloatArray
    shortest: FloatArray


def _per_group(group: NDArray[np.int64], values: FloatArray, n: int) -> FloatArray:
    """``values`` summed per group, ``n`` groups."""
    return np.bincount(group, weights=values, minlength=n).astype(np.float64, copy=False)


def sums_of(
    groups: ArrayLike,
    intervals: ArrayLike,
    changed: ArrayLike,
    weights: ArrayLike | None = None,
    n_groups: int | None = None,
) -> ChangeSums:
    """Observations checked and summed per group (``ValueError`` naming a bad argument)."""
    g = np.atleast_1d(np.asarray(groups))
    t = np.atleast_1d(np.asarray(intervals, dtype=np.float64))
    z = np.atleast_1d(np.asarray(changed, dtype=bool))
    w = np.ones_like(t) if weights is None else np.atleast_1d(np.asarray(weights, np.float64))
    if not g.shape == t.shape == z.shape == w.shape or g.ndim != 1:
        raise ValueError("groups, intervals, changed and weights must be 1-d, of one length")
    if g.size and not (np.issubdtype(g.dtype, np.integer) and g.min() >= 0):
        raise ValueError(f"groups must be integers >= 0, got {g.min()!r}")
    bad = ~(np.isfinite(t) & (t > 0))
    if bad.any():
        raise ValueError(f"intervals must be finite seconds > 0, got {t[bad][0]!r}")
    if not (np.isfinite(w) & (w >= 0)).all():
        raise ValueError("weights must be finite and >= 0")
    g = g.astype(np.int64)
    n = int(g.max()) + 1 if n_groups is None and g.size else int(n_groups or 0)
    if g.size and g.max() >= n:
        raise ValueError(f"groups must be < n_groups ({n}), got {g.max()!r}")
    unchanged = _per_group(g[~z], (w * t)[~z], n)
    keep = z & (w > 0)
    shortest = np.full(n, np.inf)
    np.minimum.at(shortest, g[keep], t[keep])
    return ChangeSums(n, g[keep], t[keep], w[keep], unchanged, shortest)


def change_rates(
    groups: ArrayLike,
    intervals: ArrayLike,
    changed: ArrayLike,
    *,
    n_groups: int | None = None,
    weights: ArrayLike | None = None,
    prior: PseudoObservations | None = DEFAULT_PRIOR,
    rtol: float = 1e-10,
    max_iterations: int = 200,
) -> RateEstimate:
    """``λ̂`` per group from observations ``(group, interval seconds, changed)``: eq. 2 with
    ``prior`` added to every group (``weights``: each observation counted that many times).

    Examples
    --------
    >>> est = change_rates([0, 0, 1], [3600.0, 7200.0, 3600.0], [True, False, True], n_groups=3)
    >>> (est.delta / 3600).round(1).tolist()  # group 2 has only the prior
    [30.0, 29.0, 57.5]
    >>> change_rates([0, 0, 1], [10.0, 30.0, 5.0], [False, False, True], prior=None).delta
    array([40.,  5.])
    """
    sums = sums_of(groups, intervals, changed, weights, n_groups)
    return solve(sums, prior, rtol=rtol, max_iterations=max_iterations)


def solve(
    sums: ChangeSums,
    prior: PseudoObservations | None,
    *,
    rtol: float = 1e-10,
    max_iterations: int = 200,
) -> RateEstimate:
    """Eq. 2 for every group of ``sums`` (see :func:`change_rates`)."""
    n, g, t, w = sums.groups, sums.group, sums.interval, sums.weight
    changes = _per_group(g, w, n)
    time = _per_group(g, w * t, n)
    unchanged = sums.unchanged.copy()
    a = 0.0
    if prior is not None:
        a = prior.changed
        changes += 1.0
        time += a
        unchanged += prior.unchanged
    solved = (changes > 0) & (unchanged > 0)
    rate = np.where(solved, changes / np.where(solved, unchanged + time / 2, 1.0), np.nan)
    use = solved[g]
    g, t, w = g[use], t[use], w[use]

    def score(lam: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Left side of eq. 2 and minus its derivative, per group."""
        x = lam[g] * t
        with np.errstate(over="ignore"):
            left = _per_group(g, w * t / np.expm1(x), n)
            slope = _per_group(g, w * (t / (2 * np.sinh(x / 2))) ** 2, n)
            if prior is not None:
                left += a / np.expm1(lam * a)
                slope += (a / (2 * np.sinh(lam * a / 2))) ** 2
        return left, slope

    converged = False
    iterations = 0
    live = solved.copy()
    while iterations < max_iterations and live.any():
        iterations += 1
        left, slope = score(rate)
        step = np.where(live & (slope > 0), (left - unchanged) / np.where(live, slope, 1.0), 0.0)
        rate = rate + step
        live &= np.abs(step) > rtol * rate
    converged = not live.any()
    _, slope = score(rate)
    information = np.where(solved, rate * rate * slope, 0.0)
    # The paper's substitutes: never changed -> Δ̂ = all time seen; always changed -> shortest.
    never = (changes == 0) & (unchanged > 0)
    always = (changes > 0) & (unchanged == 0)
    rate[never] = 1.0 / unchanged[never]
    rate[always] = 1.0 / sums.shortest[always]
    return RateEstimate(rate, information, solved, converged, iterations)


def regular_interval_rate(
    changes: ArrayLike, intervals: ArrayLike, interval: ArrayLike
) -> FloatArray:
    """Cho and Garcia-Molina's rate for ``intervals`` fetches every ``interval`` seconds of
    which ``changes`` saw a change: ``λ̂ = -log((n - X + ½)/(n + ½)) / C`` (the paper's eq. 1
    prints the left side as ``Δ/C``; it is ``C/Δ̂``).

    >>> regular_interval_rate([0, 3, 10], 10, 3600.0).round(8).tolist()
    [0.0, 9.346e-05, 0.0008457]
    """
    x = np.asarray(changes, dtype=np.float64)
    n = np.asarray(intervals, dtype=np.float64)
    c = np.asarray(interval, dtype=np.float64)
    if not ((x >= 0) & (x <= n)).all():
        raise ValueError("changes must be in [0, intervals]")
    if not (np.isfinite(c) & (c > 0)).all():
        raise ValueError("interval must be finite seconds > 0")
    out: FloatArray = (0.0 - np.log((n - x + 0.5) / (n + 0.5))) / c
    return out


def fit_prior(
    groups: ArrayLike,
    intervals: ArrayLike,
    changed: ArrayLike,
    *,
    n_groups: int | None = None,
    weights: ArrayLike | None = None,
) -> PseudoObservations | None:
    """The pseudo-observation pair that best explains all groups' data (see :func:`fit_sums`).

    ``None`` with fewer than :data:`MIN_GROUPS` groups observed, or no change or no unchanged
    interval anywhere (nothing to set the scale).
    """
    return fit_sums(sums_of(groups, intervals, changed, weights, n_groups))


def fit_sums(sums: ChangeSums) -> PseudoObservations | None:
    """Empirical Bayes: the pair ``(a, b)`` maximising the marginal likelihood
    ``Σ_groups log ∫ L_group(λ) p_ab(λ) dλ``, ``p_ab ∝ e^{-λb} - e^{-λ(a+b)}`` (the pair's own
    likelihood, so the pseudo-points then give each group its posterior mode). The integral
    is a sum over a log grid of ``λ``; ``(b, a/b)`` is searched on a log grid, then on a finer
    one around the best point. The pair can only express a prior between a Gamma(2) and an
    exponential (coefficient of variation ``1/√2`` to 1): for groups spread wider it takes
    the widest it can."""
    n, g, t, w = sums.groups, sums.group, sums.interval, sums.weight
    seen = _per_group(g, w, n) + sums.unchanged > 0
    total = _per_group(g, w * t, n) + sums.unchanged
    if int(seen.sum()) < MIN_GROUPS or not t.size or not (sums.unchanged > 0).any():
        return None
    short, long = float(t.min()), float(total.max())
    lam = np.geomspace(1e-3 / long, 1e2 / short, _GRID)
    loglik = -sums.unchanged[:, None] * lam[None, :]
    for start in range(0, t.size, _CHUNK):
        part = slice(start, start + _CHUNK)
        rows = w[part, None] * np.log(-np.expm1(-t[part, None] * lam[None, :]))
        np.add.at(loglik, g[part], rows)
    loglik = loglik[seen]
    loglik -= loglik.max(axis=1, keepdims=True)
    likelihood = np.exp(loglik)

    def best(b: FloatArray, ratio: FloatArray) -> tuple[float, float]:
        b_grid, ratio_grid = np.meshgrid(b, ratio, indexing="ij")
        bb, aa = b_grid.ravel(), ratio_grid.ravel() * b_grid.ravel()
        # Prior mass per log-λ cell: λ p(λ) d log λ, normalised on the grid.
        mass = lam * np.exp(-lam * bb[:, None]) * -np.expm1(-lam * aa[:, None])
        mass /= mass.sum(axis=1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):
            score = np.log(likelihood @ mass.T).sum(axis=0)
        score[np.isnan(score)] = -np.inf
        k = int(np.argmax(score))
        return float(bb[k]), float(aa[k] / bb[k])

    b, ratio = best(np.geomspace(short / 10, long * 10, 48), np.geomspace(1e-3, 1e3, 25))
    b_step, r_step = (100 * long / short) ** (1 / 47), 1e6 ** (1 / 24)
    b, ratio = best(
        b * np.geomspace(1 / b_step, b_step, 17), ratio * np.geomspace(1 / r_step, r_step, 17)
    )
    return PseudoObservations(changed=ratio * b, unchanged=b)


__all__ = [
    "DEFAULT_PRIOR",
    "MIN_GROUPS",
    "ChangeSums",
    "PseudoObservations",
    "RateEstimate",
    "change_rates",
    "fit_prior",
    "fit_sums",
    "regular_interval_rate",
    "solve",
    "sums_of",
]
