"""When sources publish: a pooled intensity by hour of the week (Pham et al.'s time-of-day and
day-of-week features), learned from what crawls find (docs/how-it-works.rst, "Daily and weekly
cycles").

Source ``i`` publishes at rate ``λ_i m(t)``: its own level ``λ_i`` times an intensity ``m``
shared by all sources, one value per hour of the week, averaging 1 over the week. A crawl
interval ``(a, b]`` that found ``n`` new links expects ``λ_i ∫_a^b m``. Each re-solve folds in
the intervals since the last one and runs EM: links are shared among the hours their interval
spans in proportion to ``m``, exposure is ``λ_i`` times the seconds spent in each hour, and
``m`` is links over exposure, shrunk toward 1 (a flat week) and fading over ``memory`` so that
it follows a change of habits.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray

HOUR = 3600.0
BINS = 168  # hours of the week
WEEK = BINS * HOUR
# Prior weight of a flat week, in links per hour of the week: an hour's intensity moves off 1
# only once a few dozen links have been seen in it.
PRIOR_LINKS = 20.0
# Intervals waiting for the next fit, at most (half the oldest are dropped past it).
MAX_PENDING = 200_000


class WeekProfile:
    """The pooled intensity ``m`` by hour of the week (:attr:`level`, mean 1).

    Intervals are kept as a table by the hour of the week they start in and their length in
    whole hours (at most a week): links, and exposure per hour they cover. EM runs over the
    table at each fit, so long intervals, which smear a cycle, are resolved as far as the
    short ones allow, and the cost does not grow with the crawl."""

    def __init__(self, *, memory: float = 21 * 86400.0, iterations: int = 20) -> None:
        if not (math.isfinite(memory) and memory > 0):
            raise ValueError(f"memory must be a finite number of seconds > 0, got {memory!r}")
        self.memory = memory
        self.iterations = iterations
        self.level = np.ones(BINS)
        self._links = np.zeros((BINS, BINS))  # [start hour, length in hours - 1], fading
        self._exposure = np.zeros((BINS, BINS))  # λ-weighted seconds per hour covered, fading
        self._fitted_at = math.nan
        self._pending: list[tuple[int, float, float, int]] = []  # source, a, b, new links
        self.fitted = False  # any interval folded in yet
        self.enabled = False  # set by the driver when its policy reads the profile

    def observe(self, source: int, start: float, end: float, new_links: int) -> None:
        """A crawl of ``source`` at ``end`` found ``new_links`` new links that appeared since
        its crawl at ``start`` (kept only while :attr:`enabled`)."""
        if self.enabled and end > start:
            if len(self._pending) >= MAX_PENDING:
                del self._pending[: MAX_PENDING // 2]
            self._pending.append((source, start, end, new_links))

    def fit(self, now: float, rates: FloatArray) -> None:
        """Fold in the intervals observed since the last fit and re-estimate ``m``; ``rates``
        is each source's level ``λ_i`` as last estimated (a source without one adds links
        but no exposure)."""
        if not math.isnan(self._fitted_at):
            fade = math.exp(-max(now - self._fitted_at, 0.0) / self.memory)
            self._links *= fade
            self._exposure *= fade
        self._fitted_at = now
        rows, self._pending = self._pending, []
        self.fitted = self.fitted or bool(rows)
        if rows:
            self._fold(rows, rates)
        exposure = _covering_sums(self._exposure)
        total_links, total_exposure = self._links.sum(), exposure.sum()
        if total_links <= 0 or total_exposure <= 0:
            return
        overall = total_links / total_exposure
        level = self.level
        for _ in range(self.iterations):
            # E: each cell's links shared among the hours it covers, in proportion to m.
            covered = _window_sums(level)  # [start, length - 1]
            ratio = np.divide(self._links, covered, out=np.zeros_like(covered), where=covered > 0)
            attributed = level * _covering_sums(ratio)
            # M: links over exposure per hour, shrunk toward a flat week (PRIOR_LINKS per
            # hour at the overall rate).
            level = (attributed + PRIOR_LINKS) / (exposure * overall + PRIOR_LINKS)
            level = level / level.mean()
        self.level = level

    def _fold(self, rows: list[tuple[int, float, float, int]], rates: FloatArray) -> None:
        source = np.array([r[0] for r in rows], dtype=np.intp)
        start = np.array([r[1] for r in rows])
        span = np.array([r[2] for r in rows]) - start
        links = np.array([r[3] for r in rows], dtype=np.float64)
        first = ((start % WEEK) // HOUR).astype(np.intp) % BINS
        hours = np.clip(np.rint(span / HOUR).astype(np.intp), 1, BINS)
        rate = np.zeros(len(rows))
        known = source < rates.size
        rate[known] = np.nan_to_num(rates[source[known]], nan=0.0, posinf=0.0)
        np.add.at(self._links, (first, hours - 1), links)
        np.add.at(self._exposure, (first, hours - 1), rate * span / hours)

    def to_data(self) -> dict[str, Any]:
        """What was learned, as plain data (for snapshots); :attr:`enabled` is the driver's."""
        return {
            "memory": self.memory,
            "iterations": self.iterations,
            "level": self.level.copy(),
            # (None until an interval is folded in: two tables of zeros need not be saved.)
            "links": self._links.copy() if self.fitted else None,
            "exposure": self._exposure.copy() if self.fitted else None,
            "fitted_at": self._fitted_at,
            "pending": [list(row) for row in self._pending],
            "fitted": self.fitted,
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> WeekProfile:
        """From :meth:`to_data`; ``ValueError`` or ``TypeError`` if the data is not one."""
        out = cls(memory=float(data["memory"]), iterations=int(data["iterations"]))
        tables: dict[str, Any] = {}
        for name, shape in (
            ("level", (BINS,)),
            ("links", (BINS, BINS)),
            ("exposure", (BINS, BINS)),
        ):
            saved = data[name]
            table = np.zeros(shape) if saved is None else np.asarray(saved, dtype=np.float64)
            if table.shape != shape or not np.isfinite(table).all():
                raise ValueError(f"week profile {name} of shape {table.shape}, not {shape}")
            tables[name] = table.copy()
        out.level, out._links, out._exposure = tables["level"], tables["links"], tables["exposure"]
        out._fitted_at = float(data["fitted_at"])
        out._pending = [
            (int(source), float(start), float(end), int(links))
            for source, start, end, links in data["pending"]
        ][-MAX_PENDING:]
        out.fitted = bool(data["fitted"])
        return out

    def mean_between(self, start: FloatArray, end: FloatArray) -> FloatArray:
        """The mean of ``m`` over each ``(start, end]`` (1 where it is empty)."""
        start, end = np.asarray(start, dtype=np.float64), np.asarray(end, dtype=np.float64)
        span = end - start
        total = self.cumulative(end) - self.cumulative(start)
        return np.asarray(np.where(span > 0, total / np.where(span > 0, span, 1.0), 1.0))

    def cumulative(self, t: FloatArray) -> FloatArray:
        """``∫_0^t m``, in seconds (a week of it is a week: ``m`` averages 1)."""
        t = np.asarray(t, dtype=np.float64)
        weeks, into = np.divmod(t, WEEK)
        before = np.concatenate([[0.0], np.cumsum(self.level) * HOUR])
        hour = np.minimum((into // HOUR).astype(np.intp), BINS - 1)
        return np.asarray(weeks * WEEK + before[hour] + self.level[hour] * (into - hour * HOUR))


_LENGTHS = np.arange(1, BINS + 1)


def _window_sums(level: FloatArray) -> FloatArray:
    """``[s, L - 1]``: the sum of ``level`` over the ``L`` hours from ``s``, around the week."""
    total = np.concatenate([[0.0], np.cumsum(np.concatenate([level, level]))])
    starts = np.arange(BINS)[:, None]
    return np.asarray(total[starts + _LENGTHS[None, :]] - total[starts])


def _covering_sums(table: FloatArray) -> FloatArray:
    """Per hour ``h``: the sum of ``table[s, L - 1]`` over the cells with ``h`` among the
    ``L`` hours from ``s`` (``s`` in ``(h - L, h]``, around the week)."""
    doubled = np.concatenate([table, table])  # [s and s + BINS, L - 1]
    total = np.concatenate([np.zeros((1, BINS)), np.cumsum(doubled, axis=0)])
    hours = np.arange(BINS)[:, None] + BINS  # h, as a row of the doubled table
    columns = np.arange(BINS)[None, :]
    covering = total[hours + 1, columns] - total[hours + 1 - _LENGTHS[None, :], columns]
    return np.asarray(covering.sum(axis=1))


def rate_factor(profile: WeekProfile, oldest: FloatArray, newest: FloatArray) -> FloatArray:
    """What turns each source's ``λ`` (new links over its window ``(oldest, newest]``) into
    its weekly average: 1 over ``m`` over the window (1 where there is no window: that rate is
    a long-run one, averaged over the week already)."""
    known = np.isfinite(oldest) & np.isfinite(newest) & (newest > oldest)
    window = np.ones(oldest.size)
    if known.any():
        window[known] = profile.mean_between(oldest[known], newest[known])
    return 1.0 / np.maximum(window, 1e-12)


def fitted_rate_factor(
    profile: WeekProfile,
    now: float,
    links: FloatArray,
    span: FloatArray,
    oldest: FloatArray,
    newest: FloatArray,
) -> FloatArray:
    """:func:`rate_factor` after fitting ``profile`` at ``now`` to the sources' long-run
    rates (``links`` over ``span`` seconds each; ``oldest``, ``newest``: each one's window,
    as :class:`~scrapy_echo.model.estimation.crawl_history.CrawlHistory` keeps them)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = np.where(span > 0, links / span, 0.0)
    profile.fit(now, rates)
    return rate_factor(profile, oldest, newest)


__all__ = ["BINS", "HOUR", "WEEK", "WeekProfile", "fitted_rate_factor", "rate_factor"]
