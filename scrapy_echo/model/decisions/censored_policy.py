"""ECHO-newpages without its model of full hubs: the experimental policy ``echo-censored``
(docs/how-it-works.rst, "Hubs that show only their latest links"; docs/benchmarks.rst has what
the full-hub model adds)."""

from __future__ import annotations

from typing import ClassVar

from scrapy_echo.model.decisions.echo_newpages import EchoNewPages


class EchoCensored(EchoNewPages):
    """ECHO-newpages planning every hub as if it showed every link, at the censoring-aware
    ``λ`` (experimental: the truer rate overvalues a hub the plan will not crawl before it
    fills; ECHO-newpages plans such hubs as full ones)."""

    name = "echo-censored"
    plans_full_hubs: ClassVar[bool] = False
    counts_floors: ClassVar[bool] = True


__all__ = ["EchoCensored"]
