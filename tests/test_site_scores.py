"""A site's score from ``scrapy echo-rank-sites`` feeds the cold-start prior of its sources."""

from __future__ import annotations

from pathlib import Path

import pytest
from scrapy.exceptions import NotConfigured

from scrapy_echo.core import CrawlCore
from scrapy_echo.core.events import PageFetched, SourceFetched
from scrapy_echo.crawler.settings import read_site_scores
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings


def test_the_ranked_file_gives_each_site_its_score_over_the_mean(tmp_path: Path) -> None:
    ranked = tmp_path / "ranked.csv"
    ranked.write_text("site,score,pages\nnews.test,0.9,10\nblog.test,0.3,4\n")
    assert read_site_scores(ranked) == pytest.approx({"news.test": 1.5, "blog.test": 0.5})
    assert read_site_scores(None) == {}
    ranked.write_text("site,score\nnews.test,-1\n")
    with pytest.raises(NotConfigured, match="line 2"):
        read_site_scores(ranked)
    ranked.write_text("host,value\nnews.test,1\n")
    with pytest.raises(NotConfigured, match="'site' and 'score'"):
        read_site_scores(ranked)
    with pytest.raises(NotConfigured, match="cannot be read"):
        read_site_scores(tmp_path / "missing.csv")


def fed_core(scores: dict[str, float], *, clicks: bool) -> CrawlCore:
    core = CrawlCore(SimSettings(crawl_rate=1.0, site_scores=scores), make_policy("echo-newpages"))
    for t in (0.0, 600.0, 1200.0):
        for hub in HUBS:
            core.apply(SourceFetched(hub, t, ((f"{hub}a{t:.0f}", None),)))
    if clicks:  # the blog's own pages, and their clicks
        pages = [f"{HUBS[1]}p{k}" for k in range(40)]
        for k, page in enumerate(pages):
            core.apply(SourceFetched(HUBS[1], 1400.0 + k, ((page, None),)))
            core.apply(PageFetched(page, HUBS[1], 1400.0 + k, 1400.5 + k))
        core.add_clicks(pages, [9e4] * 40, [2.0] * 40)
    return core


HUBS = ["https://www.newsone.com/", "https://blogtwo.com/", "https://other.org/"]
SCORES = {"newsone.com": 1.5, "blogtwo.com": 0.5}


def test_scores_scale_the_prior_of_sources_without_clicks_only() -> None:
    profit = fed_core(SCORES, clicks=False).replan(1300.0, 1.0).estimates.profit
    assert profit[0] == pytest.approx(3 * profit[1]) and profit[2] == pytest.approx(2 * profit[1])
    # Once a source's own pages have clicks, its score no longer scales it.
    scored = fed_core(SCORES, clicks=True)
    plain = fed_core({}, clicks=True)
    with_scores = scored.replan(2e5, 1.0).estimates.profit
    without = plain.replan(2e5, 1.0).estimates.profit
    assert scored.state.learner.clicked_sources().tolist() == [False, True, False]
    assert with_scores[1] == pytest.approx(without[1])
    assert with_scores[0] == pytest.approx(1.5 * without[0])
