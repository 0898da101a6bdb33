"""Priors: what the estimates fall back on, and how far thin evidence moves them.

The paper starts unknown sources at a small pessimistic ``P`` (section 6). Past it, every
estimate is shrunk toward a pooled one by the weight of its evidence, so that a source is
neither ignored nor put at the top of the schedule on a few links, pages or clicks; the
simulator's oracle runs (docs/benchmarks.rst) show what noisy estimates cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scrapy_echo.model.estimation.estimators import DecayFit
from scrapy_echo.model.estimation.learned_prior import OPTIMISM, posterior_moments, posterior_rates
from scrapy_echo.model.intervals.curves import FloatArray


@dataclass(frozen=True)
class ColdStart:
    """Priors for what is not known yet, so a source is neither ignored nor overrated on
    thin evidence.

    Attributes
    ----------
    link_rate : float
        ``λ`` (links/s) assumed while no source has been crawled twice; afterwards the prior is
        the pooled rate ``λ₀`` of all sources (their links over their spans).
    prior_links : float
        Weight of each prior of ``λ``, in links. A source's long-run rate (all its crawls,
        fading: ``CrawlHistory.long_run``) is ``λ̄ = (L + prior_links) / (S + prior_links /
        λ₀)``, and its rate is the paper's window shrunk toward it: ``λ = (links +
        prior_links) / (span + prior_links / λ̄)``. A source that showed nothing new in its
        first hour is not thereby dead, and two links in a short window do not set its rate.
    profit : float
        ``P`` assumed while no page has click data; afterwards ``profit_pessimism`` times the
        pooled clicks per page: pessimistic, as the paper advises, so a source is not crawled
        often before there is feedback (``P = 0`` would never crawl it).
    profit_pessimism : float
        See ``profit``.
    prior_pages : float
        Weight of the prior ``P``, in pages: a fit from ``n`` pages becomes
        ``(n P_fit + prior_pages P₀) / (n + prior_pages)``, so one lucky page does not put a
        source at the top of the schedule.
    decay : float
        ``μ`` (1/s) while no source has a fit; afterwards the median of the fits.
    prior_pages_decay : float
        Weight of that median, in pages: ``log μ`` of a fit from ``n`` pages becomes
        ``(n log μ_fit + prior_pages_decay log μ₀) / (n + prior_pages_decay)``. A decay
        fitted to a few pages' noisy clicks is off by a factor of two or more as often as not.
        ``P`` moves with it so that the clicks the fitted curve gives within the fit's horizon
        stay as observed.
    """

    link_rate: float = 1.0 / 3600.0
    prior_links: float = 4.0
    profit: float = 1.0
    profit_pessimism: float = 0.5
    prior_pages: float = 5.0
    decay: float = math.log(2.0) / (6 * 3600.0)
    prior_pages_decay: float = 10.0

    def __post_init__(self) -> None:
        names = ("link_rate", "prior_links", "profit", "prior_pages", "decay", "prior_pages_decay")
        for name in names:
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"ColdStart.{name} must be finite and >= 0, got {value!r}")
        if not 0 <= self.profit_pessimism <= 1:
            raise ValueError(
                f"ColdStart.profit_pessimism must be in [0, 1], got {self.profit_pessimism!r}"
            )


@dataclass(frozen=True)
class Candidates:
    """Every candidate estimate of a re-solve, for the plan to pick from and
    :mod:`~scrapy_echo.model.estimation.predictive` to score.

    ``rates``: ``λ`` per source by name, ``"learned"`` (under the priors learned from all
    sources) and ``"plain"`` (the paper's pooled prior); ``profits``: ``P`` by name,
    ``"learned"`` (the posterior mean under the prior learned from all sources), ``"plain"``,
    and ``"optimistic"``, the plan's value of the learned one (that mean plus :data:`OPTIMISM`
    standard deviations: exploration, not a prediction); the learned ones equal the plain ones
    while there is too little to learn a prior from. ``decay``: ``μ``, one estimate."""

    rates: dict[str, FloatArray]
    profits: dict[str, FloatArray]
    decay: FloatArray


def apply_cold_start(
    links: FloatArray,
    span: FloatArray,
    fit: DecayFit,
    cold: ColdStart,
    long_run: tuple[FloatArray, FloatArray] | None = None,
    horizon: float | None = None,
    *,
    learned_priors: bool = False,
    lent: tuple[FloatArray, FloatArray] | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(λ, P, μ)`` for the solver: the learned priors' estimates (``λ`` learned, ``P``
    optimistic) with ``learned_priors``, else the paper's (see :func:`candidate_estimates`)."""
    found = candidate_estimates(
        links, span, fit, cold, long_run, horizon, lent=lent, learned=learned_priors
    )
    if learned_priors:
        return found.rates["learned"], found.profits["optimistic"], found.decay
    return found.rates["plain"], found.profits["plain"], found.decay


