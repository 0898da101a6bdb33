"""The ECHO model: pure numpy and standard library, no Scrapy, Twisted or Redis.

The simulator and the Scrapy scheduler run the same objects from here, in four parts:
``intervals`` (the interval problem and its solver), ``estimation`` (what the crawl learns of
each source), ``decisions`` (the policies and the frontier they choose from) and ``refetch``
(pages that change after they appear); ``metric`` is the paper's quality metric and
``temporal_sites`` ranks sites from page views (``birth_lag`` fits the pages alive when the
log starts, ``site_tuning`` tunes the thresholds and weights from labelled pages).
"""

from __future__ import annotations

from scrapy_echo.model.intervals.schedule import IntervalSolution
from scrapy_echo.model.intervals.solver import profit_rate, solve_intervals

__all__ = ["IntervalSolution", "profit_rate", "solve_intervals"]
