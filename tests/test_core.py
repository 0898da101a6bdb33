"""The crawl core, driven directly with typed events (as the simulator drives it)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from scrapy_echo.core import CrawlCore
from scrapy_echo.core.events import (
    ClicksArrived,
    PageFetched,
    SourceFailed,
    SourceFetched,
    SourceNotModified,
)
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings

HUB = "http://a.test/"


def core(backlog: str = "skip") -> CrawlCore:
    """A core whose sources' first crawls only record what they list (``ECHO_BACKLOG``)."""
    return CrawlCore(SimSettings(crawl_rate=1.0, backlog=backlog), make_policy("echo-newpages"))


def fetched(t: float, *links: str | tuple[str, float]) -> SourceFetched:
    shown = tuple((x, None) if isinstance(x, str) else x for x in links)
    return SourceFetched(HUB, t, shown)  # type: ignore[arg-type]


def test_first_crawl_records_then_new_links_become_pages() -> None:
    c = core()
    assert c.apply(fetched(100.0, HUB + "old")) == []
    pages = c.apply(fetched(200.0, HUB + "old", HUB + "new", (HUB + "dated", 190.0), HUB + "new"))
    assert [(p.url, p.appeared, p.window) for p in pages] == [
        (HUB + "new", 150.0, (100.0, 200.0)),  # the window's midpoint
        (HUB + "dated", 190.0, (100.0, 200.0)),  # its stated time, inside the window
    ]
    assert c.apply(fetched(300.0, HUB + "new", (HUB + "late", 50.0)))[0].appeared == 250.0


def test_links_the_spider_middlewares_dropped_are_seen_never_pages() -> None:
    c = core()
    c.apply(fetched(100.0))
    links = ((HUB + "kept", None), (HUB + "dropped", None), (HUB + "twice", None))
    treated = ('{"meta": {"depth": 1}}', None, None)
    shown = SourceFetched(HUB, 200.0, (*links, (HUB + "twice", None)), None, None,
                          (*treated, ""))  # fmt: skip
    pages = c.apply(shown)
    # A link listed twice is dropped only if every copy was; what was added goes along.
    assert [(p.url, p.extras) for p in pages] == [
        (HUB + "kept", '{"meta": {"depth": 1}}'),
        (HUB + "twice", ""),
    ]
    assert c.state.sources[0].new_links == 2  # the dropped link is no yield
    # Seen: listed again, it is neither new nor a page.
    assert c.apply(SourceFetched(HUB, 300.0, ((HUB + "dropped", None),))) == []


def test_pages_clicks_and_failures_reach_the_state() -> None:
    c = core()
    c.apply(fetched(100.0))
    (page,) = c.apply(fetched(200.0, HUB + "p"))
    c.queue(page)
    assert c.state.frontier.pop(0).page == page  # the frontier holds pages, not requests
    c.apply(PageFetched(HUB + "p", HUB, page.appeared, 210.0))
    c.add_clicks([HUB + "p", HUB + "p"], [205.0, 220.0], [1.0, 4.0])
    assert c.state.crawled_pages == 1 and c.state.learner.clicks_caught == 4.0
    c.apply(SourceNotModified(HUB, 300.0))
    assert c.state.sources[0].not_modified == 1
    c.apply(SourceFailed(HUB, 400.0, "HTTP 503"))
    assert c.state.last_crawl[0] == 460.0  # backed off one failure_backoff (60 s)
    with pytest.raises(TypeError):
        c.apply(ClicksArrived(()))  # rows are checked by the receiver first


def test_replan_records_a_sample_and_choose_asks_the_policy() -> None:
    c = core()
    c.apply(fetched(100.0, HUB + "x"))
    plan = c.replan(200.0, budget=1.0)
    assert c.solves == 1 and c.state.history[-1]["budget"] == 1.0
    assert math.isfinite(plan.omega)
    decision = c.choose(200.0)
    assert decision is not None and decision.kind == "source" and decision.source == 0


def test_a_source_found_mid_crawl_yields_what_was_published_since_the_crawl_began() -> None:
    c = core()
    c.apply(fetched(100.0, HUB + "old"))  # the crawl begins at 100
    sitemap = SourceFetched(
        "http://a.test/sitemap.xml",
        150.0,
        ((HUB + "before", 90.0), (HUB + "since", 120.0), (HUB + "undated", None)),
    )
    assert [p.url for p in c.apply(sitemap)] == [HUB + "since"]


