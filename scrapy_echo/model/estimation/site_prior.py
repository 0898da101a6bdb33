"""Pseudo-observations of ``λ`` pooled by site: what the other sources of a source's site say
of its rate (Ford et al. start their estimator from pseudo-datapoints that stand for a prior;
here they are drawn from the site; docs/how-it-works.rst, "Rates pooled by site").

A source's long-run rate is ``L`` links over ``S`` seconds. Its siblings (the other sources of
its site) published ``L'`` over ``S'``: their rate ``r = L'/S'`` is a guess at its own, as
good as sites tell rates apart. That is measured, not assumed: over the sources whose
siblings have enough links, a least-squares line from ``log r`` to the source's own log rate
(``log((L + 1/2)/S)``: a source that found nothing counts too, so the line is not drawn
through the busy sources alone), and ``ρ``, the share of the spread ``σ²`` of own log rates
it explains (its ``R²``; 0 when the line falls, or its slope is within two standard errors
of none). A source then gets ``a = ρ / ((1 - ρ) σ²)`` pseudo-links at the line's rate for
it: ``a`` links are worth a precision of about ``a`` in log rate, and this is what knowing
the site adds, ``1 / ((1 - ρ) σ²)``, to what the spread of all sources gives, ``1 / σ²``
(that prior is applied after). Where sites say nothing, ``ρ = 0`` and nothing is added. The
noise of thin counts only lowers ``ρ`` and the slope: it errs toward lending less.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray

ENOUGH_LINKS = 10.0  # siblings' links before a source is used to measure ρ
MIN_SOURCES = 20  # sources measured before ρ is trusted
# The slope's t statistic, squared, below which sites are taken to say nothing (t < 2).
MIN_T_SQUARED = 4.0
MAX_PSEUDO_LINKS = 50.0  # however well sites explain rates, a source's own links count


def site_pseudo_links(
    links: FloatArray, span: FloatArray, site: NDArray[np.intp]
) -> tuple[FloatArray, FloatArray, float]:
    """Per source, the pseudo-links and pseudo-seconds its siblings lend its long-run rate,
    and the share ``ρ`` of log-rate spread the site explains.

    Examples
    --------
    >>> rng = np.random.default_rng(1)
    >>> site = np.repeat(np.arange(60), 4)  # 60 sites of 4 sections each
    >>> rate = np.exp(rng.normal(-6.0, 1.5, 60))[site] * np.exp(rng.normal(0.0, 0.3, 240))
    >>> span = np.full(240, 86400.0)
    >>> links = rng.poisson(rate * span).astype(float)
    >>> extra_links, extra_span, rho = site_pseudo_links(links, span, site)
    >>> bool(rho > 0.7), bool((extra_links > 0).all())
    (True, True)
    >>> _, _, rho = site_pseudo_links(links, span, rng.permutation(site))  # sites mixed up
    >>> rho
    0.0
    """
    links = np.asarray(links, dtype=np.float64)
    span = np.asarray(span, dtype=np.float64)
    site = np.asarray(site, dtype=np.intp)
    zeros = np.zeros(links.size)
    nothing = (zeros, zeros.copy(), 0.0)
    if not site.size:
        return nothing
    # The siblings' links and seconds: the site's totals less the source's own.
    sib_links = np.bincount(site, weights=links)[site] - links
    sib_span = np.bincount(site, weights=span)[site] - span
    has_sibs = (sib_span > 0) & (sib_links > 0)
    measured = (span > 0) & (sib_links >= ENOUGH_LINKS) & has_sibs
    if int(measured.sum()) < MIN_SOURCES:
        return nothing
    own = np.log((links[measured] + 0.5) / span[measured])
    sibs = np.log(sib_links[measured] / sib_span[measured])
    spread, sib_spread = float(own.var()), float(sibs.var())
    if not (spread > 0 and sib_spread > 0):
        return nothing
    covariance = float(np.mean((own - own.mean()) * (sibs - sibs.mean())))
    if covariance <= 0:
        return nothing
    slope = covariance / sib_spread
    rho = min(covariance * slope / spread, 1.0 - 1e-9)
    if rho * (own.size - 2) / (1.0 - rho) < MIN_T_SQUARED:  # a slope chance would draw
        return nothing
    pseudo = min(rho / ((1.0 - rho) * spread), MAX_PSEUDO_LINKS)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_sibs = np.log(np.where(has_sibs, sib_links / np.where(has_sibs, sib_span, 1.0), 1.0))
        rate = np.exp(own.mean() + slope * (log_sibs - sibs.mean()))
        lend = has_sibs & (rate > 0) & np.isfinite(rate)
        lent_span = np.where(lend, pseudo / rate, 0.0)
    return np.where(lend, pseudo, 0.0), lent_span, rho


__all__ = ["MAX_PSEUDO_LINKS", "site_pseudo_links"]
