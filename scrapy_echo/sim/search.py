"""The search behind ``needed-rate``: the least crawl rate reaching a target."""

from __future__ import annotations

import math
from collections.abc import Callable


def needed_rate(
    fraction: Callable[[float], float],
    target: float,
    *,
    low: float,
    high: float,
    precision: float = 0.05,
) -> float:
    """The lowest rate in ``[low, high]`` whose fraction reaches ``target``, to ``precision``
    (relative), searching on a log scale: doubling up from ``low``, then bisecting. ``inf`` if
    even ``high`` falls short. Assumes more crawls never catch less, as the paper observes."""
    if fraction(low) >= target:
        return low
    below = low
    above = min(low * 2, high)
    while fraction(above) < target:
        if above >= high:
            return math.inf
        below, above = above, min(above * 2, high)
    while above / below > 1 + precision:
        middle = math.sqrt(below * above)
        if fraction(middle) >= target:
            above = middle
        else:
            below = middle
    return above
