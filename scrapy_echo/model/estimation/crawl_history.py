"""The last crawls of every source, behind ``λ`` (docs/how-it-works.rst, "Estimating the
parameters" and "Hubs that show only their latest links").

- ``λ``: new links found on the last ``k`` crawls of a source divided by the time those crawls
  span (the paper: ``k`` = 7). The first crawl of a source only records what is there.
- Past the paper, per crawl: the seconds at the start of its interval its count does not
  cover (a hub that overflowed and dates its links: the count covers only the time since the
  oldest new link it still shows), and whether its count is only a floor (a hub that
  overflowed without dates). :meth:`CrawlHistory.window` with ``aware`` uses both
  (:func:`scrapy_echo.model.estimation.censored.censored_rate`); without, it is the paper's count.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.estimation.censored import censored_rate
from scrapy_echo.model.intervals.curves import FloatArray

# Whether a source's crawls ever overflowed (CrawlHistory.full): never, only without dates
# (counts that are floors), or with dated links.
_NEVER, _UNDATED, _DATED = 0, 1, 2


class CrawlHistory:
    """The last ``history + 1`` crawls of every source (time, new links found), in a ring.

    Examples
    --------
    >>> h = CrawlHistory(1, history=2)
    >>> for t, n in [(0.0, 0), (100.0, 5), (200.0, 1), (400.0, 2)]:
    ...     h.record(0, t, n)
    >>> float(h.link_rate()[0])  # last 2 crawls: 3 links over 300 s
    0.01
    >>> links, span = h.long_run()  # all crawls, fading over ``memory`` (days): 8 over 400 s
    >>> round(float(links[0] / span[0]), 4)
    0.02
    """

    def __init__(self, sources: int, *, history: int = 7, memory: float = 3 * 86400.0) -> None:
        if history < 1:
            raise ValueError(f"history must be >= 1, got {history!r}")
        if not (math.isfinite(memory) and memory > 0):
            raise ValueError(f"memory must be a finite number of seconds > 0, got {memory!r}")
        self.history = int(history)
        self.memory = float(memory)
        size = self.history + 1  # the crawl before the window marks where it starts
        self.times: FloatArray = np.full((sources, size), np.nan)
        self.counts: NDArray[np.int64] = np.zeros((sources, size), dtype=np.int64)
        # Per crawl: seconds at the start of its interval its count does not cover, and
        # whether its count is only a floor (hubs that overflowed).
        self.cuts: FloatArray = np.zeros((sources, size))
        self.floors: NDArray[np.bool_] = np.zeros((sources, size), dtype=bool)
        # Per source, as Python lists: :meth:`record` runs at every source crawl, and numpy's
        # scalar reads and writes cost several times more than a list's.
        self.filled: list[int] = [0] * sources  # crawls in the ring
        self.next: list[int] = [0] * sources  # the ring slot the next crawl goes to
        self.newest: list[float] = [math.nan] * sources  # the last crawl's time
        # New links and seconds over all crawls, each weighted e^{-age/memory}.
        self.long_links: list[float] = [0.0] * sources
        self.long_span: list[float] = [0.0] * sources
        self.long_cut: list[float] = [0.0] * sources  # of long_span, the seconds cut
        # For :meth:`shown`, kept past the window: the most new links any crawl found, and
        # whether a crawl ever overflowed (_UNDATED: only without dates; _DATED: with).
        self.most_new: list[int] = [0] * sources
        self.full: list[int] = [_NEVER] * sources
        # The censored rate of each source's window as last computed (NaN: crawled since):
        # a re-solve computes it again only for those.
        self._censored: FloatArray = np.full(sources, np.nan)

    @property
    def sources(self) -> int:
        return len(self.filled)

    def grow(self, sources: int) -> None:
        extra = sources - self.sources
        if extra > 0:
            size = self.history + 1
            self.times = np.concatenate([self.times, np.full((extra, size), np.nan)])
            self.counts = np.concatenate([self.counts, np.zeros((extra, size), np.int64)])
            self.cuts = np.concatenate([self.cuts, np.zeros((extra, size))])
            self.floors = np.concatenate([self.floors, np.zeros((extra, size), bool)])
            self._censored = np.concatenate([self._censored, np.full(extra, np.nan)])
            self.filled += [0] * extra
            self.next += [0] * extra
            self.newest += [math.nan] * extra
            self.long_links += [0.0] * extra
            self.long_span += [0.0] * extra
            self.long_cut += [0.0] * extra
            self.most_new += [0] * extra
            self.full += [_NEVER] * extra

    def record(
        self, source: int, time: float, new_links: int, *, cut: float = 0.0, floor: bool = False
    ) -> None:
        """One crawl of ``source`` at ``time`` that found ``new_links`` new links; ``cut``
        seconds at the start of its interval are not covered by the count, and ``floor`` says
        the count is only a floor (``N ≥ new_links``)."""
        if new_links < 0:
            raise ValueError(f"new_links must be >= 0, got {new_links!r}")
        if source >= len(self.filled):
            self.grow(source + 1)
        slot = self.next[source]
        filled = self.filled[source]
        if filled:
            newest = self.newest[source]
            if time < newest:
                raise ValueError(f"crawl times of source {source} must not go back in time")
            fade = math.exp(-(time - newest) / self.memory)
            cut = min(max(cut, 0.0), time - newest)
            self.long_links[source] = self.long_links[source] * fade + new_links
            self.long_span[source] = self.long_span[source] * fade + (time - newest)
            self.long_cut[source] = self.long_cut[source] * fade + cut
        # The very first crawl only records what is there: none of its links count as new.
        self.counts[source, slot] = new_links if filled else 0
        self.cuts[source, slot] = cut if filled else 0.0
        self.floors[source, slot] = floor and filled > 0 and new_links > 0
        if filled:
            self.most_new[source] = max(self.most_new[source], new_links)
            if cut > 0:
                self.full[source] = _DATED
            elif self.floors[source, slot]:
                self.full[source] = max(self.full[source], _UNDATED)
        self.times[source, slot] = time
        self.newest[source] = time
        self.next[source] = (slot + 1) % (self.history + 1)
        self._censored[source] = np.nan
        self.filled[source] = min(filled + 1, self.history + 1)

    def window(self, *, aware: bool = False, floors: bool = True) -> tuple[FloatArray, FloatArray]:
        """New links found in each source's window and the seconds it spans (0 for sources
        crawled fewer than twice). With ``aware``, the seconds cut are left out and (unless
        not ``floors``) the floors raised to the censored maximum-likelihood rate's count."""
        size = self.history + 1
        rows = np.arange(self.sources)
        filled = np.array(self.filled, dtype=np.int64)
        following = np.array(self.next, dtype=np.int64)
        newest = np.array(self.newest, dtype=np.float64)
        # With a full ring the oldest entry is the one about to be overwritten; before that,
        # it is the first crawl (slot 0).
        oldest_slot = np.where(filled == size, following, 0)
        links = (self.counts.sum(axis=1) - self.counts[rows, oldest_slot]).astype(np.float64)
        span = newest - self.times[rows, oldest_slot]
        known = filled >= 2
        if aware:
            span = span - (self.cuts.sum(axis=1) - self.cuts[rows, oldest_slot])
            floored = self.floors.any(axis=1) & known
            if floors and floored.any():
                which = np.flatnonzero(floored)
                stale = which[np.isnan(self._censored[which])]
                if stale.size:
                    self._censored[stale] = self._censored_rate(stale)
                links[floored] = self._censored[which] * span[floored]
        return np.where(known, links, 0.0), np.where(known, span, 0.0)

    def shown(self, *, floors: bool = True) -> FloatArray:
        """How many links each source's hub shows, as far as its crawls tell: for a source
        one of whose crawls overflowed (with not ``floors``: overflowed with its links
        dated), the most new links any of its crawls found; else 0.

        A crawl that overflowed shows only new links, so its count is the number shown; but
        any crawl's new links were all shown at once, so no count exceeds it either. An
        overflow that found few (a listing reshuffled, its other links seen on another
        source first) would plan the hub as showing fewer, crawled more often than it needs
        and costing more than planned (docs/how-it-works.rst, "Planning for hubs that fill
        up"): the largest count is the best lower bound. Both are kept past the window of
        ``λ``: a hub planned as full is crawled before it fills, and its window soon holds
        no overflow, but it shows no more links for that."""
        full = np.array(self.full, dtype=np.int64)
        seen_full = full >= (_UNDATED if floors else _DATED)
        return np.where(seen_full, np.array(self.most_new, dtype=np.float64), 0.0)

    def _censored_rate(self, which: NDArray[np.intp]) -> FloatArray:
        """The censored rate of the windows of ``which``: each crawl's count and its covered
        seconds, in ring order from the oldest."""
        size = self.history + 1
        filled = np.array(self.filled, dtype=np.int64)[which]
        start = np.where(filled == size, np.array(self.next, dtype=np.int64)[which], 0)
        order = (start[:, None] + np.arange(size)) % size  # the oldest first
        taken = np.arange(size)[None, :] < filled[:, None]
        times = np.where(taken, np.take_along_axis(self.times[which], order, 1), np.nan)
        gaps = np.nan_to_num(np.diff(times, axis=1))  # each crawl's interval (0: unused)
        gaps -= np.take_along_axis(self.cuts[which], order, 1)[:, 1:]
        counts = np.take_along_axis(self.counts[which], order, 1)[:, 1:].astype(np.float64)
        floors = np.take_along_axis(self.floors[which], order, 1)[:, 1:] & (gaps > 0)
        return censored_rate(counts, np.maximum(gaps, 0.0), floors)

    def window_bounds(self) -> tuple[FloatArray, FloatArray]:
        """When each source's window starts and ends (NaN for sources crawled fewer than
        twice): the crawls :meth:`window` counts the links between."""
        size = self.history + 1
        rows = np.arange(self.sources)
        filled = np.array(self.filled, dtype=np.int64)
        oldest_slot = np.where(filled == size, np.array(self.next, dtype=np.int64), 0)
        known = filled >= 2
        oldest = np.where(known, self.times[rows, oldest_slot], np.nan)
        return oldest, np.where(known, np.array(self.newest, dtype=np.float64), np.nan)

    def long_run(self, *, aware: bool = False) -> tuple[FloatArray, FloatArray]:
        """New links and seconds over all crawls of each source, fading over ``memory``; with
        ``aware``, less the seconds cut (floors stay floors: the window raises them)."""
        span = np.array(self.long_span, np.float64)
        if aware:
            span = np.maximum(span - np.array(self.long_cut, np.float64), 0.0)
        return np.array(self.long_links, dtype=np.float64), span

    def link_rate(self, *, aware: bool = False) -> FloatArray:
        """``λ`` per source, links over span; NaN for sources crawled fewer than twice."""
        links, span = self.window(aware=aware)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(span > 0, links / span, np.nan)

    def to_dict(self) -> dict[str, Any]:
        """Plain lists and arrays, for persistence."""
        return self.captured()()

    def captured(self) -> Callable[[], dict[str, Any]]:
        """:meth:`to_dict` in two steps: copies taken now (cheap), the data handed out by the
        function returned, on any thread, later."""
        data = {
            "history": self.history,
            "memory": self.memory,
            "long_links": list(self.long_links),
            "long_span": list(self.long_span),
            "long_cut": list(self.long_cut),
            # Arrays, not a list per source: no object per source for the encoder to make.
            "times": self.times.copy(),
            "counts": self.counts.copy(),
            "cuts": self.cuts.copy(),
            "floors": self.floors.copy(),
            "filled": list(self.filled),
            "next": list(self.next),
            "most_new": list(self.most_new),
            "full": list(self.full),
        }
        return lambda: data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CrawlHistory:
        """From :meth:`to_dict`; ``ValueError``, ``KeyError`` or ``TypeError`` if the data is
        not one."""
        n = len(data["filled"])
        out = cls(n, history=int(data["history"]), memory=float(data["memory"]))
        if out.sources:
            out.long_links = [float(v) for v in data["long_links"]]
            out.long_span = [float(v) for v in data["long_span"]]
            out.long_cut = [float(v) for v in data["long_cut"]]
            times = np.array(data["times"], dtype=np.float64)  # None -> nan
            out.times = times
            out.counts = np.array(data["counts"], dtype=np.int64)
            out.cuts = np.array(data["cuts"], dtype=np.float64)
            out.floors = np.array(data["floors"], dtype=bool)
            out.filled = [int(v) for v in data["filled"]]
            out.next = [int(v) for v in data["next"]]
            out.most_new = [int(v) for v in data["most_new"]]
            out.full = [int(v) for v in data["full"]]
            size = out.history + 1
            last = [(slot - 1) % size for slot in out.next]
            out.newest = times[np.arange(n), last].tolist() if n else []
            lists = (out.long_links, out.long_span, out.long_cut, out.most_new, out.full)
            arrays = (times, out.cuts, out.floors)
            if any(len(v) != n for v in lists) or any(a.shape != (n, size) for a in arrays):
                raise ValueError("crawl history arrays of different lengths")
        return out


__all__ = ["CrawlHistory"]
