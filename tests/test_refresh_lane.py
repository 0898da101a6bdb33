"""The refresh lane: which fetched pages to fetch again, when, within its share."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.refetch.refresh import (
    LONGEST_REFRESH,
    SHORTEST_REFRESH,
    VERY_STALE_BOUND,
    conservative_shrink,
    optimal_ratio,
    refresh_interval,
    underestimate_risk,
    very_stale_share,
)
from scrapy_echo.model.refetch.refresh_lane import TRIES, RefreshLane
from scrapy_echo.sim.engine import SimSettings, simulate
from scrapy_echo.sim.freshness import freshness
from scrapy_echo.sim.synth import SynthParams, synthesize

PROFIT, DECAY = np.array([1.0, 1.0]), np.array([math.log(2) / 3600, math.log(2) / 3600])


def lane_with_pages(n: int, *, share: float = 0.2, group: int = 0) -> RefreshLane:
    lane = RefreshLane(share=share, prior_period=3600.0)
    for i in range(n):
        url = f"https://a.test/{group}/{i}"
        lane.fetched(url, url=url, group=group, source=0, appeared=0.0, t=10.0, digest="v0")
    return lane


def test_pages_come_due_at_their_interval_and_refetches_feed_the_change_rates() -> None:
    lane = lane_with_pages(3)
    rate = lane.plan(100.0, omega=1e-3, budget=1.0, profit=PROFIT, decay=DECAY)
    assert 0 < rate <= 0.2 + 1e-9
    interval = next(iter(lane.pages.values())).interval
    assert math.isfinite(interval) and interval > 0
    assert lane.due(10.0 + 0.5 * interval) is None  # fetched at 10: not due yet
    page = lane.due(10.0 + interval + 1.0)
    assert page is not None and lane.pages[page].taken == 1
    # Due again an hour on if its refetch never comes back.
    assert lane.pages[page].due == pytest.approx(10.0 + interval + 1.0 + 3600.0)
    lane.put_back(page, 10.0 + interval + 5.0)
    others = {lane.due(10.0 + interval + 2.0) for _ in range(3)}
    assert page not in others  # put back until later; the other two are due now
    assert lane.due(10.0 + interval + 5.0) == page
    lane.fetched(page, url=page, group=0, source=0, appeared=0.0, t=interval + 20.0, digest="v1")
    assert lane.changes == 1 and lane.refetches == 1 and lane.book.changed_count()[0] == 1
    assert lane.pages[page].taken == 0


def test_the_lane_takes_at_most_its_share_of_the_slots_it_is_asked_for() -> None:
    lane = lane_with_pages(20, share=0.25)
    lane.plan(100.0, omega=1e-3, budget=1.0, profit=PROFIT, decay=DECAY)
    later = 10.0 + 2 * max(t.interval for t in lane.pages.values())  # all due
    taken = [lane.take_slot(later) for _ in range(40)]
    # A quarter of 40 asks, and the first (a lane is served while within its share)
    assert sum(page is not None for page in taken) == 11
    assert lane.slots_spent() == pytest.approx(0.25)  # (never past the share)
    page = next(p for p in taken if p is not None)
    lane.give_back_slot(page, later + 60.0)  # could not leave: the slot is not spent
    assert lane.served == 10 and lane.pages[page].due == pytest.approx(later + 60.0)
    lane.drop([page, "https://a.test/never-fetched"])
    assert page not in lane.pages and len(lane.pages) == 19
    # Idle asks (nothing due) bank at most 20 asks' credit: 30 asks after 1,000 idle ones
    # take at most a quarter of 50 and one, not every page due.
    assert all(lane.take_slot(0.0) is None for _ in range(1000))
    burst = [lane.take_slot(later + 1e6) for _ in range(30)]
    assert sum(page is not None for page in burst) <= 0.25 * (20 + 30) + 1 < len(lane.pages)
    assert RefreshLane(share=0.25).slots_spent() == 0.0  # never asked


def test_a_page_whose_refetches_never_come_back_leaves_after_three_tries() -> None:
    lane = lane_with_pages(1)
    lane.plan(100.0, omega=1e-3, budget=1.0, profit=PROFIT, decay=DECAY)
    (page,) = lane.pages
    now = 1e4
    for _ in range(TRIES):
        assert lane.due(now) == page
        now += 3600.0 + lane.pages[page].interval
    assert lane.due(now) is None and not lane.pages
    # A plan with an unknown value of a crawl changes nothing.
    again = lane_with_pages(2)
    assert again.plan(100.0, omega=math.nan, budget=1.0, profit=PROFIT, decay=DECAY) == 0.0
    assert len(again.pages) == 2


def test_the_share_caps_the_refetches_and_fading_pages_leave() -> None:
    lane = lane_with_pages(500, share=0.05)
    rate = lane.plan(100.0, omega=1e-6, budget=2.0, profit=PROFIT, decay=DECAY)
    assert rate == pytest.approx(0.1, rel=1e-6)  # 5% of 2 crawls/s
    intervals = [t.interval for t in lane.pages.values()]
    assert sum(1 / t for t in intervals) == pytest.approx(0.1, rel=1e-6)
    # A day later the pages' clicks have faded (half-life 1 h): no refetch pays, they leave.
    lane.plan(86_400.0, omega=1e-3, budget=2.0, profit=PROFIT, decay=DECAY)
    assert not lane.pages


def test_a_group_seen_changing_is_refetched_more_often_than_one_seen_still() -> None:
    lane = lane_with_pages(50, group=0)
    other = lane_with_pages(50, group=1)
    lane.pages.update(other.pages)
    for k in range(40):  # refetches an hour apart: group 0 changed each time, group 1 never
        for group in (0, 1):
            url = f"https://a.test/{group}/{k}"
            lane.fetched(url, url=url, group=group, source=0, appeared=0.0, t=3610.0,
                         digest="v1" if group == 0 else "v0")  # fmt: skip
    lane.plan(4000.0, omega=1e-4, budget=10.0, profit=PROFIT, decay=DECAY)
    by_group = {g: [t.interval for t in lane.pages.values() if t.group == g] for g in (0, 1)}
    assert np.median(by_group[0]) < np.median(by_group[1])


def test_fetches_are_compared_by_etag_where_both_have_one_else_by_body() -> None:
    lane = lane_with_pages(0)
    url = "https://a.test/0/live"

    def fetch(t: float, content: str) -> None:
        lane.fetched(url, url=url, group=0, source=0, appeared=0.0, t=t, digest=content)

    fetch(10.0, 'aaaa etag:"v1"')
    fetch(20.0, 'bbbb etag:"v1"')  # rotating ads, the same ETag: the server says unchanged
    fetch(30.0, "bbbb")  # the server stopped sending its ETag: the body is the same
    assert (lane.refetches, lane.changes, lane.incomparable) == (2, 0, 0)
    fetch(40.0, 'cccc etag:"v2"')
    assert (lane.changes, lane.incomparable) == (1, 0)
    assert lane.book.changed_count()[0] == 1
    # A copy saved by an older version with its ETag alone, refetched without one: nothing
    # to compare, so no observation either way (counted).
    lane.pages[url].digest = 'etag:"v2"'
    observed = lane.book.to_data()
    fetch(50.0, "dddd")
    assert (lane.refetches, lane.changes, lane.incomparable) == (4, 1, 1)
    assert lane.book.to_data() == observed
    back = RefreshLane.from_data(lane.to_data())
    assert back.incomparable == 1
    older = lane.to_data()
    del older["incomparable"]  # an earlier build's lane: not read
    with pytest.raises(KeyError):
        RefreshLane.from_data(older)


def test_round_trip_and_bad_arguments() -> None:
    lane = lane_with_pages(4)
    lane.plan(100.0, omega=1e-3, budget=1.0, profit=PROFIT, decay=DECAY)
    back = RefreshLane.from_data(lane.to_data())
    assert back.pages == lane.pages and back.prior_period == 3600.0
    defaults = (SHORTEST_REFRESH, LONGEST_REFRESH, VERY_STALE_BOUND)
    assert (back.shortest, back.longest, back.very_stale) == defaults
    risky = RefreshLane(share=0.1, shortest=60.0, longest=600.0, very_stale=0.2).to_data()
    assert RefreshLane.from_data(risky).to_data() == risky
    for key in ("shortest", "longest", "very_stale"):  # a lane saved before they were kept
        del risky[key]
    assert RefreshLane.from_data(risky).shortest == SHORTEST_REFRESH
    assert back.due(1e9) is not None
    off = RefreshLane(share=0.0)
    off.fetched("p", url="p", group=0, source=0, appeared=0.0, t=1.0, digest="x")
    assert not off.pages and off.plan(1.0, omega=1.0, budget=1.0, profit=PROFIT, decay=DECAY) == 0
    bad: list[dict[str, float]] = [
        {"share": 1.0},
        {"share": 0.1, "stale_cost": 0.0},
        {"share": 0.1, "prior_period": math.inf},
        {"share": 0.1, "max_pages": 0},
        {"share": 0.1, "shortest": 0.0},
        {"share": 0.1, "shortest": 10.0, "longest": 5.0},
        {"share": 0.1, "longest": math.inf},
        {"share": 0.1, "very_stale": 0.0},
        {"share": 0.1, "very_stale": 1.0},
    ]
    for arguments in bad:
        with pytest.raises(ValueError):
            RefreshLane(**arguments)  # type: ignore[arg-type]


@pytest.mark.slow
def test_in_a_replay_a_refresh_share_makes_copies_fresher() -> None:
    trace = synthesize(SynthParams(sources=150, days=5, seed=4, update_share=0.5))
    shares = {}
    for share in (0.0, 0.1):
        replay = simulate(
            trace, make_policy("echo-newpages"), SimSettings(crawl_rate=0.03, refresh_share=share)
        )
        shares[share] = freshness(trace, replay)
    assert shares[0.0].refetches == 0 and shares[0.1].refetches > 50
    assert shares[0.1].changing_pages > shares[0.0].changing_pages + 0.03
    # echo-paper never refetches, whatever the share.
    paper = simulate(
        trace, make_policy("echo-paper"), SimSettings(crawl_rate=0.03, refresh_share=0.1)
    )
    assert freshness(trace, paper).refetches == 0


# --- Ford et al.'s risk controls in the lane ------------------------------------------------


def young_lane(omega: float, **risk: float) -> tuple[RefreshLane, float]:
    """Three pages of a group known only by its prior (a change every hour), planned at
    ``omega`` with room to spare; and the page's stale cost ``C_s`` at the plan."""
    lane = RefreshLane(share=0.5, prior_period=3600.0, **risk)
    for i in range(3):
        lane.fetched(i, url=f"https://a.test/{i}", group=0, source=0, appeared=0.0, t=10.0,
                     digest="v0")  # fmt: skip
    lane.plan(100.0, omega=omega, budget=100.0, profit=PROFIT, decay=DECAY)
    return lane, float(PROFIT[0] * DECAY[0] * math.exp(-DECAY[0] * 100.0))


