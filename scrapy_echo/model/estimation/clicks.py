"""Click histograms per source, kept up to date as clicks arrive.

The fit of ``P, μ`` (docs/how-it-works.rst, "Estimating the parameters") needs, per source,
the average clicks of its new pages in each age bin, ``m_k``, over the pages whose bin ``k``
was observed:

- finished: the page is at least ``(k+1)`` bins old (right censoring);
- not before the crawl, when the click feed only logs clicks from the crawl on (a search
  engine's log: nobody clicks a page it has not indexed). A feed that shows a click stamped
  more than a bin before its page's crawl evidently covers that time (site analytics); from
  then on every bin from age 0 counts.

Per-bin means, and cumulative ones when every bin from age 0 is observed: a page crawled late
has no clicks for its early bins, which under a cumulative curve looks like interest still
growing (and fits as a huge ``P`` with no decay); per bin, those bins are simply unobserved.

Recomputing that from every click at every re-solve costs the whole click history each time;
this structure folds each click in once:

- a *young* page (younger than ``bins · bin_width`` plus a grace period for late clicks)
  keeps its own row of clicks per age bin;
- once it is past that age its row is folded into its source's totals and dropped.

:meth:`ClickHistogram.table` then adds the young pages' finished bins to the totals, which is
a pass over the young pages only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.estimation.dispersion import page_dispersion
from scrapy_echo.model.intervals.curves import FloatArray

IntArray = NDArray[np.intp]

# Click times further than this from zero are no clock's (30 million years either way of the
# epoch, or of a simulation's start): ignored, as non-finite ones are.
_FARTHEST = 1e15


def usable_clicks(ts: FloatArray, counts: FloatArray) -> NDArray[np.bool_]:
    """Which click rows the model takes: a time some clock could give and a finite count
    ``>= 0``. The feed readers refuse the others (counted, logged); any other caller's are
    ignored, rather than let a NaN into every later fit or an age overflow a bin index."""
    return (np.abs(ts) < _FARTHEST) & np.isfinite(counts) & (counts >= 0)


@dataclass(frozen=True)
class ClickTable:
    """Per source and age bin: mean clicks per page in that bin, and over how many pages."""

    increments: FloatArray  # (sources, bins); 0 where pages == 0
    pages: NDArray[np.int64]  # (sources, bins)
    bin_width: float
    # Mean clicks within ages [0, (k+1)Δ): only when every bin from age 0 is observed (the
    # feed has clicks from before crawls). Then the fit uses it: its late bins pool all of a
    # page's clicks so far, which pins P down better than the thin late increments do.
    cumulative: FloatArray | None = None
    # How much more the folded pages' clicks vary than Poisson counts (model.dispersion).
    dispersion: float = 1.0


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
    >>> h.add_page("a", source=0, appeared=0.0, crawled=12.0)
    >>> h.add_clicks(["a", "a", "b"], [25.0, 29.0, 7.0], [2, 1, 9])  # "b" is unknown
    [2]
    >>> t = h.table(now=35.0)  # bins 0-2 finished; bins 0 and 1 began before the crawl
    >>> t.increments[0].tolist(), t.pages[0].tolist()
    ([0.0, 0.0, 3.0], [0, 0, 1])
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
        self._row_crawled = np.zeros(0)
        self._row_first = np.zeros(0, dtype=np.intp)  # first bin wholly after the crawl
        self._row_clicks = np.zeros((0, self.bins))
        self._row_live = np.zeros(0, dtype=bool)
        self._free: list[int] = []
        # Folded pages' per-bin sums, over all bins and over the bins after each crawl.
        self._mature_clicks = np.zeros((0, self.bins))
        self._mature_pages = np.zeros((0, self.bins), dtype=np.int64)
        self._mature_clicks_after = np.zeros((0, self.bins))
        self._mature_pages_after = np.zeros((0, self.bins), dtype=np.int64)
        # Folded pages' clicks per source: how many pages, their sum and the sum of their
        # squares, for the dispersion; over all pages, and over those seen from age 0 (crawled
        # within their first bin), as the two kinds of sums above.
        self._totals = np.zeros((0, 3))
        self._totals_after = np.zeros((0, 3))
        self._sources = 0  # rows of the sums in use (they have room for more)
        self.sees_before_crawl = False  # the feed has shown a click from before a crawl
        # Clicks stamped at or after their page's crawl: the profit the crawl caught (the
        # paper's p_j(Δt) counts clicks after the crawl only).
        self.caught = 0.0

    @property
    def sources(self) -> int:
        return self._sources

    def __len__(self) -> int:
        """Young pages being tracked."""
        return len(self._rows)

    def add_page(
        self, page: Hashable, *, source: int, appeared: float, crawled: float | None = None
    ) -> None:
        """Start tracking ``page``, found on ``source``, estimated to appear at ``appeared``
        and crawled at ``crawled`` (default: when it appeared)."""
        if page in self._rows:
            return
        self._grow_sources(source + 1)
        row = self._free.pop() if self._free else self._new_row()
        self._rows[page] = row
        self._row_page[row] = page
        self._row_source[row] = source
        self._row_appeared[row] = appeared
        crawled = appeared if crawled is None else max(crawled, appeared)
        self._row_crawled[row] = crawled
        self._row_first[row] = self._first_bin_after(crawled - appeared)
        self._row_clicks[row] = 0.0
        self._row_live[row] = True

    def source_of(self, page: Hashable) -> int | None:
        """The source ``page`` was found on, while it is tracked."""
        row = self._rows.get(page)
        return None if row is None else int(self._row_source[row])

    def add_clicks(
        self, pages: Iterable[Hashable], ts: Iterable[float], counts: Iterable[float]
    ) -> list[int]:
        """Fold in clicks; returns the positions of the rows naming a page this histogram
        does not track (not crawled yet, or already folded): the caller decides about those.
        A row the model cannot take (:func:`usable_clicks`) is ignored."""
        rows, times, amounts, unknown = [], [], [], []
        for position, (page, t, c) in enumerate(zip(pages, ts, counts, strict=True)):
            row = self._rows.get(page)
            if row is None:
                unknown.append(position)
                continue
            rows.append(row)
            times.append(t)
            amounts.append(c)
        if not rows:
            return unknown
        r = np.asarray(rows, dtype=np.intp)
        stamped = np.asarray(times, dtype=np.float64)
        counted = np.asarray(amounts, dtype=np.float64)
        usable = usable_clicks(stamped, counted)
        if not usable.all():
            r, stamped, counted = r[usable], stamped[usable], counted[usable]
        # A bin's slack: clocks of the crawler and of the click log may differ a little.
        early = stamped < self._row_crawled[r] - self.bin_width
        if not self.sees_before_crawl and early.any():
            self.sees_before_crawl = True
        if (stamped < self._row_appeared[r]).any():
            self._move_appearances(r, stamped)
        age = stamped - self._row_appeared[r]
        # Binned in floats and cast only inside the horizon: an age past the integer range
        # casts to a negative index.
        k = np.floor(np.maximum(age, 0.0) / self.bin_width)
        inside = k < self.bins
        np.add.at(self._row_clicks, (r[inside], k[inside].astype(np.intp)), counted[inside])
        self.caught += float(np.sum(counted[stamped >= self._row_crawled[r]]))
        return unknown

    def table(self, now: float) -> ClickTable:
        """The table at time ``now``; folds pages past the horizon first."""
        return self.taken(now)()

    def taken(self, now: float) -> Callable[[], ClickTable]:
        """:meth:`table` in two steps: the pages past the horizon are folded and the rows
        copied now, and the function returned sums them into the table on any thread, later
        (the sums are most of a click fit's seconds at 100 k sources: docs/monitor.rst)."""
        self._fold(now)
        whole = self.sees_before_crawl
        n = self._sources
        if whole:
            clicks, pages = self._mature_clicks[:n].copy(), self._mature_pages[:n].copy()
            totals = self._totals[:n]
        else:
            clicks = self._mature_clicks_after[:n].copy()
            pages = self._mature_pages_after[:n].copy()
            totals = self._totals_after[:n]
        dispersion = page_dispersion(totals[:, 0], totals[:, 1], totals[:, 2])
        live = np.flatnonzero(self._row_live)
        rows = _LiveRows(
            self._row_source[live],
            self._row_appeared[live],
            self._row_first[live],
            self._row_clicks[live],
        )
        bins, width = self.bins, self.bin_width
        return lambda: replace(
            _summed(now, whole, clicks, pages, rows, bins, width), dispersion=dispersion
        )

    # -- persistence ----------------------------------------------------------------------
    def to_data(self) -> dict[str, Any]:
        """Plain data (numbers, lists, arrays) for a snapshot; :meth:`from_data` reverses it."""
        return {
            "bin_width": self.bin_width,
            "bins": self.bins,
            "grace": self.grace,
            "rows": [[page, row] for page, row in self._rows.items()],
            "row_source": self._row_source,
            "row_appeared": self._row_appeared,
            "row_crawled": self._row_crawled,
            "row_first": self._row_first,
            "row_clicks": self._row_clicks,
            "row_live": self._row_live,
            "free": list(self._free),
            "mature_clicks": self._mature_clicks[: self._sources],
            "mature_pages": self._mature_pages[: self._sources],
            "mature_clicks_after": self._mature_clicks_after[: self._sources],
            "mature_pages_after": self._mature_pages_after[: self._sources],
            "totals": self._totals[: self._sources],
            "totals_after": self._totals_after[: self._sources],
            "sees_before_crawl": self.sees_before_crawl,
            "caught": self.caught,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> ClickHistogram:
        """The histogram :meth:`to_data` described; ``ValueError`` if the data is not one."""
        out = cls(
            bin_width=float(data["bin_width"]), bins=int(data["bins"]), grace=float(data["grace"])
        )
        n_rows = len(data["row_source"])
        for name, dtype, width in (
            ("row_source", np.intp, None),
            ("row_appeared", np.float64, None),
            ("row_crawled", np.float64, None),
            ("row_first", np.intp, None),
            ("row_clicks", np.float64, out.bins),
            ("row_live", bool, None),
        ):
            setattr(out, "_" + name, _array(data[name], dtype, n_rows, width))
        n_src = len(data["mature_pages"])
        for name, dtype in (
            ("mature_clicks", np.float64),
            ("mature_pages", np.int64),
            ("mature_clicks_after", np.float64),
            ("mature_pages_after", np.int64),
        ):
            setattr(out, "_" + name, _array(data[name], dtype, n_src, out.bins))
        for name in ("totals", "totals_after"):  # (none in a state saved before they were kept)
            setattr(
                out, "_" + name, _array(data.get(name, np.zeros((n_src, 3))), np.float64, n_src, 3)
            )
        out._sources = n_src
        out._free = [int(row) for row in data["free"]]
        for page, row in data["rows"]:
            if not 0 <= int(row) < n_rows:
                raise ValueError(f"row {row!r} out of range")
            out._rows[page] = int(row)
            out._row_page[int(row)] = page
        out.sees_before_crawl = bool(data["sees_before_crawl"])
        out.caught = float(data["caught"])
        return out

    # -- internals ------------------------------------------------------------------------
    def _move_appearances(self, rows: IntArray, stamped: FloatArray) -> None:
        """A click before a page's estimated appearance proves the page older: move the
        estimate back, by whole bins, to at or before that click, and its clicks so far with
        it. (Counting such clicks at age 0 instead piles them into the first bin, which the
        fit reads as interest that fades at once.)"""
        earliest: dict[int, float] = {}
        for row, t in zip(rows.tolist(), stamped.tolist(), strict=True):
            if t < self._row_appeared[row] and t < earliest.get(row, np.inf):
                earliest[row] = t
        for row, t in earliest.items():
            appeared = float(self._row_appeared[row])
            gap = (appeared - t) / self.bin_width  # (Python floats: an overflow is inf, quietly)
            shift = math.ceil(gap) if math.isfinite(gap) else self.bins
            back = appeared - shift * self.bin_width
            # (Overflows only for a page said to appear at an absurd time: then at its click.)
            self._row_appeared[row] = back if math.isfinite(gap) and math.isfinite(back) else t
            moved = np.zeros(self.bins)
            if shift < self.bins:
                moved[shift:] = self._row_clicks[row, : self.bins - shift]
            self._row_clicks[row] = moved
            lag = float(self._row_crawled[row] - self._row_appeared[row])
            self._row_first[row] = self._first_bin_after(lag)

    def _first_bin_after(self, lag: float) -> int:
        """The first bin wholly after a crawl ``lag`` seconds after the page appeared (``bins``
        if none is)."""
        lag_bins = lag / self.bin_width
        return math.ceil(lag_bins) if lag_bins < self.bins else self.bins

    def _new_row(self) -> int:
        row = self._row_source.size
        grow = max(16, row)
        self._row_source = np.concatenate([self._row_source, np.zeros(grow, dtype=np.intp)])
        self._row_appeared = np.concatenate([self._row_appeared, np.zeros(grow)])
        self._row_crawled = np.concatenate([self._row_crawled, np.zeros(grow)])
        self._row_first = np.concatenate([self._row_first, np.zeros(grow, dtype=np.intp)])
        self._row_clicks = np.concatenate([self._row_clicks, np.zeros((grow, self.bins))])
        self._row_live = np.concatenate([self._row_live, np.zeros(grow, dtype=bool)])
        self._free.extend(range(row + grow - 1, row, -1))
        return row

    def _grow_sources(self, sources: int) -> None:
        """Room for ``sources`` sources' sums: doubled when full, as sources come one at a
        time (grown by one row each, 100 k sources copied 10^10 cells)."""
        if sources <= self._sources:
            return
        room = self._mature_pages.shape[0]
        if sources > room:
            extra = max(sources, 2 * room, 16) - room
            zeros = np.zeros((extra, self.bins))
            counts = np.zeros((extra, self.bins), dtype=np.int64)
            self._mature_clicks = np.concatenate([self._mature_clicks, zeros])
            self._mature_pages = np.concatenate([self._mature_pages, counts])
            self._mature_clicks_after = np.concatenate([self._mature_clicks_after, zeros])
            self._mature_pages_after = np.concatenate([self._mature_pages_after, counts])
            self._totals = np.concatenate([self._totals, np.zeros((extra, 3))])
            self._totals_after = np.concatenate([self._totals_after, np.zeros((extra, 3))])
        self._sources = sources

    def _fold(self, now: float) -> None:
        horizon = self.bins * self.bin_width + self.grace
        old = np.flatnonzero(self._row_live & (now - self._row_appeared >= horizon))
        if not old.size:
            return
        src = self._row_source[old]
        after = np.arange(self.bins)[None, :] >= self._row_first[old][:, None]
        row_clicks = self._row_clicks[old]
        np.add.at(self._mature_clicks, src, row_clicks)
        np.add.at(self._mature_pages, src, 1)
        np.add.at(self._mature_clicks_after, src, np.where(after, row_clicks, 0.0))
        np.add.at(self._mature_pages_after, src, after.astype(np.int64))
        total = row_clicks.sum(axis=1)
        with np.errstate(over="ignore"):  # (an absurd count: that source's φ is not measured)
            moments = np.stack([np.ones_like(total), total, total**2], axis=1)
        np.add.at(self._totals, src, moments)
        seen = self._row_first[old] == 0
        np.add.at(self._totals_after, src[seen], moments[seen])
        self._row_live[old] = False
        for row in old.tolist():
            del self._rows[self._row_page.pop(row)]
            self._free.append(row)


def _array(value: Any, dtype: Any, rows: int, width: int | None) -> NDArray[Any]:
    """``value`` as an array of ``dtype`` and shape ``(rows,)`` or ``(rows, width)``."""
    array = np.array(value, dtype=dtype)
    shape = (rows,) if width is None else (rows, width)
    if array.shape != shape:
        raise ValueError(f"array of shape {array.shape}, expected {shape}")
    return array


@dataclass(frozen=True)
class _LiveRows:
    """Copies of the young pages' rows, for :func:`_summed`."""

    source: NDArray[np.intp]
    appeared: FloatArray
    first: NDArray[np.intp]
    clicks: FloatArray


def _summed(
    now: float,
    whole: bool,
    clicks: FloatArray,
    pages: NDArray[np.int64],
    live: _LiveRows,
    bins: int,
    bin_width: float,
) -> ClickTable:
    """The click table: the folded pages' sums ``clicks, pages`` (changed here) plus the
    young pages' finished bins at ``now``; with ``whole``, every bin from age 0 was seen."""
    running = np.cumsum(clicks, axis=1) if whole else None
    if live.source.size:
        finished = np.floor((now - live.appeared) / bin_width)
        finished = np.clip(finished, 0, bins).astype(np.intp)
        k = np.arange(bins)[None, :]
        observed = k < finished[:, None]
        if not whole:
            observed &= k >= live.first[:, None]
        # Sum rows per source with bincount on flat (source, bin) cells: np.add.at is ten
        # times slower here.
        cells = (live.source[:, None] * bins + k).ravel()
        size = clicks.size
        clicks += np.bincount(
            cells, weights=np.where(observed, live.clicks, 0.0).ravel(), minlength=size
        ).reshape(clicks.shape)
        pages += (
            np.bincount(cells, weights=observed.ravel(), minlength=size)
            .reshape(pages.shape)
            .astype(np.int64)
        )
        if running is not None:
            so_far = np.cumsum(live.clicks, axis=1)
            running += np.bincount(
                cells, weights=np.where(observed, so_far, 0.0).ravel(), minlength=size
            ).reshape(clicks.shape)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(pages > 0, clicks / np.maximum(pages, 1), 0.0)
        cumulative = (
            None if running is None else np.where(pages > 0, running / np.maximum(pages, 1), 0.0)
        )
    return ClickTable(mean, pages, bin_width, cumulative)
