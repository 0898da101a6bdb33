"""Where a crawler's clicks go in: rows from the click feed files and from other code
(:func:`scrapy_echo.push_clicks`), checked, sent on to the planner in Redis mode, else folded
into the learner by the core; everything counted (``echo/clickfeed/...``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from scrapy_echo.core.events import ClicksArrived
from scrapy_echo.inputs.clickfeed import (
    ClickFeedReader,
    ClickRow,
    check_not_ahead,
    check_not_past,
    parse_click,
)
from scrapy_echo.inputs.feed_reader import InvalidClickRow
from scrapy_echo.inputs.intake import Intake, IntakeHost


class ClickIntake(Intake[ClickRow]):
    """Click rows in; ``clean`` cleans a row's URL as the crawl cleans links, so tracking
    parameters and the user's normaliser give the page the same key."""

    kind = "click"
    columns = ClickFeedReader.columns  # (a pushed row has a feed row's fields)

    def __init__(self, runtime: IntakeHost, clean: Callable[[str], str]) -> None:
        super().__init__(runtime)
        self._clean = clean

    def parse(self, row: Mapping[str, Any]) -> ClickRow:
        return parse_click(row.get("url"), row.get("ts"), row.get("clicks"))

    def add(self, rows: Iterable[ClickRow], *, relay: bool = False) -> int:
        """Checked rows: to the planner in Redis mode, else to the learner. A row stamped more
        than a day after this crawl's clock is refused and counted here
        (:func:`~scrapy_echo.inputs.clickfeed.check_not_ahead`), or older than the click horizon
        (:func:`~scrapy_echo.inputs.clickfeed.check_not_past`). Returns the rows taken."""
        runtime = self.runtime
        now = runtime.clock()
        rows = [row for row in rows if self._in_reach(row, now)]
        if not rows:
            return 0
        if (relay or not runtime.holds_state) and runtime.transport is not None:
            runtime.transport(ClicksArrived(tuple([r.url, r.ts, r.clicks] for r in rows)))
            return len(rows)
        matched = runtime.core.add_clicks(
            [self._clean_url(row.url) for row in rows],
            [row.ts for row in rows],
            [row.clicks for row in rows],
        )
        self._count("rows", len(rows))
        self._count("matched_rows", matched)
        self._count("unmatched_rows", len(rows) - matched)
        return len(rows)

    def read_files(self) -> int:
        """As :meth:`Intake.read_files`; only the planner reads the feed files in distributed
        mode (the others return 0)."""
        return super().read_files() if self.runtime.holds_state else 0

    def _in_reach(self, row: ClickRow, now: float) -> bool:
        """Whether ``row``'s time is within the crawl's reach: not a day ahead of its clock,
        nor older than the click horizon (each refused and counted by kind)."""
        config = self.runtime.core.config
        try:
            check_not_ahead(row.ts, now)
            check_not_past(row.ts, now, config.click_bins * config.click_bin)
        except InvalidClickRow as exc:
            self.count_invalid(exc.kind, f"{row.url}: {exc}")
            return False
        return True

    def _clean_url(self, url: str) -> str:
        try:
            return self._clean(url)
        except ValueError:  # checked as a click row already: keep its canonical form
            return url


__all__ = ["ClickIntake"]
