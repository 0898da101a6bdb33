"""The Scrapy glue: the scheduler, the middlewares and the extension (and what they share:
the runtime, the settings, JOBDIR checkpoints, politeness). Thin: each turns what Scrapy
shows into the core's events and the core's decisions into requests (docs/architecture.rst).
Settings name them by their public paths (``scrapy_echo.scheduler.EchoScheduler``, ...)."""
