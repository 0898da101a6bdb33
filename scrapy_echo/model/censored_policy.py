"""ECHO-newpages planning with censoring-aware rates: the experimental policy ``echo-censored``
(docs/how-it-works.rst, "Hubs that show only their latest links"; docs/benchmarks.rst has why
it is not the default)."""

from __future__ import annotations

from typing import ClassVar

from scrapy_echo.model.echo_newpages import EchoNewPages


class EchoCensored(EchoNewPages):
    """ECHO-newpages whose ``λ`` counts a crawl of a hub that overflowed for what it is: a
    count over the time since its oldest dated link, or a floor (experimental: the truer rate
    overvalues a hub the plan will not crawl before it fills)."""

    name = "echo-censored"
    censoring_aware: ClassVar[bool] = True


__all__ = ["EchoCensored"]
