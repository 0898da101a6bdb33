"""``ADDONS = {"scrapy_echo.Addon": 0}``: the one-line way to turn ECHO on."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


class Addon:
    """Sets the ECHO scheduler (at ``"addon"`` priority, so a ``SCHEDULER`` in the project's
    settings still wins) and adds the middlewares and the extension unless the project
    already lists them (a project may set one to ``None`` to turn it off).

    With ``REDIS_URL`` set, the scheduler is the distributed one
    (``scrapy_echo.distributed.scheduler.DistributedScheduler``).

    The equivalent explicit settings::

        SCHEDULER = "scrapy_echo.scheduler.EchoScheduler"
        DOWNLOADER_MIDDLEWARES = {"scrapy_echo.downloadermw.EchoDownloaderMiddleware": 60}
        SPIDER_MIDDLEWARES = {"scrapy_echo.spidermw.EchoSpiderMiddleware": 950}
        EXTENSIONS = {"scrapy_echo.extension.EchoExtension": 500}
    """

    def update_settings(self, settings: BaseSettings) -> None:
        if not settings.getbool("ECHO_ENABLED", True):
            return  # a scheduler cannot be switched off later: leave Scrapy's in place
        from scrapy_echo.downloadermw import EchoDownloaderMiddleware
        from scrapy_echo.extension import EchoExtension
        from scrapy_echo.spidermw import EchoSpiderMiddleware

        scheduler = (
            "scrapy_echo.distributed.scheduler.DistributedScheduler"
            if settings.get("REDIS_URL")
            else "scrapy_echo.scheduler.EchoScheduler"
        )
        settings.set("SCHEDULER", scheduler, "addon")
        settings.setdefault_in_component_priority_dict(
            "DOWNLOADER_MIDDLEWARES", EchoDownloaderMiddleware, 60
        )
        settings.setdefault_in_component_priority_dict(
            "SPIDER_MIDDLEWARES", EchoSpiderMiddleware, 950
        )
        settings.setdefault_in_component_priority_dict("EXTENSIONS", EchoExtension, 500)