def test_aliases_make_one_page_for_links_dispatch_and_clicks() -> None:
    c = core()
    c.apply(fetched(100.0))
    short, slug = "http://a.test/a/1", "http://a.test/2026/1-story"
    (page,) = c.apply(fetched(200.0, short))
    c.apply(PageFetched(short, HUB, page.appeared, 210.0, (slug, slug + "?x=1")))
    state = c.state
    # The page is fetched under any of its URLs, over http or https.
    assert state.already_fetched(short) and state.already_fetched(slug)
    assert state.already_fetched("https://a.test/2026/1-story?utm_source=x")
    assert not state.already_fetched("http://a.test/a/2")
    # A source listing the landing URL later shows nothing new.
    assert c.apply(fetched(300.0, short, slug)) == []
    # Click rows under any alias count for the page.
    matched = c.add_clicks(
        ["https://a.test/2026/1-story", "http://a.test/a/9"], [220.0] * 2, [1, 1]
    )
    assert matched == 1
    assert state.learner.clicks_caught == 1


def test_a_page_fetched_under_its_own_url_is_never_made_another_pages_alias() -> None:
    c = core()
    c.apply(fetched(100.0))
    slug, short = "http://a.test/2026/2-story", "http://a.test/a/2"
    first, second = c.apply(fetched(200.0, slug, short))
    c.apply(PageFetched(slug, HUB, first.appeared, 210.0))
    c.apply(PageFetched(short, HUB, second.appeared, 220.0, (slug,)))
    assert slug.replace("http:", "https:") not in c.state.aliases
    assert c.add_clicks([slug], [230.0], [1]) == 1
    assert c.state.page_key(slug) == "https://a.test/2026/2-story"


def test_a_source_failing_too_often_is_retired_until_added_again() -> None:
    from scrapy_echo.core.events import SourceAdded

    c = CrawlCore(
        SimSettings(crawl_rate=1.0, source_max_failures=3, failure_backoff=10.0),
        make_policy("echo-newpages"),
    )
    c.apply(fetched(100.0))
    other = SourceFetched("http://b.test/", 100.0, ())
    c.apply(other)
    c.replan(100.0, 1.0)
    for k in range(3):
        c.apply(SourceFailed(HUB, 200.0 + k, "HTTP 404"))
    state = c.state
    assert state.sources[0].retired and state.retired_sources == 1
    # Never chosen again, whatever the time: the other source is, or nothing.
    for now in (300.0, 1e5, 1e7):
        decision = c.choose(now)
        assert decision is None or decision.source == 1
    assert c.replan(400.0, 1.0).estimates.link_rate[0] == 0.0
    c.apply(SourceAdded(HUB))  # added again: back, due at once as a new source
    assert not state.sources[0].retired and state.sources[0].failures == 0
    assert c.choose(500.0) == c.policy.choose(500.0, state.last_crawl, state.frontier)
    assert math.isnan(state.last_crawl[0])


@pytest.mark.parametrize(("policy", "picked"), [("echo-newpages", 1), ("echo-paper", 0)])
def test_a_backing_off_source_is_not_recrawled_early(policy: str, picked: int) -> None:
    """V(τ) at a negative τ (a crawl time pushed into the future by a back-off) grows without
    bound: the reference policy, kept as first built, recrawls such a source first whenever
    nothing is due; ECHO-newpages counts it 0."""
    from scrapy_echo.model.intervals.plan import Estimates, Plan

    # Two like sources, clicks fading in about 17 minutes; source 0 backs off for 6 hours.
    estimates = Estimates(np.full(2, 0.01), np.full(2, 5.0), np.full(2, 1e-3))
    plan = Plan(estimates, np.full(2, 3600.0), 1.0, np.ones(2, bool))
    last_crawl = np.array([1000.0 + 6 * 3600.0, 900.0])
    chosen, _ = make_policy(policy)._early_recrawl(1000.0, last_crawl, plan)  # type: ignore[attr-defined]
    assert chosen == picked


def test_site_weights_scale_each_sites_value_in_the_plan() -> None:
    def plan(weights: dict[str, float]) -> np.ndarray:
        crawl = CrawlCore(
            SimSettings(crawl_rate=0.01, site_weights=weights), make_policy("echo-newpages")
        )
        urls = ["https://a.example/", "https://www.b.example/", "https://c.example/"]
        for t in (0.0, 600.0, 1200.0):  # the same new links a crawl on each
            for source, url in enumerate(urls):
                links = [(f"{url}{t:.0f}-{k}", None) for k in range(3)]
                crawl.apply(SourceFetched(url, t + source, tuple(links)))
        result = crawl.replan(1300.0, 0.01)
        assert result.estimates.profit.size == 3
        return result.estimates.profit

    even = plan({})
    assert even[0] == pytest.approx(even[1]) == pytest.approx(even[2])
    # By host first (www.b.example), else by site (a.example for a.example's hosts).
    weighted = plan({"a.example": 3.0, "www.b.example": 0.5, "b.example": 10.0})
    np.testing.assert_allclose(weighted, even * [3.0, 0.5, 1.0])


