"""The ECHO model: pure numpy and standard library, no Scrapy, Twisted or Redis.

The simulator and the Scrapy scheduler run the same objects from here.
"""

from __future__ import annotations

from scrapy_echo.model.schedule import IntervalSolution
from scrapy_echo.model.solver import profit_rate, solve_intervals

__all__ = ["IntervalSolution", "profit_rate", "solve_intervals"]
