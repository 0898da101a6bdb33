"""λ's pseudo-observations pooled by site (model.site_prior), and where the crawl core takes
the sites from."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.core.hosts import SourceHosts
from scrapy_echo.model.estimation.estimators import DecayFit
from scrapy_echo.model.estimation.learning import SourceLearner
from scrapy_echo.model.estimation.overflow import OverflowWatch
from scrapy_echo.model.estimation.overlap import OverlapBook
from scrapy_echo.model.estimation.priors import ColdStart, apply_cold_start
from scrapy_echo.model.estimation.site_prior import MAX_PSEUDO_LINKS, MIN_SOURCES, site_pseudo_links

DAY = 86400.0


def sites_that_matter(
    seed: int = 0, sites: int = 50, per_site: int = 4, spread: float = 1.5
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Long-run links and seconds of sources whose rates are mostly their site's."""
    rng = np.random.default_rng(seed)
    site = np.repeat(np.arange(sites), per_site)
    true = np.exp(rng.normal(-7.0, spread, sites))[site] * np.exp(rng.normal(0, 0.3, site.size))
    span = np.full(site.size, 3 * DAY)
    links = rng.poisson(true * span).astype(float)
    return links, span, site, true


def test_sites_that_tell_rates_apart_lend_their_rate() -> None:
    links, span, site, true = sites_that_matter()
    extra_links, extra_span, rho = site_pseudo_links(links, span, site)
    assert 0.7 < rho < 1.0
    assert (extra_links > 0).all() and (extra_links <= MAX_PSEUDO_LINKS).all()
    lent = extra_links / extra_span  # from the siblings alone, near the source's own rate
    assert np.median(np.abs(np.log(lent / true))) < 0.5
    pooled = np.exp(np.mean(np.log(true)))
    assert np.median(np.abs(np.log(pooled / true))) > 0.9  # one rate for all: far off


def test_sites_that_say_nothing_lend_nothing() -> None:
    links, span, site, _ = sites_that_matter()
    shuffled = np.random.default_rng(5).permutation(site)
    extra_links, extra_span, rho = site_pseudo_links(links, span, shuffled)
    assert rho == 0.0
    assert not extra_links.any() and not extra_span.any()