def test_a_group_seen_little_gets_the_papers_shrunk_interval_not_mean_plus_one_sd() -> None:
    lane, stale = young_lane(0.1)
    est = lane.book.rates()
    lam, info = float(est.rate[0]), float(est.information[0])
    assert info == pytest.approx(1.0, abs=1e-3)  # the prior's pseudo-change alone
    r = float(optimal_ratio(1 / lam, 0.1, stale)[()])
    shrink = float(conservative_shrink(r, info)[()])
    assert 0.2 < shrink < 0.5  # a young estimate: much more conservative than r*
    paper = float(refresh_interval(1 / lam, 0.1, stale, shrink=shrink)[()])
    assert [t.interval for t in lane.pages.values()] == [pytest.approx(paper, rel=1e-9)] * 3
    # The share of very stale refetches at that interval is the bound, no more; at the
    # estimate's own r*Δ̂ it would be five times that.
    assert float(very_stale_share(r, info, shrink=shrink)[()]) == pytest.approx(0.05, rel=1e-3)
    assert float(very_stale_share(r, info)[()]) > 0.2
    # The rule it replaces, the rate at its posterior mean plus one SD, is twice as long.
    optimistic = lam * (info + 1 + math.sqrt(info + 1)) / info
    mean_plus_sd = float(optimal_ratio(1 / optimistic, 0.1, stale)[()]) / optimistic
    assert mean_plus_sd > 1.8 * paper
    # What the plan reports: the very stale share it allows, the risk of an underestimate.
    assert lane.very_stale_share == pytest.approx(0.05, rel=1e-3)
    assert lane.shrink == pytest.approx(shrink)
    assert lane.underestimate_risk == pytest.approx(float(underestimate_risk(info)[()]))
    assert lane.underestimate_risk == pytest.approx(3 * math.exp(-2), abs=0.01)


