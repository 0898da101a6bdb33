"""ECHO-newpages whose learned priors must keep earning their place: the experimental policy
``echo-earned`` (docs/how-it-works.rst, "Estimators that earn their place")."""

from __future__ import annotations

from scrapy_echo.model.decisions.echo_newpages import EchoNewPages


class EchoEarned(EchoNewPages):
    """ECHO-newpages planning with the paper's priors once their ``λ`` has predicted the
    crawls' new links clearly better than the learned priors'
    (:mod:`scrapy_echo.model.estimation.predictive`). Experimental: on the traces the project
    has, the learned priors predict better and it plans as ECHO-newpages, but for an early
    switch on a synthetic trace that cost a tenth of a point (docs/benchmarks.rst)."""

    name = "echo-earned"
    earns_priors = True


__all__ = ["EchoEarned"]
