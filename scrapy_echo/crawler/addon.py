"""``ADDONS = {"scrapy_echo.Addon": 0}``: the one-line way to turn ECHO on."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)
_OURS = (
    "scrapy_echo.scheduler.EchoScheduler",
    "scrapy_echo.distributed.scheduler.DistributedScheduler",
)


class Addon:
    """Sets the ECHO scheduler (at ``"addon"`` priority, so a ``SCHEDULER`` in the project's
    settings still wins, with a warning unless it is an ECHO scheduler) and adds the
    middlewares and the extension unless the project already lists them (a project may set
    one to ``None`` to turn it off).

    With ``REDIS_URL`` set, the scheduler is the distributed one
    (``scrapy_echo.distributed.scheduler.DistributedScheduler``). Without, the dupefilter is
    ECHO's (``DUPEFILTER_CLASS``, at ``"addon"`` priority, so a project's own stands): the
    spider's own requests are remembered for ``ECHO_DUPEFILTER_TTL``, not for ever (in Redis,
    the shared ``done`` set does that).

    It also obeys robots.txt (``ROBOTSTXT_OBEY = True``, at ``"addon"`` priority) unless the
    settings say otherwise: Scrapy's own default is ``False`` (its project template writes
    ``True``), and a monitor that recrawls a site for as long as it runs should not ignore
    the site's robots.txt only because a project left the setting out. It logs which way
    the crawl runs, and why.

    The equivalent explicit settings::

        SCHEDULER = "scrapy_echo.scheduler.EchoScheduler"
        DUPEFILTER_CLASS = "scrapy_echo.dupefilter.EchoDupeFilter"
        DOWNLOADER_MIDDLEWARES = {"scrapy_echo.downloadermw.EchoDownloaderMiddleware": 60}
        SPIDER_MIDDLEWARES = {
            "scrapy_echo.spidermw.EchoSpiderMiddleware": 950,
            "scrapy_echo.spidermw.EchoLinkCollector": 10,
        }
        EXTENSIONS = {
            "scrapy_echo.extension.EchoExtension": 500,
            "scrapy_echo.metrics.EchoMetrics": 510,  # with ECHO_METRICS_PORT (metrics.rst)
        }
    """

    def update_settings(self, settings: BaseSettings) -> None:
        if not settings.getbool("ECHO_ENABLED", True):
            return  # a scheduler cannot be switched off later: leave Scrapy's in place
        from scrapy_echo.crawler.downloadermw import EchoDownloaderMiddleware
        from scrapy_echo.crawler.extension import EchoExtension
        from scrapy_echo.crawler.link_collector import ORDER, EchoLinkCollector
        from scrapy_echo.crawler.metrics import EchoMetrics
        from scrapy_echo.crawler.spidermw import EchoSpiderMiddleware

        scheduler = (
            "scrapy_echo.distributed.scheduler.DistributedScheduler"
            if settings.get("REDIS_URL")
            else "scrapy_echo.scheduler.EchoScheduler"
        )
        _warn_if_overridden(settings, scheduler)
        settings.set("SCHEDULER", scheduler, "addon")
        if not settings.get("REDIS_URL"):
            settings.set("DUPEFILTER_CLASS", "scrapy_echo.dupefilter.EchoDupeFilter", "addon")
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", EchoDownloaderMiddleware, 60
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", EchoSpiderMiddleware, 950
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", EchoLinkCollector, ORDER
        )
        settings.setdefault_in_component_priority_dict("EXTENSIONS", EchoExtension, 500)
        # (It serves nothing unless ECHO_METRICS_PORT is set.)
        settings.setdefault_in_component_priority_dict("EXTENSIONS", EchoMetrics, 510)
        _obey_robots_txt_by_default(settings)


def _obey_robots_txt_by_default(settings: BaseSettings) -> None:
    """``ROBOTSTXT_OBEY`` on, unless something above Scrapy's default set it (the project,
    the spider, ``-s``, or another add-on): their choice stands, either way."""
    from scrapy.settings import SETTINGS_PRIORITIES

    if (settings.getpriority("ROBOTSTXT_OBEY") or 0) > SETTINGS_PRIORITIES["default"]:
        obey = settings.getbool("ROBOTSTXT_OBEY")
        why = f"ROBOTSTXT_OBEY = {obey} in the settings"
    else:
        settings.set("ROBOTSTXT_OBEY", True, "addon")
        obey, why = True, "the ECHO add-on's default; set ROBOTSTXT_OBEY to choose"
    logger.info("ECHO crawl %s robots.txt (%s)", "obeys" if obey else "ignores", why)


def _warn_if_overridden(settings: BaseSettings, ours: str) -> None:
    """A project's own ``SCHEDULER`` outranks the add-on's: then ECHO orders nothing, which
    must not pass silently. An ECHO scheduler, or a subclass of one, is fine."""
    from scrapy.settings import SETTINGS_PRIORITIES
    from scrapy.utils.misc import load_object

    from scrapy_echo.crawler.scheduler import EchoScheduler

    if (settings.getpriority("SCHEDULER") or 0) <= SETTINGS_PRIORITIES["addon"]:
        return
    theirs = settings.get("SCHEDULER")
    try:
        cls = load_object(theirs) if isinstance(theirs, str) else theirs
        compatible = isinstance(cls, type) and issubclass(cls, EchoScheduler)
    except (ImportError, NameError, ValueError, AttributeError):
        compatible = False
    name = theirs if isinstance(theirs, str) else getattr(theirs, "__qualname__", repr(theirs))
    if not compatible and name not in _OURS:
        logger.warning(
            "SCHEDULER = %r in the project's settings overrides the ECHO add-on's scheduler "
            "(%s): ECHO will not choose what to crawl. Remove SCHEDULER from the settings, or "
            "set ECHO_ENABLED = False to turn ECHO off.",
            name,
            ours,
        )
