"""The scrapy_echo demo project: a simulated news site, ECHO and a stock-Scrapy baseline."""
