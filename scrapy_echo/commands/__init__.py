"""Scrapy commands (registered as ``scrapy.commands`` entry points): ``echo-report`` and
``echo-discover``."""
