"""New pages whose fetch failed, waiting to be tried again (docs/monitor.rst, "Pages whose
fetch fails").

A new page leaves the frontier when it is dispatched and its link stays seen: if its fetch
fails (a timeout, a DNS error, a 5xx or 404 from a CDN still propagating) and nothing puts it
back, it is never fetched. A failed page waits here for its back-off, ``ECHO_FAILURE_BACKOFF``
doubled per failure (at least what a 429's or 503's ``Retry-After`` asked, at most
``ECHO_FAILURE_BACKOFF_MAX``; while its source is failing too, until the source's next try:
a site that is down spends no budget on its pages), then goes back to its source's frontier
as it was; after ``ECHO_PAGE_MAX_TRIES`` failed fetches, or once its source is retired or
removed, it is given up, and counted.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from typing import Any

from scrapy_echo.core.pages import NewPage


class PageRetries:
    def __init__(self, *, backoff: float, backoff_max: float, max_tries: int) -> None:
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.max_tries = max_tries
        self.failures: dict[str, int] = {}  # page URL -> failed fetches so far
        self._waiting: list[tuple[float, int, NewPage]] = []  # (due, order, page): a heap
        self._order = itertools.count()
        self.given_up = 0  # pages given up since the crawl started (this process)

    def __len__(self) -> int:
        return len(self._waiting)

    def failed(
        self,
        page: NewPage,
        t: float,
        retry_after: float | None = None,
        *,
        not_before: float | None = None,
    ) -> bool:
        """``page``'s fetch failed at ``t``: it waits for its back-off, and at least until
        ``not_before`` (its source's next try while the source fails: a site that is down
        takes no budget with its pages), True; or, past its tries, it is given up (False)."""
        tries = self.failures.get(page.url, 0) + 1
        if tries >= self.max_tries:
            self.failures.pop(page.url, None)
            self.given_up += 1
            return False
        self.failures[page.url] = tries
        wait = min(self.backoff * 2 ** (tries - 1), self.backoff_max)
        if retry_after is not None and math.isfinite(retry_after):
            wait = min(max(wait, retry_after), self.backoff_max)
        due = t + wait if not_before is None else max(t + wait, not_before)
        heapq.heappush(self._waiting, (due, next(self._order), page))
        return True

    def give_up(self, page: NewPage) -> None:
        """``page`` will not be tried again (its source was retired or removed)."""
        self.failures.pop(page.url, None)
        self.given_up += 1

    def fetched(self, url: str) -> None:
        """``url`` was fetched: its failures are forgotten."""
        if self.failures:
            self.failures.pop(url, None)

    def due(self, now: float) -> list[NewPage]:
        """The pages whose back-off ended by ``now``, to wait in the frontier again."""
        out = []
        waiting = self._waiting
        while waiting and waiting[0][0] <= now:
            out.append(heapq.heappop(waiting)[2])
        return out

    # -- snapshots -------------------------------------------------------------------------
    def to_data(self) -> dict[str, Any]:
        waiting = sorted(self._waiting, key=lambda entry: entry[:2])
        return {
            "failures": [[url, tries] for url, tries in self.failures.items()],
            "waiting": [[due, page.source, page.to_data()] for due, _, page in waiting],
            "given_up": self.given_up,
        }

    def load_data(self, data: Any) -> None:
        """Take :meth:`to_data` back; ``ValueError`` if ``data`` is not one."""
        if not isinstance(data, dict):
            raise ValueError("page retries are not an object")
        failures = data.get("failures", [])
        waiting = data.get("waiting", [])
        if not isinstance(failures, Sequence) or not isinstance(waiting, Sequence):
            raise ValueError("page retries: failures and waiting must be lists")
        counts = {}
        for row in failures:
            if not (isinstance(row, Sequence) and len(row) == 2 and isinstance(row[0], str)
                    and type(row[1]) is int and row[1] > 0):  # fmt: skip
                raise ValueError(f"not a page's failures: {row!r:.80}")
            counts[row[0]] = row[1]
        entries = []
        for row in waiting:
            if not (isinstance(row, Sequence) and len(row) == 3 and type(row[1]) is int):
                raise ValueError(f"not a page waiting to be tried again: {row!r:.80}")
            due = row[0]
            if not (isinstance(due, int | float) and math.isfinite(due)):
                raise ValueError(f"not a time: {due!r:.80}")
            entries.append((float(due), next(self._order), NewPage.from_data(row[1], row[2])))
        given_up = data.get("given_up", 0)
        if type(given_up) is not int or given_up < 0:
            raise ValueError(f"not a count of pages given up: {given_up!r:.80}")
        heapq.heapify(entries)
        self.failures, self._waiting, self.given_up = counts, entries, given_up


__all__ = ["PageRetries"]