def test_dispatch_takes_a_source_and_put_back_makes_it_as_due_as_before() -> None:
    c = core()
    c.add_sources([HUB, "http://b.test/"])
    c.replan(0.0, budget=1.0)
    first = c.dispatch(10.0)
    assert first is not None and first.kind == "source" and math.isnan(first.previous)
    assert c.state.last_crawl[first.source] == 10.0  # under way: not chosen again
    second = c.dispatch(10.0)
    assert second is not None and second.source != first.source
    c.put_back(second)
    assert math.isnan(c.state.last_crawl[second.source])
    again = c.dispatch(10.0)
    assert again is not None and again.source == second.source


def test_dispatch_leaves_blocked_sources_out_and_pops_their_pages_never() -> None:
    c = core()
    c.add_sources([HUB, "http://b.test/"])
    c.apply(fetched(100.0))
    (page,) = c.apply(fetched(200.0, HUB + "p"))
    c.queue(page)
    c.replan(200.0, budget=1.0)
    blocked = np.array([True, False])  # the hub's host is busy
    dispatched = c.dispatch(201.0, blocked)
    assert dispatched is not None and (dispatched.kind, dispatched.source) == ("source", 1)
    assert len(c.state.frontier) == 1  # the hub's page still waits
    assert c.state.last_crawl[1] == 201.0 and math.isnan(c.state.last_crawl[0])
    page_out = c.dispatch(202.0)
    assert page_out is not None and page_out.page is not None
    assert page_out.page.page == page  # the frontier holds the page itself
    c.put_back(page_out)
    assert len(c.state.frontier) == 1


def test_dispatch_skips_a_page_fetched_meanwhile_under_another_url() -> None:
    c = core()
    c.apply(fetched(100.0))
    (page,) = c.apply(fetched(200.0, HUB + "a"))
    c.queue(page)
    # Another URL redirected to "a" and was fetched: the waiting "a" is that page.
    c.apply(PageFetched(HUB + "c", HUB, 190.0, 205.0, aliases=(HUB + "a",)))
    c.replan(210.0, budget=1.0)
    dispatched = c.dispatch(211.0)
    assert dispatched is None or dispatched.kind == "source"
    assert len(c.state.frontier) == 0 and c.duplicates_skipped == 1


def test_a_listed_source_keeps_its_shallowest_level_and_a_snapshot_keeps_it() -> None:
    from scrapy_echo.core import snapshot
    from scrapy_echo.core.events import SourceAdded

    c = core()
    index, deep = "http://a.test/sitemap-news.xml", "http://a.test/sitemap-2026.xml"
    c.add_sources([HUB])
    c.apply(SourceAdded(index, 1))
    c.apply(SourceAdded(deep, 3))
    c.apply(SourceAdded(deep, 2))  # also listed higher up: it counts there
    c.apply(SourceAdded(index, 2))  # listed lower down too: it stays where it was
    depths = {status.url: status.depth for status in c.state.sources}
    assert depths == {HUB: 0, index: 1, deep: 2}
    saved = snapshot.capture(c, 100.0, str).to_bytes()
    state, _, _ = snapshot.restore(c.config, snapshot.read(saved), str, make_policy("bfs"))
    assert [status.depth for status in state.sources] == [0, 1, 2]
    # Given to the crawl after all (the sources file, echo-sources): a source of its own.
    c.add_sources([deep])
    c.apply(SourceAdded(index))
    assert [status.depth for status in c.state.sources] == [0, 0, 0]


def test_a_core_reset_to_another_state_plans_by_that_states_hosts() -> None:
    first, second = core(), core()
    for url in ("http://a.test/", "http://b.test/"):
        first.add_sources([url])
    second.add_sources(["http://b.test/"])
    capacity = {"a.test": 1.0, "b.test": 2.0}.__getitem__
    first.limits(capacity)  # (its hosts learned, in its sources' order)
    first.reset(second.state)
    limits = first.limits(capacity)
    assert limits.capacity[limits.host[0]] == 2.0  # source 0 is b.test's hub now
