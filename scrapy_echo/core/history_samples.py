"""How many of a crawl's history samples (one per re-solve, for reports) are kept.

Past the limit the samples are thinned to every other one, the newest kept, so a long crawl
keeps its whole span at a coarser grain.
"""

from __future__ import annotations

from typing import Any

HISTORY_LIMIT = 500
# Each sample holds a count per source: the samples are capped at this many numbers in all
# (40 MB): with a million sources, a few samples; with thousands, HISTORY_LIMIT.
HISTORY_CELLS = 5_000_000


def thinned(samples: list[dict[str, Any]], sources: int) -> list[dict[str, Any]]:
    """``samples`` (oldest first), thinned until they fit the limit for ``sources``."""
    limit = min(HISTORY_LIMIT, max(4, HISTORY_CELLS // max(1, sources)))
    while len(samples) > limit:
        samples = samples[::-2][::-1]  # every other one, the newest kept
    return samples
