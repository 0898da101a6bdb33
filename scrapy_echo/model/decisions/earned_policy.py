"""ECHO-newpages whose learned priors must keep earning their place: the experimental policy
``echo-earned`` (docs/how-it-works.rst, "Estimators that earn their place")."""

from __future__ import annotations

from scrapy_echo.model.decisions.echo_newpages import EchoNewPages


class EchoEarned(EchoNewPages):
    """ECHO-newpages planning, for ``λ`` and for ``P`` each, with the candidate estimate that
    has predicted the crawl's own observations best so far
    (:mod:`scrapy_echo.model.estimation.predictive`). Experimental: predicting better is not
    planning better. On Reddit at 0.1 crawls/s Pham et al.'s yield predictor predicted the new
    links best and the plan it made caught a point less than the learned priors'
    (docs/benchmarks.rst, "Real traces")."""

    name = "echo-earned"
    earns_estimators = True


__all__ = ["EchoEarned"]
