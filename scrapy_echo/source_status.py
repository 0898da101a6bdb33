"""Per-source bookkeeping outside the model: validators, failures, counters, and whether
the source is retired or removed."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any


@dataclass
class SourceStatus:
    """Per-source bookkeeping outside the model: validators and failures."""

    url: str
    etag: str | None = None
    last_modified: str | None = None
    failures: int = 0  # in a row
    last_fetched: float = math.nan  # when its last crawl's response came (NaN: never)
    crawls: int = 0
    new_links: int = 0
    not_modified: int = 0
    retired: bool = False  # failed source_max_failures times in a row: no longer crawled
    removed: bool = False  # removed by the user: not crawled until added again
    robots_blocked: int = 0  # crawls robots.txt forbade (nothing sent, nothing charged)

    def summary(self) -> dict[str, Any]:
        """What ``scrapy echo-sources list`` and :meth:`EchoRuntime.sources` show."""
        return {
            "url": self.url,
            "status": "removed" if self.removed else "retired" if self.retired else "active",
            "crawls": self.crawls,
            "new_links": self.new_links,
            "failures": self.failures,
            "robots_blocked": self.robots_blocked,
        }


STATUS_FIELDS = tuple(f.name for f in fields(SourceStatus))
status_row = attrgetter(*STATUS_FIELDS)
"""A source's status as a tuple, :data:`STATUS_FIELDS` in order."""


__all__ = ["STATUS_FIELDS", "SourceStatus", "status_row"]
