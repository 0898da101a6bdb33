"""The snapshot is the core's whole state: after any sequence of observations, a core restored
from its snapshot makes the same next decisions as the core it was taken from (the same
re-solve, then the same fetches, page for page)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.core import CrawlCore, NewPage, snapshot
from scrapy_echo.core.events import (
    PageFetched,
    SourceAdded,
    SourceFailed,
    SourceFetched,
    SourceNotModified,
    SourceRemoved,
)
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings

SOURCES = ["http://a.test/", "http://a.test/world/", "http://b.test/", "http://c.test/feed"]
PAGES = [f"http://{host}.test/p{i}" for host in "abc" for i in range(12)]
CONFIG = SimSettings(crawl_rate=0.5, source_max_failures=3, history_size=3)

source = st.integers(0, len(SOURCES) - 1)
step = st.one_of(
    st.tuples(
        st.just("fetched"),
        source,
        st.lists(
            st.tuples(st.integers(0, len(PAGES) - 1), st.none() | st.floats(-50.0, 50.0)),
            max_size=6,
        ),
    ),
    st.tuples(st.just("not_modified"), source),
    st.tuples(st.just("failed"), source),
    st.tuples(st.just("added"), source),
    st.tuples(st.just("removed"), source),
    st.tuples(st.just("dispatch"), st.integers(1, 3)),
    st.tuples(st.just("clicks"), st.integers(0, len(PAGES) - 1), st.integers(1, 9)),
    st.tuples(st.just("signal"), source),
    st.tuples(st.just("replan"), st.sampled_from([0.05, 0.5, 2.0])),
)


def encode(page: Any) -> str:
    return json.dumps(page.meta())


def decode(payload: Any) -> NewPage:
    meta = json.loads(payload)
    return NewPage.from_meta(meta, meta["page"])


def fetch_one(core: CrawlCore, now: float) -> tuple[str, int, str] | None:
    """One slot, as a driver runs it: a refetch if the lane has one, else a dispatch (a page
    fetched at once; a source's crawl is reported by a later step or never)."""
    refetch = core.next_refresh(now)
    if refetch is not None:
        core.apply(PageFetched(refetch, SOURCES[0], now - 10.0, now, digest="v2", refresh=True))
        return ("refresh", -1, refetch)
    dispatched = core.dispatch(now)
    if dispatched is None:
        return None
    if dispatched.page is None:
        return ("source", dispatched.source, "")
    page: NewPage = dispatched.page.page  # type: ignore[assignment]
    core.apply(PageFetched(page.url, page.source_url, page.appeared, now, digest="v1"))
    return ("page", dispatched.source, page.url)


def run(core: CrawlCore, steps: list[tuple[Any, ...]]) -> float:
    now = 0.0
    for kind, *args in steps:
        now += 1234.0  # (crawls hours apart: the week profile learns from them)
        if kind == "fetched":
            shown = tuple((PAGES[p], None if at is None else now + at) for p, at in args[1])
            for page in core.apply(SourceFetched(SOURCES[args[0]], now, shown)):
                core.queue(page)
        elif kind == "not_modified":
            core.apply(SourceNotModified(SOURCES[args[0]], now))
        elif kind == "failed":
            core.apply(SourceFailed(SOURCES[args[0]], now, "HTTP 503"))
        elif kind == "added":
            core.apply(SourceAdded(SOURCES[args[0]]))
        elif kind == "removed":
            core.apply(SourceRemoved(SOURCES[args[0]]))
        elif kind == "dispatch":
            for _ in range(args[0]):
                fetch_one(core, now)
        elif kind == "clicks":
            core.add_clicks([PAGES[args[0]]], [now], [float(args[1])])
        elif kind == "signal":
            core.signal(SOURCES[args[0]], now - 1.0)
        else:
            core.replan(now, args[0])
    return now


@settings(deadline=None)
@given(
    policy=st.sampled_from(
        ["echo-newpages", "echo-paper", "echo-cycles", "echo-explore", "bfs", "fixed-quota"]
    ),
    steps=st.lists(step, max_size=30),
)
def test_a_restored_core_decides_as_the_one_it_was_saved_from(
    policy: str, steps: list[tuple[Any, ...]]
) -> None:
    original = CrawlCore(CONFIG, make_policy(policy))
    original.add_sources(SOURCES[:3])
    now = run(original, steps)
    saved = snapshot.capture(original, now, encode).to_bytes()
    fresh = make_policy(policy)
    state, plain, refused = snapshot.restore(CONFIG, snapshot.read(saved), decode, fresh)
    assert (plain, refused) == ([], 0)
    restored = CrawlCore(CONFIG, fresh, state=state)
    decisions = []
    for core in (original, restored):
        later = now + 600.0
        core.replan(later, 0.5)
        decisions.append([fetch_one(core, later + i) for i in range(12)])
    assert decisions[0] == decisions[1]
