"""Signals ECHO sends through Scrapy's signal manager (``crawler.signals.connect``).

``page_found``
    A source showed a new page and its request was made: handlers get ``request`` (the page's
    request, before it is scheduled), ``source`` (the source's URL) and ``spider``. In
    distributed mode the planner (the worker holding its lease) sends it.

``source_retired``
    A source failed ``ECHO_SOURCE_MAX_FAILURES`` times in a row and is no longer crawled:
    handlers get ``source`` (its URL), ``why`` (the last failure) and ``spider``. Sent once per
    retirement, where the crawl state is held (the planner in distributed mode).
"""

page_found = object()
source_retired = object()

__all__ = ["page_found", "source_retired"]
