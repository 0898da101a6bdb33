"""Overlapping sources (seed 004): Jaccard of their recent links, which one follows, the
rate credited to the leader, kept in snapshots and shown by echo-report."""

from __future__ import annotations

import numpy as np
import pytest

from scrapy_echo.core import CrawlCore, codec
from scrapy_echo.core.events import SourceFetched
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.estimation.overlap import MIN_LINKS, Overlap, OverlapBook, credit_overlaps
from scrapy_echo.sim.engine import SimSettings, simulate
from scrapy_echo.sim.synth import SynthParams, synthesize


def marks(*numbers: int) -> list[int]:
    return [n + 1 for n in numbers]  # (0 marks an empty slot)


def noted(book: OverlapBook, *sources: int) -> OverlapBook:
    """``book`` after a first crawl of each of ``sources`` that listed nothing."""
    for source in sources:
        book.record(source, [], [])
    return book


def test_pairs_over_the_threshold_with_the_less_valuable_one_following() -> None:
    book = noted(OverlapBook(3), 0, 1, 2)
    book.record(0, marks(*range(12)), [False] * 12)
    # Source 1 shows 10 of source 0's links (seen before) and 1 of its own: Jaccard 10/13.
    book.record(1, marks(*range(10), 99), [True] * 10 + [False])
    book.record(2, marks(*range(200, 210)), [False] * 10)  # nothing shared
    value = np.array([1.0, 0.5, 2.0])
    assert book.pairs(value) == [Overlap(0, 1, pytest.approx(10 / 13), pytest.approx(10 / 11))]
    assert book.pairs(value, xi=0.8) == []
    assert book.pairs(np.array([0.1, 0.5, 2.0]))[0].leader == 1
    share = book.echoed_share()
    assert share[0] == 0.0 and share[1] == pytest.approx(10 / 11) and share[2] == 0.0


def test_a_ring_keeps_the_newest_links_and_small_sources_are_not_judged() -> None:
    book = noted(OverlapBook(2, recent=16), 0, 1)
    book.record(0, marks(*range(40)), [False] * 40)  # more than the ring holds
    assert set(book.keys[0].tolist()) == set(marks(*range(24, 40)))
    book.record(1, marks(*range(24, 24 + MIN_LINKS - 1)), [True] * (MIN_LINKS - 1))
    assert book.pairs(np.ones(2), xi=0.0) == []  # source 1 has too few links to judge
    book.record(1, marks(30, 40, 40), [True, False, False])  # 30 held; 40 once
    assert book.shown[1] == MIN_LINKS  # one more link: 40
    assert len(book.pairs(np.ones(2), xi=0.0)) == 1


def test_only_links_a_source_did_not_list_before_count() -> None:
    book = OverlapBook(1)
    book.record(0, marks(1, 2, 3), [True, True, False])  # its first crawl: noted only
    assert book.shown[0] == 0 and book.echoed[0] == 0 and np.isnan(book.echoed_share()[0])
    assert not book.keys[0].any()
    book.record(0, marks(1, 2, 3, 4), [True] * 4)  # only link 4 is new to it
    assert book.shown[0] == 1 and book.echoed[0] == 1
    # Navigation listed from the first crawl on never counts, however long the page.
    menu = marks(*range(100, 400))
    book = OverlapBook(1)
    book.record(0, menu, [False] * 300)
    book.record(0, [*menu, *marks(5)], [True] * 300 + [False])
    book.record(0, [*menu, *marks(5, 6)], [True] * 301 + [False])
    assert book.shown[0] == 2 and set(book.keys[0].tolist()) == {0, *marks(5, 6)}


def test_credit_moves_the_shared_rate_to_the_leader_once_per_follower() -> None:
    rate = np.array([1.0, 0.5, 0.4])
    pairs = [Overlap(0, 1, 0.9, 0.8), Overlap(2, 1, 0.8, 1.0), Overlap(1, 2, 0.75, 0.5)]
    credited = credit_overlaps(rate, pairs)
    # Source 1 follows 0 (its first pair): 0.4 of its 0.5 moves. It is a follower, so it
    # leads no one; source 2's pair with it is skipped too.
    assert credited.tolist() == pytest.approx([1.4, 0.1, 0.4])
    assert credited.sum() == pytest.approx(rate.sum())
    assert rate.tolist() == [1.0, 0.5, 0.4]  # (a copy)


