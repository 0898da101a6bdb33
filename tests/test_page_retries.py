"""New pages whose fetch failed wait for their back-off and are tried again, a bounded number
of times (scrapy_echo.core.page_retries), through the core as every driver drives it."""

from __future__ import annotations

import pytest

from scrapy_echo.core import CrawlCore, snapshot
from scrapy_echo.core.events import PageFailed, PageFetched, SourceFailed, SourceFetched
from scrapy_echo.core.page_retries import PageRetries
from scrapy_echo.core.pages import NewPage
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings

HUB = "http://a.test/"
PAGE = HUB + "story"


def _page(url: str = PAGE) -> NewPage:
    return NewPage(url, 0, HUB, 90.0, (80.0, 100.0), 100.0, '{"meta": {"k": 1}}')


def test_a_failed_page_waits_its_backoff_doubled_and_is_given_up_after_its_tries() -> None:
    retries = PageRetries(backoff=10.0, backoff_max=25.0, max_tries=3)
    assert retries.failed(_page(), 100.0)
    assert retries.due(109.9) == [] and retries.due(110.0) == [_page()]
    assert retries.failed(_page(), 200.0)  # the second failure: 20 s
    assert retries.due(219.0) == [] and len(retries.due(220.0)) == 1
    assert not retries.failed(_page(), 300.0)  # the third: given up
    assert retries.given_up == 1 and len(retries) == 0 and PAGE not in retries.failures
    # A Retry-After longer than the back-off is waited for, within the most a host may ask.
    assert retries.failed(_page(HUB + "b"), 0.0, retry_after=18.0)
    assert retries.due(17.9) == [] and len(retries.due(18.0)) == 1
    assert retries.failed(_page(HUB + "c"), 0.0, retry_after=1e9)
    assert len(retries.due(25.0)) == 1
    # Fetched at last: its failures are forgotten.
    retries.fetched(HUB + "b")
    assert HUB + "b" not in retries.failures


def test_bad_saved_retries_are_refused() -> None:
    retries = PageRetries(backoff=1.0, backoff_max=1.0, max_tries=3)
    for bad in ([], {"failures": [["u", 0]]}, {"waiting": [[float("nan"), 0, []]]},
                {"waiting": [[1.0, 0, ["u"]]]}, {"given_up": -1}):  # fmt: skip
        with pytest.raises(ValueError):
            retries.load_data(bad)


def _core() -> CrawlCore:
    settings = SimSettings(crawl_rate=1.0, backlog="skip", failure_backoff=30.0)
    made = CrawlCore(settings, make_policy("echo-newpages"))
    made.add_sources([HUB])
    made.apply(SourceFetched(HUB, 0.0, ()))
    assert [p.url for p in made.apply(SourceFetched(HUB, 100.0, ((PAGE, None),)))] == [PAGE]
    return made


def _failed(t: float) -> PageFailed:
    page = _page()
    return PageFailed(PAGE, HUB, page.appeared, t, "TimeoutError", page.window, page.discovered,
                      page.extras)  # fmt: skip


def _dispatched_pages(core: CrawlCore, now: float) -> list[str]:
    out = []
    for _ in range(3):
        taken = core.dispatch(now)
        if taken is not None and taken.page is not None:
            out.append(taken.page.page.url)  # type: ignore[attr-defined]
    return out


def test_the_core_puts_a_failed_page_back_after_its_backoff_until_it_is_fetched() -> None:
    core = _core()
    # (found, and dispatched: not in the frontier, its link seen)
    core.apply(_failed(110.0))
    assert _dispatched_pages(core, 139.0) == []  # backing off
    assert _dispatched_pages(core, 140.0) == [PAGE]  # back, as it was
    core.apply(_failed(150.0))
    assert core.state.page_tries(PAGE) == 2
    assert _dispatched_pages(core, 209.0) == [] and _dispatched_pages(core, 210.0) == [PAGE]
    core.apply(PageFetched(PAGE, HUB, 90.0, 215.0))
    assert core.state.page_tries(PAGE) == 0
    core.apply(_failed(220.0))  # (a late report of an earlier try: the page is fetched)
    assert core.state.pages_retrying() == (0, 0)


def test_a_page_waiting_to_be_tried_again_survives_a_snapshot() -> None:
    core = _core()
    core.apply(_failed(110.0))
    saved = snapshot.capture(core, 120.0, str).to_bytes()
    state, _, _ = snapshot.restore(core.config, snapshot.read(saved), str)
    restored = CrawlCore(core.config, make_policy("echo-newpages"), state=state)
    assert restored.state.page_tries(PAGE) == 1
    assert _dispatched_pages(restored, 140.0) == [PAGE]


def test_a_failing_sources_pages_wait_for_its_next_try_and_go_with_it() -> None:
    core = _core()
    core.apply(SourceFailed(HUB, 101.0, "HTTP 503"))  # its site is down: 30 s back-off
    core.apply(SourceFailed(HUB, 131.0, "HTTP 503"))  # and again: 60 s
    next_try = float(core.state.last_crawl[0])
    assert next_try == 191.0
    core.apply(_failed(132.0))  # its own back-off would end at 162
    assert _dispatched_pages(core, 170.0) == []
    assert PAGE in _dispatched_pages(core, 191.0)
    core.apply(_failed(192.0))
    t = 200.0
    while not core.state.sources[0].retired:  # failing on: retired, its pages with it
        core.apply(SourceFailed(HUB, t, "HTTP 503"))
        t += 1.0
    assert _dispatched_pages(core, 1e6) == []
    assert core.state.pages_retrying() == (0, 1)