def test_an_interval_shorter_than_the_shortest_is_held_at_it() -> None:
    lane, stale = young_lane(1e-3)  # a cheap crawl: t* ≈ 200 s, below the 300 s floor
    assert {t.interval for t in lane.pages.values()} == {SHORTEST_REFRESH}
    assert lane.very_stale_share == 0.0  # with Δ known it would be refetched as often
    low, _ = young_lane(1e-3, shortest=10.0)
    est = low.book.rates()
    lam, info = float(est.rate[0]), float(est.information[0])
    shrink = conservative_shrink(float(optimal_ratio(1 / lam, 1e-3, stale)[()]), info)
    paper = float(refresh_interval(1 / lam, 1e-3, stale, shrink=shrink, shortest=10.0)[()])
    assert 10.0 < paper < SHORTEST_REFRESH
    assert [t.interval for t in low.pages.values()] == [pytest.approx(paper, rel=1e-9)] * 3


def test_more_information_brings_the_interval_closer_to_the_estimates() -> None:
    """The paper's Sec. 6: the conservative ratio is for a young estimate. A group refetched
    200 times at its own rate is planned near r*Δ̂; one seen only by its prior, far below."""

    def shrink_of(lane: RefreshLane) -> float:
        lam = float(lane.book.rates().rate[0])
        page = next(iter(lane.pages.values()))
        stale = float(PROFIT[0] * DECAY[0] * math.exp(-DECAY[0] * 100.0))
        return page.interval / (float(optimal_ratio(1 / lam, 0.1, stale)[()]) / lam)

    young, _ = young_lane(0.1)
    known, _ = young_lane(0.1)
    rng = np.random.default_rng(3)
    changed = rng.random(200) < -math.expm1(-1.0)  # refetched an hour apart, Δ = 1 h
    known.book.observe_many(np.zeros(200, dtype=int), np.full(200, 3600.0), changed)
    known.plan(100.0, omega=0.1, budget=100.0, profit=PROFIT, decay=DECAY)
    info = known.book.rates().information[0]
    assert info > 50
    assert shrink_of(young) < 0.5 < 0.9 < shrink_of(known) <= 1.0
    assert known.underestimate_risk < 0.01 < 0.3 < young.underestimate_risk
    # And a tighter bound on very stale refetches is a shorter interval.
    strict, _ = young_lane(0.1, very_stale=0.01)
    loose, _ = young_lane(0.1, very_stale=0.2)
    assert strict.pages[0].interval < young.pages[0].interval < loose.pages[0].interval