def test_too_few_measured_sources_or_no_siblings_lend_nothing() -> None:
    links, span, site, _ = sites_that_matter(sites=MIN_SOURCES // 4 - 1)
    assert site_pseudo_links(links, span, site)[2] == 0.0
    links, span, _, _ = sites_that_matter()
    alone = np.arange(links.size)  # every source a site of its own
    extra_links, _, rho = site_pseudo_links(links, span, alone)
    assert rho == 0.0 and not extra_links.any()


def test_a_new_section_of_a_busy_site_starts_near_its_sites_rate() -> None:
    links, span, site, true = sites_that_matter()
    # One section of each site has not been crawled twice: no links or seconds of its own.
    fresh = np.arange(0, links.size, 4)
    links[fresh], span[fresh] = 0.0, 0.0
    n = links.size
    fit = DecayFit(*(np.full(n, np.nan) for _ in range(4)), np.zeros(n, bool))
    window = (np.zeros(n), np.zeros(n))
    for learned in (False, True):
        without, _, _ = apply_cold_start(
            *window, fit, ColdStart(), (links, span), learned_priors=learned
        )
        lent = site_pseudo_links(links, span, site)[:2]
        pooled, _, _ = apply_cold_start(
            *window, fit, ColdStart(), (links, span), learned_priors=learned, lent=lent
        )
        # Without the site, every fresh section gets one rate; with it, near its site's.
        assert np.ptp(np.log(without[fresh])) < 0.5
        error_without = np.median(np.abs(np.log(without[fresh] / true[fresh])))
        error_pooled = np.median(np.abs(np.log(pooled[fresh] / true[fresh])))
        assert error_pooled < 0.5 < error_without


@given(
    st.lists(
        st.tuples(st.integers(0, 200), st.floats(0.0, 1e6), st.integers(0, 30)),
        min_size=1,
        max_size=120,
    )
)
def test_what_a_site_lends_is_finite_and_only_to_sources_with_siblings(rows) -> None:
    links = np.array([r[0] for r in rows], dtype=float)
    span = np.array([r[1] for r in rows])
    site = np.array([r[2] for r in rows])
    extra_links, extra_span, rho = site_pseudo_links(links, span, site)
    assert 0.0 <= rho < 1.0
    assert np.isfinite(extra_links).all() and np.isfinite(extra_span).all()
    assert (extra_links >= 0).all() and (extra_span >= 0).all()
    assert (extra_links <= MAX_PSEUDO_LINKS).all()
    siblings = np.bincount(site)[site] > 1
    assert not extra_links[~siblings].any()


def test_sources_on_one_registered_domain_share_a_site() -> None:
    urls = [
        "https://news.orf.at/a/",
        "https://sport.orf.at/b/",
        "https://www.bbc.co.uk/news/",
        "https://orf.at/c/",
        "http://127.0.0.2:8000/x/",
    ]
    hosts = SourceHosts()
    sites = hosts.sites([SimpleNamespace(url=u) for u in urls])
    assert sites.tolist() == [0, 0, 1, 0, 2]
    more = [*urls, "https://www.bbc.co.uk/sport/"]  # sources added later keep their sites
    assert hosts.sites([SimpleNamespace(url=u) for u in more]).tolist() == [0, 0, 1, 0, 2, 1]


def test_the_learner_pools_by_site_only_when_given_sites() -> None:
    links, span, site, true = sites_that_matter()
    learner = SourceLearner(links.size + 1)  # one source more than the sites cover
    for source in range(links.size):
        if source % 4:  # each site's first section is crawled once only
            learner.record_crawl(source, 0.0, 0)
            learner.record_crawl(source, float(span[source]), int(links[source]))
    learner.record_crawl(0, 0.0, 0)
    alone = learner.estimates(3 * DAY, learned_priors=True).link_rate
    assert learner.site_share is None
    pooled = learner.estimates(3 * DAY, learned_priors=True, sites=site).link_rate
    assert learner.site_share is not None and learner.site_share > 0.5
    fresh = np.arange(0, links.size, 4)
    assert np.median(np.abs(np.log(pooled[fresh] / true[fresh]))) < 0.5
    assert np.median(np.abs(np.log(alone[fresh] / true[fresh]))) > 0.5
    assert pooled[-1] == alone[-1]  # the source the sites do not cover has no siblings


def test_echo_report_pools_by_site_as_the_crawl_does_and_says_how_much() -> None:
    from scrapy_echo.commands.state_report import Report

    links, span, site, _ = sites_that_matter()
    learner = SourceLearner(links.size)
    for source in range(links.size):
        learner.record_crawl(source, 0.0, 0)
        if source % 4:  # each site's first section is crawled once only
            learner.record_crawl(source, float(span[source]), int(links[source]))
    sources = [
        SimpleNamespace(
            url=f"https://s{i}.site{s}.com/", retired=False, removed=False, crawls=2, new_links=0
        )
        for i, s in enumerate(site)
    ]
    snapshot = {
        "sources": sources,
        "learner": learner,
        "overflow": OverflowWatch().to_data(),
        "overlap": OverlapBook().to_data(),
        "saved_at": 3 * DAY,
        "crawled_pages": 0,
        "frontier": [],
    }
    report = Report.from_snapshot(snapshot, policy="echo-newpages", budget=1.0)
    crawl = learner.estimates(3 * DAY, learned_priors=True, censoring=True, sites=site)
    np.testing.assert_allclose(report.estimates.link_rate, crawl.link_rate)
    share = report.summary()["site_share"]
    assert share is not None and share > 0.5
    assert f"sites explain {share:.0%} of the spread" in report.summary_text()
    paper = Report.from_snapshot(snapshot, policy="echo-paper", budget=1.0)
    assert paper.summary()["site_share"] is None
    assert "sites explain" not in paper.summary_text()
    assert not np.allclose(paper.estimates.link_rate, crawl.link_rate)
    assert report.summary()["site_share"] == share  # (its own, not the learner's latest)
