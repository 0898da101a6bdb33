"""The simulator: replays a trace of new links and clicks against the crawl policies.

``python -m scrapy_echo.sim --help`` lists the commands; docs/simulator.rst explains them.
"""
