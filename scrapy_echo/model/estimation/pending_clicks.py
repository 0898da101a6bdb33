"""Clicks that came before their page was crawled (analytics see a page from the moment it
is published): kept, bounded, for up to a horizon, and handed over if the page is crawled in
time; otherwise dropped and counted."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any


class PendingClicks:
    """Click rows per page not crawled yet, oldest page first.

    Parameters
    ----------
    horizon : float
        How long a page's rows are kept, seconds (its latest row's time counts).
    most : int
        Most rows kept at once; the oldest page's are dropped first.
    """

    def __init__(self, horizon: float, most: int) -> None:
        self.horizon = float(horizon)
        self.most = int(most)
        self._rows: OrderedDict[Hashable, list[tuple[float, float]]] = OrderedDict()
        self.count = 0  # rows held
        self.dropped = 0  # rows never matched to a crawled page

    def hold(self, page: Hashable, ts: float, clicks: float) -> None:
        """Keep a row until ``page`` is crawled (:meth:`trim` enforces the bounds)."""
        self._rows.setdefault(page, []).append((ts, clicks))
        self.count += 1

    def release(self, page: Hashable) -> list[tuple[float, float]]:
        """The rows held for ``page``, now crawled (none if there are none)."""
        rows = self._rows.pop(page, None)
        if not rows:
            return []
        self.count -= len(rows)
        return rows

    def trim(self, now: float) -> None:
        """Drop rows too old at ``now`` or too many, oldest page first."""
        while self._rows and (
            self.count > self.most or next(iter(self._rows.values()))[-1][0] < now - self.horizon
        ):
            _, rows = self._rows.popitem(last=False)
            self.count -= len(rows)
            self.dropped += len(rows)

    def to_data(self) -> list[list[Any]]:
        """The rows as plain data, oldest page first (:meth:`load` reverses it)."""
        return [[page, [list(row) for row in rows]] for page, rows in self._rows.items()]

    def load(self, data: list[list[Any]]) -> None:
        """Hold the rows :meth:`to_data` gave (``ValueError``/``TypeError`` on others)."""
        for page, rows in data:
            self._rows[page] = [(float(ts), float(clicks)) for ts, clicks in rows]
        self.count = sum(len(rows) for rows in self._rows.values())
