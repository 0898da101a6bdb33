"""Per-group change observations, small enough to update at every refetch and re-solve at will
(docs/how-it-works.rst, "Refreshing pages that change").

Eq. 2 of Ford et al. needs every changed interval, not a sum. :class:`ChangeBook` keeps them as
counts on a log grid of interval lengths (``bins_per_doubling`` bins per factor of 2, from
``shortest`` seconds up, ``doublings`` factors of 2), each standing for its bin's geometric
middle, so no interval is off by more than a factor ``s = 2^{1/(2·bins_per_doubling)}``.
Unchanged intervals enter eq. 2 only through their sum, which is kept exactly, as is each
group's shortest changed interval (the always-changed substitute).

Error bound: write eq. 2 as ``F(λ) = Σ φ(λt) - λU = 0`` with ``φ(x) = x/(e^x - 1)``
decreasing. Binning replaces each ``t`` by ``t'`` with ``t/s ≤ t' ≤ st``, so the binned
``F'(λ/s) ≥ F(λ)`` and ``F'(sλ) ≤ F(λ)`` termwise; at ``λ = λ̂`` both roots are pinned:
``λ̂/s ≤ λ̂' ≤ sλ̂``, 4.4% at the default 8 bins per doubling (exact pseudo-observations keep
the bound). Intervals outside the grid are put in its end bins, outside the bound.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.refetch.change_rates import (
    DEFAULT_PRIOR,
    ChangeSums,
    PseudoObservations,
    RateEstimate,
    fit_sums,
    solve,
)

_VERSION = 1


class ChangeBook:
    """Changed intervals binned, unchanged seconds summed, per group; :meth:`rates` solves.

    Examples
    --------
    >>> book = ChangeBook()
    >>> book.observe(1, 3600.0, True)
    >>> book.observe(1, 7200.0, False)
    >>> (book.rates().delta / 3600).round(1).tolist()  # group 0: the prior alone
    [57.5, 30.0]
    >>> ChangeBook.from_data(book.to_data()).rates().rate.tolist() == book.rates().rate.tolist()
    True
    """

    def __init__(
        self,
        groups: int = 0,
        *,
        prior: PseudoObservations | None = DEFAULT_PRIOR,
        bins_per_doubling: int = 8,
        shortest: float = 1.0,
        doublings: int = 30,
    ) -> None:
        if bins_per_doubling < 1 or doublings < 1:
            raise ValueError(
                f"bins_per_doubling and doublings must be >= 1, got {bins_per_doubling!r}, "
                f"{doublings!r}"
            )
        if not (math.isfinite(shortest) and shortest > 0):
            raise ValueError(f"shortest must be a finite number of seconds > 0, got {shortest!r}")
        self.prior = prior
        self.bins_per_doubling = int(bins_per_doubling)
        self.shortest = float(shortest)
        self.doublings = int(doublings)
        bins = self.bins_per_doubling * self.doublings
        self.counts: NDArray[np.int64] = np.zeros((0, bins), dtype=np.int64)
        self.unchanged: FloatArray = np.zeros(0)  # seconds, summed
        self.unchanged_count: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.shortest_change: FloatArray = np.zeros(0)  # inf until a change is seen
        self.grow(groups)

    @property
    def groups(self) -> int:
        return len(self.unchanged)

    @property
    def error_bound(self) -> float:
        """Largest factor between a binned rate and the exact one (intervals on the grid)."""
        return float(2.0 ** (0.5 / self.bins_per_doubling))

    def representatives(self) -> FloatArray:
        """The interval each bin stands for: its geometric middle, seconds."""
        bins = self.counts.shape[1]
        out: FloatArray = self.shortest * 2.0 ** ((np.arange(bins) + 0.5) / self.bins_per_doubling)
        return out

    def grow(self, groups: int) -> None:
        extra = groups - self.groups
        if extra > 0:
            self.counts = np.concatenate(
                [self.counts, np.zeros((extra, self.counts.shape[1]), np.int64)]
            )
            self.unchanged = np.concatenate([self.unchanged, np.zeros(extra)])
            self.unchanged_count = np.concatenate([self.unchanged_count, np.zeros(extra, np.int64)])
            self.shortest_change = np.concatenate([self.shortest_change, np.full(extra, np.inf)])

    def observe(self, group: int, interval: float, changed: bool) -> None:
        """One refetch of a page of ``group`` after ``interval`` seconds, ``changed`` or not."""
        if not group >= 0:
            raise ValueError(f"group must be >= 0, got {group!r}")
        self.observe_many([group], [interval], [changed])

    def observe_many(self, groups: ArrayLike, intervals: ArrayLike, changed: ArrayLike) -> None:
        """Many refetches at once (arrays of one length); groups past the end are added."""
        g = np.atleast_1d(np.asarray(groups))
        t = np.atleast_1d(np.asarray(intervals, dtype=np.float64))
        z = np.atleast_1d(np.asarray(changed, dtype=bool))
        if not g.shape == t.shape == z.shape or g.ndim != 1:
            raise ValueError("groups, intervals and changed must be 1-d, of one length")
        if g.size and not (np.issubdtype(g.dtype, np.integer) and g.min() >= 0):
            raise ValueError(f"group must be an integer >= 0, got {g.min()!r}")
        bad = ~(np.isfinite(t) & (t > 0))
        if bad.any():
            raise ValueError(f"interval must be finite seconds > 0, got {t[bad][0]!r}")
        if not g.size:
            return
        g = g.astype(np.int64)
        self.grow(int(g.max()) + 1)
        k = np.floor(np.log2(t / self.shortest) * self.bins_per_doubling)
        k = np.clip(k, 0, self.counts.shape[1] - 1).astype(np.int64)
        np.add.at(self.counts, (g[z], k[z]), 1)
        np.minimum.at(self.shortest_change, g[z], t[z])
        np.add.at(self.unchanged, g[~z], t[~z])
        np.add.at(self.unchanged_count, g[~z], 1)

    def changed_count(self) -> NDArray[np.int64]:
        """Changes seen per group (pseudo-observations not included)."""
        out: NDArray[np.int64] = self.counts.sum(axis=1)
        return out

    def sums(self) -> ChangeSums:
        """The book as eq. 2 reads it: one weighted interval per non-empty bin."""
        g, k = np.nonzero(self.counts)
        reps = self.representatives()[k]
        weights = self.counts[g, k].astype(np.float64)
        return ChangeSums(
            self.groups, g.astype(np.int64), reps, weights, self.unchanged, self.shortest_change
        )

    def rates(self, *, rtol: float = 1e-10, max_iterations: int = 200) -> RateEstimate:
        """``λ̂`` per group under :attr:`prior`
        (:func:`scrapy_echo.model.refetch.change_rates.solve`)."""
        return solve(self.sums(), self.prior, rtol=rtol, max_iterations=max_iterations)

    def fit_prior(self) -> PseudoObservations | None:
        """The prior learned from all groups
        (:func:`scrapy_echo.model.refetch.change_rates.fit_sums`); assign it to :attr:`prior` to use
        it."""
        return fit_sums(self.sums())

    def to_data(self) -> dict[str, Any]:
        """JSON-safe plain lists; the changed counts as (group, bin, count) triples."""
        g, k = np.nonzero(self.counts)
        prior = self.prior
        return {
            "version": _VERSION,
            "groups": self.groups,
            "bins_per_doubling": self.bins_per_doubling,
            "shortest": self.shortest,
            "doublings": self.doublings,
            "prior": None if prior is None else [prior.changed, prior.unchanged],
            "changed_group": g.tolist(),
            "changed_bin": k.tolist(),
            "changed_count": self.counts[g, k].tolist(),
            "unchanged": self.unchanged.tolist(),
            "unchanged_count": self.unchanged_count.tolist(),
            # JSON has no infinity: no change seen yet is null.
            "shortest_change": [v if math.isfinite(v) else None for v in self.shortest_change],
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ChangeBook:
        """From :meth:`to_data` (``ValueError`` on a version or shape it does not know)."""
        if data.get("version") != _VERSION:
            raise ValueError(f"data version must be {_VERSION}, got {data.get('version')!r}")
        prior = data["prior"]
        book = cls(
            int(data["groups"]),
            prior=None if prior is None else PseudoObservations(*map(float, prior)),
            bins_per_doubling=int(data["bins_per_doubling"]),
            shortest=float(data["shortest"]),
            doublings=int(data["doublings"]),
        )
        n = book.groups
        g = np.asarray(data["changed_group"], dtype=np.int64)
        k = np.asarray(data["changed_bin"], dtype=np.int64)
        c = np.asarray(data["changed_count"], dtype=np.int64)
        columns = [data["unchanged"], data["unchanged_count"], data["shortest_change"]]
        if not g.shape == k.shape == c.shape or any(len(col) != n for col in columns):
            raise ValueError("change book data of different lengths")
        if g.size and not (
            g.min() >= 0 and g.max() < n and k.min() >= 0 and k.max() < book.counts.shape[1]
        ):
            raise ValueError("change book data indexes outside its groups or bins")
        book.counts[g, k] = c
        book.unchanged = np.asarray(data["unchanged"], dtype=np.float64)
        book.unchanged_count = np.asarray(data["unchanged_count"], dtype=np.int64)
        book.shortest_change = np.array(
            [np.inf if v is None else float(v) for v in data["shortest_change"]], dtype=np.float64
        )
        return book


__all__ = ["ChangeBook"]
