"""Pham et al.'s yield predictor: new links per crawl regressed on a source's recent yield, its
age and the clock (Pham, Santos and Freire, WSDM 2018, section 4.2), one candidate ``λ`` of
:mod:`scrapy_echo.model.estimation.predictive`.

Each crawl of a source (its first two excepted: the first found what was there, the second
has no yield behind its average) is one training example: the new links it found, against the
features the source had just before it,

- ``avg`` and ``std``: the mean and standard deviation of the new links of its crawls in the
  last :data:`WINDOW` seconds (the paper's ``w = 168`` hours);
- ``age``: the seconds since its previous crawl;
- ``tod``, ``dow``: the hour of the day and the day of the week (UTC), one-hot;
- ``aa = avg · age``: the paper's "greedy reinforcement" term;

35 numbers with an intercept. The paper fits a straight line (its REG: trees and polynomials
gained nothing there) and only ranks by it; a rate must be positive, so here the counts and the
age are logged and the fit is a Poisson regression (log link), on the examples of the last
:data:`WINDOW` seconds, redone every :data:`RETRAIN_EVERY` seconds (the paper: every 3 hours).
For the plan it is a rate: each source's predicted new links at the age it is typically crawled
at (its recent mean interval), over that age (docs/how-it-works.rst, "Estimators that earn
their place"). Each guard below answers a failure seen on the real traces.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray

WINDOW = 168 * 3600.0
RETRAIN_EVERY = 3 * 3600.0
MAX_EXAMPLES = 50_000  # the most recent kept: ample for 36 coefficients, small to save
MIN_EXAMPLES = 3_600  # fewer, and no fit: 100 a coefficient (counts this overdispersed need many)
_RAW = 5  # per example: avg, std, age, hour, weekday (one-hot expanded when fitting)
_RIDGE = 1e-4  # per example: keeps the one-hot blocks' collinearity with the intercept harmless
_IRLS_STEPS = 12
_IRLS_WARM_STEPS = 4  # from the last fit, three hours of examples older
_HOURS = slice(5, 29)  # the columns of the hour-of-day and day-of-week one-hots
_DAYS = slice(29, 36)
_MAX_LOG = 30.0  # log-rates clipped here: no overflow from a wild extrapolation


class YieldPredictor:
    """Online training data and a log-linear fit of new links per crawl.

    Examples
    --------
    >>> p = YieldPredictor()
    >>> for hour in range(400):  # even sources yield 6 links an hour, odd ones one
    ...     for source in range(30):
    ...         p.observe(source, hour * 3600.0, 6 if source % 2 == 0 else 1)
    >>> rates = p.rates(400 * 3600.0)
    >>> [round(float(r) * 3600, 1) for r in rates[:2]]
    [6.0, 1.0]
    """

    def __init__(self) -> None:
        # Per source, its crawls in the window: (time, new links); and their running sums.
        self._crawls: list[deque[tuple[float, int]]] = []
        self._sums: list[list[float]] = []  # [count, sum, sum of squares]
        self._last: list[float] = []  # previous crawl's time (NaN: none)
        # Each source's window as a tuple, as of the last capture, and the sources whose
        # window changed since: a capture on the reactor copies only those (100 k windows
        # copied whole held it 90 ms and more).
        self._frozen: list[tuple[tuple[float, int], ...]] = []
        self._changed: set[int] = set()
        self._raw = np.zeros((MAX_EXAMPLES, _RAW))
        self._label = np.zeros(MAX_EXAMPLES)
        self._stamp = np.full(MAX_EXAMPLES, -math.inf)
        self._next = 0  # ring slot of the next example
        self.examples = 0  # examples ever recorded
        self.coef: FloatArray | None = None
        self.seen = (np.zeros(3), np.zeros(3))  # the least and most avg, std, age it saw
        self.trained_at = -math.inf

    def _grow(self, sources: int) -> None:
        while len(self._crawls) < sources:
            self._crawls.append(deque())
            self._frozen.append(())
            self._sums.append([0.0, 0.0, 0.0])
            self._last.append(math.nan)

    def _features(self, source: int, time: float) -> tuple[float, float, float]:
        """``avg, std, age`` of ``source`` at ``time``, its window first trimmed to it."""
        crawls, sums = self._crawls[source], self._sums[source]
        while crawls and crawls[0][0] < time - WINDOW:
            _, old = crawls.popleft()
            self._changed.add(source)
            sums[0] -= 1
            sums[1] -= old
            sums[2] -= old * old
        n = sums[0]
        avg = sums[1] / n if n > 0 else 0.0
        std = math.sqrt(max(sums[2] / n - avg * avg, 0.0)) if n > 0 else 0.0
        return avg, std, time - self._last[source]

    def observe(self, source: int, time: float, new_links: int) -> None:
        """A crawl of ``source`` at ``time`` found ``new_links`` new links (on its first crawl
        the links are what was there, not new: it only starts the source's clock)."""
        self._grow(source + 1)
        if not math.isnan(self._last[source]):
            avg, std, age = self._features(source, time)
            # An example only with a yield behind its average: "no crawl counted yet" is not
            # "found nothing" (taken as one, it raised the fit's quiet sources by half).
            if self._crawls[source]:
                slot = self._next
                self._raw[slot] = (avg, std, age, _hour(time), _weekday(time))
                self._label[slot], self._stamp[slot] = new_links, time
                self._next = (slot + 1) % MAX_EXAMPLES
                self.examples += 1
            self._crawls[source].append((time, new_links))
            self._changed.add(source)
            sums = self._sums[source]
            sums[0] += 1
            sums[1] += new_links
            sums[2] += new_links * new_links
        self._last[source] = time

    def train(self, now: float) -> bool:
        """Refit on the examples of the last :data:`WINDOW` seconds, if :data:`RETRAIN_EVERY`
        has passed since the last fit; whether a fit is in use."""
        if now - self.trained_at < RETRAIN_EVERY:
            return self.coef is not None
        keep = self._stamp >= now - WINDOW
        stamps = self._stamp[keep]
        # Not before a day of examples (the seed bootstraps its first 10 hours otherwise).
        if int(keep.sum()) >= MIN_EXAMPLES and stamps.max() - stamps.min() >= 86400.0:
            raw = self._raw[keep]
            x, y = _design(raw), self._label[keep]
            # The clock's one-hots only once every level has had its share of the examples
            # (hours: two days; weekdays: a full window). Before that a level stands for the
            # stretch of crawl it happened to fall on: the first day's low yields made the
            # first hour of the second day's weekday predict e^{6.8} times more links.
            days = (stamps.max() - stamps.min()) / 86400.0
            used = np.ones(x.shape[1], dtype=bool)
            used[_HOURS] = days >= 2.0
            used[_DAYS] = days >= WINDOW / 86400.0 - 0.25
            start = None if self.coef is None else self.coef[used]
            self.coef = np.zeros(x.shape[1])
            self.coef[used] = _poisson_fit(x[:, used], y, start)
            # What the fit saw of avg, std and age: predictions stay inside it, since a
            # log-linear fit extrapolated to ten times the ages it saw runs away.
            self.seen = (raw[:, :3].min(axis=0), raw[:, :3].max(axis=0))
            self.trained_at = now
        return self.coef is not None

    def rates(self, now: float, spans: FloatArray | None = None) -> FloatArray | None:
        """Each source's predicted new links per second at ``now`` (``None`` before a fit):
        its predicted links at age ``spans`` (default: its mean interval in the window) over
        that age; NaN for a source with fewer than two counted crawls in the window (its first
        crawl ever is not counted: it found what was there; and links predicted at an age
        near 0 are no rate, only the fit's intercept over a few seconds)."""
        if not self.train(now):
            return None
        n = len(self._crawls)
        raw = np.zeros((n, _RAW))
        known = np.zeros(n, dtype=bool)
        for source in range(n):
            crawls = self._crawls[source]
            if len(crawls) < 2:
                continue
            avg, std, _ = self._features(source, now)
            if len(crawls) < 2:  # (its crawls left the window just now)
                continue
            typical = (crawls[-1][0] - crawls[0][0]) / (len(crawls) - 1)
            age = spans[source] if spans is not None else typical
            if not age > 0:
                continue
            raw[source] = (avg, std, age, _hour(now), _weekday(now))
            known[source] = True
        raw[:, :3] = np.clip(raw[:, :3], *self.seen)
        assert self.coef is not None
        predicted = np.exp(np.minimum(_design(raw) @ self.coef, _MAX_LOG))
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(known, predicted / np.where(known, raw[:, 2], 1.0), np.nan)

    def to_data(self) -> dict[str, Any]:
        return self.captured()()

    def captured(self) -> Callable[[], dict[str, Any]]:
        """:meth:`to_data` in two steps, as the learner saves: copies now, plain lists later
        on any thread (the lists of 50,000 examples are the slow part)."""
        # Examples oldest first, so that a restored ring overwrites the oldest first too.
        order = np.roll(np.arange(MAX_EXAMPLES), -self._next)
        order = order[self._stamp[order] > -math.inf]
        raw, label, stamp = self._raw[order], self._label[order], self._stamp[order]
        for source in self._changed:
            self._frozen[source] = tuple(self._crawls[source])
        self._changed.clear()
        crawls = list(self._frozen)  # (tuples: no one changes them)
        coef = None if self.coef is None else self.coef.tolist()
        fixed = {
            "last": list(self._last),
            "examples": self.examples,
            "coef": coef,
            "seen": [self.seen[0].tolist(), self.seen[1].tolist()],
            "trained_at": self.trained_at,
        }
        return lambda: {
            **fixed,
            "crawls": [[list(c) for c in window] for window in crawls],
            "raw": raw.tolist(),
            "label": label.tolist(),
            "stamp": stamp.tolist(),
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> YieldPredictor:
        out = cls()
        out._grow(len(data["crawls"]))
        for source, crawls in enumerate(data["crawls"]):
            for time, links in crawls:
                out._crawls[source].append((float(time), int(links)))
                out._sums[source][0] += 1
                out._sums[source][1] += links
                out._sums[source][2] += links * links
        out._frozen = [tuple(crawls) for crawls in out._crawls]
        out._last = [float(t) for t in data["last"]]
        if len(out._last) != len(out._crawls):
            raise ValueError("yield predictor: crawls and last crawl times of different lengths")
        raw = np.asarray(data["raw"], dtype=np.float64).reshape(-1, _RAW)
        rows = raw.shape[0]
        if rows > MAX_EXAMPLES or len(data["label"]) != rows or len(data["stamp"]) != rows:
            raise ValueError("yield predictor: examples of inconsistent lengths")
        out._raw[:rows], out._label[:rows] = raw, data["label"]
        out._stamp[:rows] = data["stamp"]
        out._next = rows % MAX_EXAMPLES
        out.examples = int(data["examples"])
        coef = data["coef"]
        out.coef = None if coef is None else np.asarray(coef, dtype=np.float64)
        if out.coef is not None and out.coef.shape != (_design(np.zeros((1, _RAW))).shape[1],):
            raise ValueError("yield predictor: coefficients of another shape")
        low, high = (np.asarray(v, dtype=np.float64).reshape(3) for v in data["seen"])
        out.seen = (low, high)
        out.trained_at = float(data["trained_at"])
        return out


def _hour(time: float) -> int:
    return int(time // 3600.0) % 24


def _weekday(time: float) -> int:
    # The Unix epoch fell on a Thursday (Monday = 0, as the paper counts).
    return (int(time // 86400.0) + 3) % 7


def _design(raw: FloatArray) -> FloatArray:
    """The seed's 35 features and an intercept, from ``avg, std, age, hour, weekday``: the
    counts and the age (in hours) logged, as a log-linear model takes them."""
    avg, std, hours_old = raw[:, 0], raw[:, 1], np.maximum(raw[:, 2] / 3600.0, 1e-3)
    hours = np.eye(24)[raw[:, 3].astype(np.intp)]
    days = np.eye(7)[raw[:, 4].astype(np.intp)]
    logged = np.log1p(np.column_stack([avg, std, avg * hours_old]))
    ones = np.ones((raw.shape[0], 1))
    return np.hstack([ones, logged, np.log(hours_old)[:, None], hours, days])


def _poisson_fit(x: FloatArray, y: FloatArray, start: FloatArray | None = None) -> FloatArray:
    """Coefficients of ``log E[y] = x β`` by iteratively reweighted least squares, a small
    ridge keeping the one-hot blocks (collinear with the intercept) and rare hours in hand;
    from ``start`` (the last fit: a few steps then suffice) or from the mean."""
    if start is not None and np.all(np.isfinite(start)) and np.any(start != 0):
        beta, steps = start.copy(), _IRLS_WARM_STEPS
    else:
        beta, steps = np.zeros(x.shape[1]), _IRLS_STEPS
        beta[0] = math.log(max(float(y.mean()), 1e-6))
    ridge = _RIDGE * x.shape[0] * np.eye(x.shape[1])
    ridge[0, 0] = 0.0
    for _ in range(steps):
        eta = np.clip(x @ beta, -_MAX_LOG, _MAX_LOG)
        mean = np.exp(eta)
        z = eta + (y - mean) / mean
        weighted = x * mean[:, None]
        beta = np.linalg.solve(x.T @ weighted + ridge, weighted.T @ z)
    return beta


__all__ = ["MAX_EXAMPLES", "RETRAIN_EVERY", "WINDOW", "YieldPredictor"]