step = st.tuples(
    st.sampled_from(["new", "plan", "due", "refetch", "put_back"]),
    st.integers(0, 7),  # which page (its group: page % 3)
    st.floats(1.0, 20_000.0),  # seconds since the step before
    st.booleans(),  # the page changed, at a refetch
    st.floats(-20_000.0, 20_000.0),  # put back this far from now; or log10 of ω
)


@given(
    st.lists(step, max_size=80),
    st.floats(1.0, 5000.0),
    st.floats(1.0, 1000.0),
    st.floats(0.01, 0.49),
    st.floats(0.001, 0.5),
)
@settings(max_examples=60, deadline=None)
def test_no_page_is_refetched_sooner_than_the_shortest_interval(
    steps: list[tuple[str, int, float, bool, float]], shortest: float, spread: float,
    share: float, very_stale: float,
) -> None:  # fmt: skip
    lane = RefreshLane(share=share, prior_period=3600.0, shortest=shortest,
                       longest=shortest * spread, very_stale=very_stale)  # fmt: skip
    now, version, handed = 0.0, dict.fromkeys(range(8), 0), set()
    for kind, k, gap, changed, x in steps:
        now += gap
        url = f"https://a.test/{k}"
        if kind == "new" or (kind == "refetch" and k in handed):
            version[k] += changed
            lane.fetched(k, url=url, group=k % 3, source=k % 2, appeared=0.0, t=now,
                         digest=f"v{version[k]}")  # fmt: skip
            handed.discard(k)
        elif kind == "plan":
            budget = 1.0 + abs(x) / 1000.0
            rate = lane.plan(now, omega=10 ** (x / 4000.0), budget=budget, profit=PROFIT,
                             decay=np.array([1e-5, 1e-6]))  # fmt: skip
            assert rate <= share * budget * (1 + 1e-6)
            for t in lane.pages.values():
                assert math.isinf(t.interval) or shortest <= t.interval <= shortest * spread
        elif kind == "due":
            page = lane.due(now)
            if page is not None:
                assert now - lane.pages[page].fetched >= shortest
                handed.add(page)
        elif kind == "put_back" and k in handed:
            lane.put_back(k, now + x)
            handed.discard(k)
