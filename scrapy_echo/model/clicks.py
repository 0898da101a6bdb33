"""Click histograms per source, kept up to date as clicks arrive.

The fit of ``P, μ`` (ECHO.md, "Estimating the parameters") needs, per source, the average
cumulative clicks of its new pages by age bin, ``c_k``, over the pages old enough to have
finished bin ``k`` (right censoring). Recomputing that from every click at every re-solve
costs the whole click history each time; this structure folds each click in once:

- a *young* page (younger than ``bins · bin_width`` plus a grace period for late clicks)
  keeps its own row of clicks per age bin;
- once it is past that age its row is folded into its source's totals and dropped.

:meth:`ClickHistogram.table` then adds the young pages' finished bins to the totals, which is
a pass over the young pages only.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.curves import FloatArray

IntArray = NDArray[np.intp]


@dataclass(frozen=True)
class ClickTable:
    """Per source and age bin: mean cumulative clicks per page, and how many pages."""

    cumulative: FloatArray  # (sources, bins); 0 where pages == 0
    pages: NDArray[np.int64]  # (sources, bins)
    bin_width: float


class ClickHistogram:
    """Clicks per source and page age, censoring-aware.

    Parameters
    ----------
    bin_width : float
        Seconds per age bin (the paper: 20 minutes).
    bins : int
        Age bins kept (``bins · bin_width`` is the horizon of the fit; default one day).
    grace : float
        Seconds a page stays young past the horizon, so clicks pushed late still count.

    Examples
    --------
    >>> h = ClickHistogram(bin_width=10.0, bins=3)
    >>> h.add_page("a", source=0, appeared=0.0)
    >>> h.add_clicks(["a", "a", "b"], [5.0, 25.0, 7.0], [2, 1, 9])  # "b" is unknown
    [2]
    >>> t = h.table(now=25.0)  # "a" is 25 s old: bins 0 and 1 are finished
    >>> t.cumulative[0].tolist(), t.pages[0].tolist()
    ([2.0, 2.0, 0.0], [1, 1, 0])
    """

    def __init__(self, *, bin_width: float = 1200.0, bins: int = 72, grace: float = 3600.0):
        if not bin_width > 0:
            raise ValueError(f"bin_width must be > 0, got {bin_width!r}")
        if bins < 1:
            raise ValueError(f"bins must be >= 1, got {bins!r}")
        if not grace >= 0:
            raise ValueError(f"grace must be >= 0, got {grace!r}")
        self.bin_width = float(bin_width)
        self.bins = int(bins)
        self.grace = float(grace)
        self._rows: dict[Hashable, int] = {}
        self._row_page: dict[int, Hashable] = {}  # the reverse, so folding needs no scan
        self._row_source = np.zeros(0, dtype=np.intp)
        self._row_appeared = np.zeros(0)
        self._row_clicks = np.zeros((0, self.bins))
        self._row_live = np.zeros(0, dtype=bool)
        self._free: list[int] = []
        self._mature_clicks = np.zeros((0, self.bins))  # Σ cumulative clicks, folded pages
        self._mature_pages = np.zeros(0, dtype=np.int64)

    @property
    def sources(self) -> int:
        return int(self._mature_pages.size)

    def __len__(self) -> int:
        """Young pages being tracked."""
        return len(self._rows)

    def add_page(self, page: Hashable, *, source: int, appeared: float) -> None:
        """Start tracking ``page``, found on ``source``, estimated to appear at ``appeared``."""
        if page in self._rows:
            return
        self._grow_sources(source + 1)
        row = self._free.pop() if self._free else self._new_row()
        self._rows[page] = row
        self._row_page[row] = page
        self._row_source[row] = source
        self._row_appeared[row] = appeared
        self._row_clicks[row] = 0.0
        self._row_live[row] = True

    def add_clicks(
        self, pages: Iterable[Hashable], ts: Iterable[float], counts: Iterable[float]
    ) -> list[int]:
        """Fold in clicks; returns the positions of the rows naming a page this histogram
        does not track (not crawled yet, or already folded): the caller decides about those."""
        rows, times, amounts, unknown = [], [], [], []
        for position, (page, t, c) in enumerate(zip(pages, ts, counts, strict=True)):
            row = self._rows.get(page)
            if row is None:
                unknown.append(position)
                continue
            rows.append(row)
            times.append(t)
            amounts.append(c)
        if rows:
            r = np.asarray(rows, dtype=np.intp)
            age = np.asarray(times, dtype=np.float64) - self._row_appeared[r]
            # A click stamped before the estimated appearance counts at age 0: the estimate
            # is a midpoint, the page may well be older.
            k = np.floor(np.maximum(age, 0.0) / self.bin_width).astype(np.intp)
            inside = k < self.bins
            np.add.at(self._row_clicks, (r[inside], k[inside]), np.asarray(amounts)[inside])
        return unknown

    def table(self, now: float) -> ClickTable:
        """The censoring-aware table at time ``now``; folds pages past the horizon first."""
        self._fold(now)
        clicks = self._mature_clicks.copy()
        pages = np.repeat(self._mature_pages[:, None], self.bins, axis=1)
        live = np.flatnonzero(self._row_live)
        if live.size:
            finished = np.floor((now - self._row_appeared[live]) / self.bin_width)
            finished = np.clip(finished, 0, self.bins).astype(np.intp)
            done = np.arange(self.bins)[None, :] < finished[:, None]  # bin k finished
            cumulative = np.cumsum(self._row_clicks[live], axis=1)
            src = self._row_source[live]
            # Sum rows per source with bincount on flat (source, bin) cells: np.add.at is
            # ten times slower here.
            cells = (src[:, None] * self.bins + np.arange(self.bins)[None, :]).ravel()
            size = clicks.size
            clicks += np.bincount(
                cells, weights=np.where(done, cumulative, 0.0).ravel(), minlength=size
            ).reshape(clicks.shape)
            pages += (
                np.bincount(cells, weights=done.ravel(), minlength=size)
                .reshape(pages.shape)
                .astype(np.int64)
            )
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(pages > 0, clicks / np.maximum(pages, 1), 0.0)
        return ClickTable(mean, pages, self.bin_width)

    # -- internals ------------------------------------------------------------------------
    def _new_row(self) -> int:
        row = self._row_source.size
        grow = max(16, row)
        self._row_source = np.concatenate([self._row_source, np.zeros(grow, dtype=np.intp)])
        self._row_appeared = np.concatenate([self._row_appeared, np.zeros(grow)])
        self._row_clicks = np.concatenate([self._row_clicks, np.zeros((grow, self.bins))])
        self._row_live = np.concatenate([self._row_live, np.zeros(grow, dtype=bool)])
        self._free.extend(range(row + grow - 1, row, -1))
        return row

    def _grow_sources(self, sources: int) -> None:
        extra = sources - self._mature_pages.size
        if extra > 0:
            self._mature_clicks = np.concatenate(
                [self._mature_clicks, np.zeros((extra, self.bins))]
            )
            self._mature_pages = np.concatenate([self._mature_pages, np.zeros(extra, np.int64)])

    def _fold(self, now: float) -> None:
        horizon = self.bins * self.bin_width + self.grace
        old = np.flatnonzero(self._row_live & (now - self._row_appeared >= horizon))
        if not old.size:
            return
        src = self._row_source[old]
        np.add.at(self._mature_clicks, src, np.cumsum(self._row_clicks[old], axis=1))
        np.add.at(self._mature_pages, src, 1)
        self._row_live[old] = False
        for row in old.tolist():
            del self._rows[self._row_page.pop(row)]
            self._free.append(row)