def candidate_estimates(
    links: FloatArray,
    span: FloatArray,
    fit: DecayFit,
    cold: ColdStart,
    long_run: tuple[FloatArray, FloatArray] | None = None,
    horizon: float | None = None,
    *,
    lent: tuple[FloatArray, FloatArray] | None = None,
    learned: bool = True,
    dispersion: float = 1.0,
) -> Candidates:
    """Each source's evidence, smoothed toward priors, by every candidate (without
    ``learned``, the learned candidates are left as the plain ones: fitting their priors is
    the costly part).

    ``links`` and ``span`` are each source's new links and the seconds they were found over
    (``CrawlHistory.window``); ``long_run`` the same over all its crawls, fading
    (``CrawlHistory.long_run``); ``fit`` the click fit, over ``horizon`` seconds of age.
    ``λ`` is the window shrunk toward the source's long-run rate, itself shrunk toward the
    pooled rate of all sources, each step with the weight of ``prior_links`` links (the
    ``"learned"`` candidate: the long-run rate is its posterior mean under the distribution of
    rates learned from all sources instead). ``μ`` is
    shrunk toward the median fit (``P`` following it, when ``horizon`` is given), then ``P``
    toward the pooled clicks per page (see :class:`ColdStart`); the learned candidates of ``P``
    of a source with pages are instead its posterior under the distribution of ``P`` learned
    from all sources (:func:`~scrapy_echo.model.estimation.learned_prior.posterior_moments`).
    ``lent`` are pseudo-links and pseudo-seconds the long-run rate also counts (its site's:
    :func:`~scrapy_echo.model.estimation.site_prior.site_pseudo_links`). ``dispersion`` is how
    much more pages' clicks vary than Poisson counts: the learned ``P`` counts each source's
    pages divided by it (:mod:`~scrapy_echo.model.estimation.dispersion`).
    """
    links = np.asarray(links, dtype=np.float64)
    span = np.asarray(span, dtype=np.float64)
    measured = span > 0
    # The pooled rate of all sources, from all their crawls when known (more data).
    all_links, all_span = links[measured].sum(), span[measured].sum()
    if long_run is not None:
        long_links, long_span = (np.asarray(a, dtype=np.float64) for a in long_run)
        all_links, all_span = long_links.sum(), long_span.sum()
    pooled = float(all_links / all_span) if all_span > 0 else 0.0
    lam_prior: FloatArray | float = pooled if pooled > 0 else cold.link_rate
    learned_prior: FloatArray | float = lam_prior
    weight = cold.prior_links
    if long_run is not None and pooled > 0 and weight > 0:
        crawled = long_span > 0  # (its own seconds: what the pooled rate above counts)
        if lent is not None:
            long_links, long_span = long_links + lent[0], long_span + lent[1]
        lam_prior = learned_prior = (long_links + weight) / (long_span + weight / pooled)
        # The long-run rate's posterior under the sources' spread of rates.
        learned_rate = (
            _learned_long_run(np.where(crawled, long_links, 0.0), np.where(crawled, long_span, 0.0))
            if learned
            else None
        )
        if learned_rate is not None:
            learned_prior = np.where(crawled, learned_rate, lam_prior)
    rates = {
        "learned": _shrunk_window(links, span, learned_prior, weight),
        "plain": _shrunk_window(links, span, lam_prior, weight),
    }

    fitted = fit.fitted & np.isfinite(fit.profit)
    n = np.where(fitted, fit.pages, 0.0)
    fit_profit = np.where(fitted, fit.profit, 0.0)

    has_decay = np.isfinite(fit.decay)
    mu_prior = float(np.median(fit.decay[has_decay])) if has_decay.any() else cold.decay
    mu = np.where(has_decay, fit.decay, mu_prior)
    k = cold.prior_pages_decay
    if has_decay.any() and k > 0:
        share = np.where(has_decay, n / (n + k), 0.0)
        shrunk = np.exp(share * np.log(mu) + (1.0 - share) * math.log(mu_prior))
        if horizon is not None:
            # The clicks within the horizon are what the fit saw; keep them.
            fit_profit = fit_profit * (-np.expm1(-mu * horizon)) / -np.expm1(-shrunk * horizon)
        mu = shrunk

    total_pages = float(n.sum())
    pooled_profit = float((n * fit_profit).sum()) / total_pages if total_pages else 0.0
    p_prior = cold.profit_pessimism * pooled_profit if pooled_profit > 0 else cold.profit
    prior = cold.prior_pages
    if prior > 0:
        plain = (n * fit_profit + prior * p_prior) / (n + prior)
    else:
        plain = np.where(fitted, fit_profit, p_prior)
    profits = {"learned": plain, "plain": plain, "optimistic": plain}
    # Pages that vary more than Poisson counts tell P as fewer Poisson pages would.
    moments = posterior_moments(n / dispersion, fit_profit) if learned else None
    if moments is not None:  # (a source without pages keeps the pessimistic prior)
        mean, spread = moments
        profits["optimistic"] = np.where(n > 0, mean + OPTIMISM * spread, p_prior)
        profits["learned"] = np.where(n > 0, mean, p_prior)
    return Candidates(rates, profits, mu)


def _shrunk_window(
    links: FloatArray, span: FloatArray, prior: FloatArray | float, weight: float
) -> FloatArray:
    """The window's rate shrunk toward ``prior`` with the weight of ``weight`` links."""
    if weight > 0 and np.all(np.asarray(prior) > 0):
        return (links + weight) / (span + weight / prior)
    measured = span > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(measured, links / np.where(measured, span, 1.0), prior)


def _learned_long_run(links: FloatArray, span: FloatArray) -> FloatArray | None:
    """Each source's long-run rate, as the posterior mean under the distribution of rates
    learned from all sources (links Poisson over their span: the machinery of ``P``'s prior;
    None while too few sources have been crawled twice)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(span > 0, links / np.where(span > 0, span, 1.0), 0.0)
    learned = posterior_rates(span, rate)
    # (A positive floor: the window is shrunk toward it with the weight of links over it.)
    return None if learned is None else np.maximum(learned, 1e-12)
