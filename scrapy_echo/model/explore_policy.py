"""ECHO-newpages with seed 004's exploration: the experimental policy ``echo-explore``
(docs/how-it-works.rst, "Exploration"; docs/benchmarks.rst has why it is not the default)."""

from __future__ import annotations

from typing import ClassVar

from scrapy_echo.model.echo_newpages import EchoNewPages


class EchoExplore(EchoNewPages):
    """ECHO-newpages spending a share of its source crawls on the source crawled longest
    ago, the share tuned by UCB1 over seed 004's exploitation ratios."""

    name = "echo-explore"
    explores: ClassVar[bool] = True


__all__ = ["EchoExplore"]
