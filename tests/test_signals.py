"""Change-indicating signals: the index, what the book learns of a source's signals, what
ECHO-newpages does with them, and seed 002's policies."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision, Policy
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.estimation.change_signals import (
    SIGNAL_WORTH_CAP,
    SignalBook,
    effective_time_index,
    signal_index,
)
from scrapy_echo.model.intervals.plan import Estimates, Plan


@settings(max_examples=200, deadline=None)
@given(
    st.floats(0.0, 1e6),
    st.floats(1e-7, 1e-1),
    st.floats(1e-3, 1e3),
    st.floats(1e-7, 1e-2),
)
def test_without_recall_the_index_is_echos(t: float, lam: float, profit: float, mu: float) -> None:
    one = [np.array([x]) for x in (t, lam, profit, mu, 0.0, 1.0, 3.0, 2.0)]
    value = float(signal_index(*one, omega=0.5)[0])  # (pending signals count for nothing)
    x = mu * t
    echo = lam * profit / mu * (-math.expm1(-x) - x * math.exp(-x))  # g(x), computed stably
    assert value == pytest.approx(echo, rel=1e-6, abs=1e-12)


def test_signals_raise_the_index_by_what_they_promise() -> None:
    base = [np.array([x]) for x in (600.0, 1e-3, 2.0, 1e-4)]
    quiet = signal_index(*base, *(np.array([x]) for x in (0.8, 0.0, 0.0, 0.0)), omega=0.5)
    pinged = signal_index(*base, *(np.array([x]) for x in (0.8, 0.0, 1.0, 1.0)), omega=0.5)
    # A sure signal (no false ones) promises a page worth P = 2, less the crawl of it.
    assert float(pinged[0] - quiet[0]) == pytest.approx(2.0 - 0.5)
    noisy = signal_index(*base, *(np.array([x]) for x in (0.8, 8e-4, 1.0, 1.0)), omega=0.5)
    assert float(noisy[0] - quiet[0]) == pytest.approx(0.5 * 1.5)  # half of them are true


def test_the_book_learns_recall_and_false_signals_from_what_crawls_find() -> None:
    rng = np.random.default_rng(1)
    book = SignalBook()
    book.grow(3)
    for _ in range(400):  # crawl intervals of 100 s; a new link with probability 1/2
        for source in range(3):
            links = int(rng.random() < 0.5)
            signals = (
                links if source == 0 else int(rng.random() < 0.5) if source == 1 else 0
            )  # 0: every link signals, 1: signals at random, 2: none
            for _ in range(signals):
                book.add(source, 0.0)
            book.crawled(source, 100.0, links)
    recall, false = book.quality()
    assert recall[0] > 0.75 and false[0] < 0.1 * false[1]
    assert recall[1] < 0.05  # as likely after a change as not: says nothing
    assert recall[2] == 0.0


def test_links_per_signal_are_what_crawls_found_after_them_shrunk_to_the_pool() -> None:
    book = SignalBook()
    book.grow(3)
    for _ in range(100):
        for _ in range(4):  # source 0: four signals per link found (listed first elsewhere)
            book.add(0, 0.0)
        book.crawled(0, 100.0, 1)
        book.add(1, 0.0)  # source 1: a link per signal
        book.crawled(1, 100.0, 1)
    per = book.links_per_signal()
    pooled = 200 / 500
    assert per[0] == pytest.approx((100 + 4 * pooled) / (400 + 4))
    assert per[1] == pytest.approx((100 + 4 * pooled) / (100 + 4))
    assert per[2] == pytest.approx(pooled)  # no signals yet: the pool's
    assert SignalBook().links_per_signal().size == 0


def test_a_signal_counts_for_at_most_a_few_times_the_links_signals_brought() -> None:
    """Source 0 lists pages other sources list first: four signals per link it shows new,
    so its learned recall runs to 1 (the seed's step without bound); source 1 brings a link
    per signal. Each signal moves a source's clock by at most SIGNAL_WORTH_CAP times its
    links per signal over ``λ``: source 0's far less than source 1's."""
    policy = make_policy("echo-newpages")
    book = SignalBook()
    policy.signals = book
    lam, prof, mu = np.full(2, 1e-3), np.full(2, 2.0), np.full(2, 1e-4)
    for _ in range(50):
        for _ in range(4):
            book.add(0, 0.0)
        book.crawled(0, 100.0, 1)
        book.add(1, 0.0)
        book.crawled(1, 100.0, 1)
    plan = policy.replan(Estimates(lam, prof, mu), 0.01)
    assert book.quality()[0][0] > 0.95  # (every interval had signals and a link)
    last = np.array([1000.0, 1000.0])
    book.add(0, 1000.5)
    book.add(1, 1000.5)
    which, value = policy._signal_values(1001.0, last, plan)
    assert which.tolist() == [0, 1]
    rate = plan.estimates.link_rate
    step = SIGNAL_WORTH_CAP * book.links_per_signal() / rate  # the cap, in seconds
    assert step[0] < 0.3 * step[1]
    zero = np.zeros(2)
    echo_at = effective_time_index(1.0 + step, rate, prof, mu, zero, zero, zero)  # ECHO's
    assert value == pytest.approx(echo_at, rel=1e-9)


def test_pending_signals_decay_and_a_crawl_settles_them() -> None:
    book = SignalBook()
    book.grow(2)
    book.decay = np.array([math.log(2) / 100.0, 0.0])
    book.add(0, 0.0)
    book.add(0, 100.0)
    count, recent = book.recent(np.array([0, 1]), 200.0)
    assert count.tolist() == [2.0, 0.0]
    assert recent[0] == pytest.approx(0.25 + 0.5)
    book.crawled(0, 200.0, 1)
    assert book.recent(np.array([0]), 200.0)[0].tolist() == [0.0]


def test_echo_newpages_crawls_a_signalled_source_before_its_schedule() -> None:
    policy = make_policy("echo-newpages")
    book = SignalBook()
    policy.signals = book
    lam, prof, mu = np.full(2, 1e-3), np.full(2, 2.0), np.full(2, 1e-4)
    for _ in range(50):  # both sources' signals proved reliable: every new link had one
        for source in (0, 1):
            book.add(source, 0.0)
            book.crawled(source, 100.0, 1)
    plan = policy.replan(Estimates(lam, prof, mu), 0.01)
    assert plan.kept.all() and plan.omega < 2.0  # a page is worth more than a crawl
    last = np.array([1000.0, 1000.0])
    assert policy._due_source(1001.0, last, plan) is None  # a second on: nothing is due
    book.add(1, 1000.5)
    due = policy._due_source(1001.0, last, plan)
    assert due is not None and (due.kind, due.source) == ("source", 1)
    decision = policy.choose(1001.0, last, Frontier(2))
    assert decision is not None and (decision.kind, decision.source) == ("source", 1)


def test_without_signals_echo_newpages_decides_as_the_paper() -> None:
    lam, prof, mu = np.array([1e-3, 3e-3]), np.array([2.0, 1.0]), np.full(2, 1e-4)
    with_book, paper = make_policy("echo-newpages"), make_policy("echo-paper")
    with_book.signals = SignalBook()  # (never sent a signal)
    for policy in (with_book, paper):
        policy.replan(Estimates(lam, prof, mu), 0.01)
    last = np.array([0.0, 50.0])
    seen = set()
    for now in np.linspace(60.0, 5000.0, 40):
        a = with_book.choose(float(now), last, Frontier(2))
        b = paper.choose(float(now), last, Frontier(2))
        assert a == b
        seen.add(a)
    assert len(seen) > 1  # (the two sources take turns: the comparison has teeth)


def _feed_book(recalls: list[float], rounds: int, rng: np.random.Generator) -> SignalBook:
    """Sources with the given recalls, precision 0.8, crawled every 100 s; a new link an
    interval with probability 1/2."""
    book = SignalBook()
    book.grow(len(recalls))
    for _ in range(rounds):
        for source, recall in enumerate(recalls):
            links = int(rng.random() < 0.5)
            true = int(links and rng.random() < recall)
            false = int(rng.poisson(0.25 * 0.5 * recall))
            for _ in range(true + false):
                book.add(source, 0.0)
            book.crawled(source, 100.0, links)
    return book


def test_sources_of_one_feed_borrow_its_recall() -> None:
    # 200 sources, 6 crawls each: alone, a source's few links say little; together they
    # show one recall, and every source's estimate comes close to it.
    book = _feed_book([0.8] * 200, 6, np.random.default_rng(2))
    recall, _ = book.quality()
    assert np.median(recall) == pytest.approx(0.8, abs=0.12)
    assert (recall > 0.5).mean() > 0.9
    alone = _feed_book([0.8], 6, np.random.default_rng(2)).quality()[0]
    assert alone[0] < 0.5  # the same evidence, without the others: not trusted as much


def test_a_feed_covering_half_the_sources_tells_them_apart() -> None:
    # The spread between the two halves is real, so the pooled recall weighs little.
    book = _feed_book([0.9] * 50 + [0.0] * 50, 60, np.random.default_rng(3))
    recall, _ = book.quality()
    assert (recall[:50] > 0.6).all()
    assert (recall[50:] == 0.0).mean() > 0.9


def test_false_signal_rates_scale_with_each_sources_signals() -> None:
    # Same precision, rates a hundred times apart: the prior is a share of each source's
    # own signals, so neither is charged the other's false-signal rate.
    book = SignalBook()
    book.grow(2)
    for source, span in ((0, 10.0), (1, 1000.0)):
        for i in range(40):
            signals, links = (2, 1) if i % 2 else (1, 0)
            for _ in range(signals):
                book.add(source, 0.0)
            book.crawled(source, span, links)
    _, false = book.quality()
    assert false[0] / false[1] == pytest.approx(100.0, rel=0.05)


# -- seed 002's policies ------------------------------------------------------------
def _two_sources(name: str) -> tuple[Policy, Plan]:
    policy = make_policy(name)
    lam, prof, mu = np.array([1e-3, 1e-3]), np.array([2.0, 2.0]), np.full(2, 1e-4)
    return policy, policy.replan(Estimates(lam, prof, mu), 0.01)


def test_greedy_takes_whichever_is_worth_more_page_or_source() -> None:
    policy, _ = _two_sources("greedy")
    last = np.array([0.0, 500.0])
    frontier = Frontier(2)
    frontier.push(1, "page", appeared=900.0, discovered=950.0)
    # A fresh page (worth ~2) beats a source crawled 1000 s ago (index ~0.09).
    assert policy.choose(1000.0, last, frontier) == Decision("page", 1)
    frontier.pop(1)
    # No page: the source crawled longest ago, and the slot is never left idle.
    assert policy.choose(1000.0, last, frontier) == Decision("source", 0)


def test_greedy_cis_puts_a_signalled_source_first() -> None:
    policy, _ = _two_sources("greedy-cis")
    book = SignalBook()
    policy.signals = book
    last = np.array([0.0, 900.0])
    assert policy.choose(1000.0, last, Frontier(2)) == Decision("source", 0)
    book.add(1, 950.0)
    assert policy.choose(1000.0, last, Frontier(2)) == Decision("source", 1)
    book.crawled(1, 100.0, 0)  # a crawl settles it
    assert policy.choose(1000.0, last, Frontier(2)) == Decision("source", 0)


def test_lds_crawls_the_source_most_behind_its_rate_even_before_it_is_due() -> None:
    policy = make_policy("lds")
    lam, prof, mu = np.array([1e-3, 4e-3]), np.full(2, 2.0), np.full(2, 1e-4)
    plan = policy.replan(Estimates(lam, prof, mu), 0.02)
    assert plan.kept.all()
    last = np.array([1000.0, 1000.0])
    now = 1000.0 + 0.1 * float(plan.intervals.min())  # nothing is due yet
    assert (now - last < plan.intervals).all()
    decision = policy.choose(now, last, Frontier(2))
    assert decision == Decision("source", int(np.argmin(plan.intervals)))


def test_lds_never_idles_with_sources_to_crawl_when_its_plan_keeps_none() -> None:
    """A plan that keeps no source (each one's new pages alone would take more than the
    budget) left every slot idle, the estimates frozen for good: the stalest source goes."""
    policy = make_policy("lds")
    est = Estimates(np.array([2.0, 3.0]), np.array([1.0, 2.0]), np.array([1e-3, 1e-3]))
    plan = policy.replan(est, crawl_rate=1.0)
    assert not plan.kept.any()
    now = 10_000.0
    assert policy.choose(now, np.array([now - 500.0, now - 800.0]), Frontier(2)) == Decision(
        "source", 1
    )
    assert policy.choose(now, np.array([now, now]), Frontier(2)) is None  # (all just crawled)


def test_a_saved_book_that_does_not_fit_together_is_refused() -> None:
    book = SignalBook()
    book.add(2, 5.0)
    data = book.to_data()
    assert SignalBook.from_data(data).count.tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="shapes"):
        SignalBook.from_data({**data, "span": np.zeros(2)})
    with pytest.raises(ValueError, match="finite"):
        SignalBook.from_data({**data, "ref": np.array([0.0, np.nan, 5.0])})