def test_the_book_survives_a_snapshot() -> None:
    book = noted(OverlapBook(2, recent=8), 0, 1)
    book.record(0, marks(*range(11)), [False] * 11)
    book.record(1, marks(3, 4), [True, True])
    data = codec.loads(codec.dumps(book.to_data()))
    again = OverlapBook.from_data(data)
    assert again.shown.tolist() == book.shown.tolist()
    assert again.echoed.tolist() == book.echoed.tolist()
    for source in range(2):
        assert set(again.keys[source].tolist()) == set(book.keys[source].tolist())
    noted(again, 0).record(0, marks(50), [False])  # the oldest (link 3) goes first
    assert 4 not in again.keys[0].tolist() and 5 in again.keys[0].tolist()
    with pytest.raises(ValueError, match="one shown and echoed count"):
        OverlapBook.from_data({**data, "shown": [1.0]})
    with pytest.raises(ValueError, match="ring of link fingerprints"):
        OverlapBook.from_data({**data, "keys": [1, 2]})


def test_the_core_credits_a_mirror_to_the_source_it_mirrors() -> None:
    core = CrawlCore(SimSettings(crawl_rate=1.0), make_policy("echo-newpages"))
    front, mirror = "http://a.test/", "http://a.test/latest"
    for url in (front, mirror):
        core.apply(SourceFetched(url, 0.0, ((url + "nav", None),)))
    for k in range(1, 21):
        t = 600.0 * k
        stories = tuple((f"http://a.test/story{k}-{j}", None) for j in range(3))
        core.apply(SourceFetched(front, t, stories))
        core.apply(SourceFetched(mirror, t + 60.0, stories))  # the same stories, later
    pairs = core.state.overlap.pairs(np.ones(2))
    assert [(p.leader, p.follower) for p in pairs] in ([(0, 1)], [(1, 0)])
    plan = core.replan(12_100.0, 1.0)
    # The mirror found nothing first: its rate was 0 and stays 0; the leader keeps its own.
    assert plan.estimates.link_rate[1] == 0.0 and plan.estimates.link_rate[0] > 0
    assert core.policy.overlaps and core.policy.overlaps[0].follower == 1


@pytest.mark.slow  # (over 6 s: the README's quick command leaves it out)
def test_echo_newpages_crawls_mirrors_less_than_echo_paper() -> None:
    trace = synthesize(SynthParams(sources=80, days=4, warmup_days=2, seed=3, mirror_share=1.0))
    mirrors = np.arange(1, trace.n_sources, 4)  # each site's second source mirrors its first
    true_pairs = {frozenset((m - 1, m)) for m in mirrors.tolist()}
    crawls, pairs = {}, {}
    for name in ("echo-paper", "echo-newpages"):
        policy = make_policy(name)
        replay = simulate(trace, policy, SimSettings(crawl_rate=0.02))
        crawls[name] = np.array(replay.crawls_per_source)
        pairs[name] = {frozenset((o.leader, o.follower)) for o in policy.overlaps}
    assert pairs["echo-paper"] == set()  # the reference never looks
    found = pairs["echo-newpages"]
    # Only mirrors are found (a mirror with many links of its own overlaps its source by
    # less than 0.7), and the pairs found cost fewer crawls than the reference spends.
    assert len(found) >= 2 and found <= true_pairs
    both = sorted(set().union(*found))
    assert crawls["echo-newpages"][both].sum() < crawls["echo-paper"][both].sum()


def test_echo_report_lists_the_overlapping_pairs() -> None:
    from types import SimpleNamespace

    from scrapy_echo.commands.state_report import Report
    from scrapy_echo.model.intervals.plan import Estimates, Plan

    book = noted(OverlapBook(2), 0, 1)
    book.record(0, marks(*range(12)), [False] * 12)
    book.record(1, marks(*range(10)), [True] * 10)
    est = Estimates(np.array([0.2, 0.1]), np.ones(2), np.full(2, 1e-4))
    sources = [SimpleNamespace(url="https://a.test/"), SimpleNamespace(url="https://a.test/b")]
    snapshot = {"sources": sources, "overlap": codec.loads(codec.dumps(book.to_data()))}
    report = Report(snapshot, est, Plan(est, np.full(2, 60.0), 1.0, np.ones(2, bool)), 1.0)
    assert report.overlap_rows() == [
        {
            "leader": "https://a.test/",
            "follower": "https://a.test/b",
            "jaccard": pytest.approx(10 / 12),
            "shared": 1.0,
            "first_elsewhere": 1.0,
        }
    ]
    assert "https://a.test/b follows https://a.test/: Jaccard 0.83" in report._overlap_text()
    empty = {"sources": sources, "overlap": OverlapBook().to_data()}
    assert Report(empty, est, report.plan, 1.0).overlap_rows() == []
