"""Change-indicating signals: the index, what the book learns of a source's signals, and what
ECHO-CIS does with them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.model.frontier import Frontier
from scrapy_echo.model.plan import Estimates
from scrapy_echo.model.registry import make_policy
from scrapy_echo.model.signals import SignalBook, signal_index


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


def test_echo_cis_crawls_a_signalled_source_before_its_schedule() -> None:
    policy = make_policy("echo-cis")
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


def test_without_signals_echo_cis_decides_as_echo_newpages() -> None:
    lam, prof, mu = np.array([1e-3, 3e-3]), np.array([2.0, 1.0]), np.full(2, 1e-4)
    with_book, without = make_policy("echo-cis"), make_policy("echo-newpages")
    with_book.signals = SignalBook()  # (never sent a signal)
    for policy in (with_book, without):
        policy.replan(Estimates(lam, prof, mu), 0.01)
    last = np.array([0.0, 50.0])
    for now in np.linspace(60.0, 5000.0, 40):
        a = with_book.choose(float(now), last, Frontier(2))
        b = without.choose(float(now), last, Frontier(2))
        assert a == b
