"""Signals ECHO sends through Scrapy's signal manager (``crawler.signals.connect``).

``page_found``
    A source showed a new page and its request was made: handlers get ``request`` (the page's
    request, before it is scheduled), ``source`` (the source's URL) and ``spider``. In
    distributed mode the planner (the worker holding its lease) sends it.
"""

page_found = object()

__all__ = ["page_found"]
