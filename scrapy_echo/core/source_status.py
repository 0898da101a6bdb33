"""Per-source bookkeeping outside the model: validators, failures, counters, and whether
the source is retired or removed."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, Field, dataclass, fields
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
    # Sources listing sources from one the operator gave (0) to this one, by the shortest
    # way seen: a sitemap index's sitemaps are one deeper than it (ECHO_MAX_SOURCE_DEPTH).
    depth: int = 0
    next_pages: int = 0  # pages past a paginated hub's first read (ECHO_MAX_NEXT_PAGES)

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> SourceStatus:
        """A status from saved ``data`` (fields this build does not know are left out);
        ``ValueError`` naming a field of the wrong type: the crawl would trip over it later."""
        known = {name: value for name, value in data.items() if name in _TYPES}
        for name, value in known.items():
            allowed = _TYPES[name]
            if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
                raise ValueError(f"source field {name} is {value!r:.60}")
        return cls(**known)

    @property
    def state(self) -> str:
        """``"active"``, ``"retired"`` or ``"removed"``."""
        return "removed" if self.removed else "retired" if self.retired else "active"

    def summary(self) -> dict[str, Any]:
        """What ``scrapy echo-sources list`` and :meth:`EchoRuntime.sources` show."""
        return {
            "url": self.url,
            "status": self.state,
            "crawls": self.crawls,
            "new_links": self.new_links,
            "failures": self.failures,
            "robots_blocked": self.robots_blocked,
            "next_pages": self.next_pages,
        }


STATUS_FIELDS = tuple(f.name for f in fields(SourceStatus))
status_row = attrgetter(*STATUS_FIELDS)
"""A source's status as a tuple, :data:`STATUS_FIELDS` in order."""


def _allowed(field: Field[Any]) -> tuple[type, ...]:
    """The types a saved value of ``field`` may have, from its default."""
    if field.default is MISSING:
        return (str,)
    if field.default is None:
        return (str, type(None))
    return (int, float) if isinstance(field.default, float) else (type(field.default),)


_TYPES = {f.name: _allowed(f) for f in fields(SourceStatus)}


__all__ = ["STATUS_FIELDS", "SourceStatus", "status_row"]
