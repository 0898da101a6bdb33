"""How fresh the copies of crawled pages were when people used them: the refresh lane's
figure (docs/how-it-works.rst, "Refreshing pages that change").

A copy fetched at ``f`` is fresh at ``t`` if the page had no update (``updates.csv``) in
``(f, t]``. Each click after warm-up on a crawled page counts for its copy then: fresh or
stale, weighted by its clicks. Pages that never change are always fresh; the share over the
pages that do change is the one a refresh lane moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.sim.engine import Replay
from scrapy_echo.sim.trace import Trace


@dataclass(frozen=True)
class Freshness:
    """Shares of clicks on crawled pages that found their copy fresh."""

    all_pages: float
    changing_pages: float  # of clicks on pages with at least one update in the trace
    refetches: int

    def text(self) -> str:
        return (
            f"fresh copies: {self.all_pages:.2%} of clicks on crawled pages, "
            f"{self.changing_pages:.2%} on pages that change; {self.refetches} refetches"
        )


def freshness(trace: Trace, replay: Replay) -> Freshness:
    """The shares of clicks after warm-up on pages crawled by then whose copy was fresh."""
    scale = 4.0 * (trace.duration + 8 * 86400.0)  # page keys: page × scale + time
    first = np.flatnonzero(np.isfinite(replay.crawled))
    again = np.array(replay.refetches, dtype=np.float64).reshape(-1, 2)
    fetch_page = np.concatenate([first, again[:, 0].astype(np.intp)])
    fetch_key = np.sort(fetch_page * scale + np.concatenate([replay.crawled[first], again[:, 1]]))
    update_key = np.sort(trace.update_page * scale + trace.update_ts)

    page, ts, count = trace.click_page, trace.click_ts, trace.click_count
    keep = (ts >= trace.warmup) & (replay.crawled[page] <= ts)  # (NaN: never crawled)
    page, ts, count = page[keep], ts[keep], count[keep]
    key = page * scale + ts
    fetched = fetch_key[np.searchsorted(fetch_key, key, side="right") - 1]  # ≥ the first crawl
    fresh = _version(update_key, key) == _version(update_key, fetched)
    changing = np.isin(page, trace.update_page)
    total, on_changing = count.sum(), count[changing].sum()
    return Freshness(
        float(count[fresh].sum() / total) if total else 1.0,
        float(count[fresh & changing].sum() / on_changing) if on_changing else 1.0,
        len(replay.refetches),
    )


def _version(update_key: FloatArray, key: FloatArray) -> FloatArray:
    """Updates up to each key (a page's count, up to an offset all its keys share)."""
    return np.asarray(np.searchsorted(update_key, key, side="right"), dtype=np.float64)


__all__ = ["Freshness", "freshness"]
