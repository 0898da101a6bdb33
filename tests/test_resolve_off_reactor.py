"""A re-solve's slow parts run off the reactor: the click fit (seconds at 100 k sources) and the
solve on the thread pool, and a planner's first plan of the state it takes over on the thread
that loads it. The plans are the ones the inline path makes."""

from __future__ import annotations

import threading
import uuid

import numpy as np
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.task import deferLater

from scrapy_echo.core import snapshot as snapshots
from scrapy_echo.crawler.extension import EchoExtension
from scrapy_echo.model.decisions import policies
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.estimation import learning
from scrapy_echo.model.estimation.learning import SourceLearner
from tests.test_middlewares import setup
from tests.test_redis_faults import open_worker

NOW = 50_000.0


def learner_with_clicks(sources: int = 3) -> SourceLearner:
    """Thirty pages of ``sources`` sources, crawled, each with clicks an hour on."""
    learner = SourceLearner(sources, bin_width=600.0, bins=6, grace=600.0)
    pages = [f"http://news.test/{i}" for i in range(30)]
    for i, page in enumerate(pages):
        learner.add_page(page, source=i % sources, appeared=1000.0 * i, crawled=1000.0 * i + 60)
    learner.add_clicks(
        pages, [1000.0 * i + 900 for i in range(30)], [1.0 + i % 4 for i in range(30)]
    )
    return learner


def test_a_click_fit_made_apart_gives_the_inline_estimates() -> None:
    inline, apart = learner_with_clicks(), learner_with_clicks()
    assert apart.click_refit_due(NOW)
    fit = apart.click_refit(NOW)  # the table taken here; the fit below, on any thread
    apart.install_click_refit(fit())
    assert not apart.click_refit_due(NOW)
    got, expected = apart.estimates(NOW), inline.estimates(NOW)
    assert np.isfinite(expected.profit).all() and (expected.profit > 0).any()
    for field in ("link_rate", "profit", "decay", "mean_clicks"):
        np.testing.assert_array_equal(getattr(got, field), getattr(expected, field))


def test_clicks_that_come_while_the_fit_is_made_leave_it_stale() -> None:
    later = NOW + SourceLearner(1).refit_every
    learner, control = learner_with_clicks(), learner_with_clicks()
    fit = learner.click_refit(NOW)
    # A page crawled and clicked after the table was taken.
    learner.add_page("http://news.test/new", source=0, appeared=NOW - 100, crawled=NOW - 50)
    learner.add_clicks(["http://news.test/new"], [NOW - 10], [2.0])
    learner.install_click_refit(fit())
    control.install_click_refit(control.click_refit(NOW)())
    assert learner.click_refit_due(later)  # the new batch is fitted at the next chance
    assert not control.click_refit_due(later)  # nothing new: the fit holds


def test_a_fit_older_than_the_one_in_use_is_dropped() -> None:
    learner = learner_with_clicks()
    older = learner.click_refit(NOW)
    learner.estimates(NOW + 60)  # fitted inline meanwhile, a minute on
    fit = learner._fit
    learner.install_click_refit(older())
    assert learner._fit is fit


async def until(done, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if done():
            return
        await deferLater(reactor, 0.01, lambda: None)
    raise AssertionError("timed out")


@pytest_twisted.ensureDeferred
async def test_a_re_solve_fits_the_clicks_on_a_thread_then_solves(monkeypatch) -> None:
    crawler, runtime, clock = setup(ECHO_SOURCES=["http://news.test/"])
    clock.now = NOW
    extension = EchoExtension.from_crawler(crawler)
    runtime.core.add_sources(["http://news.test/"])
    runtime.core.state.learner = learner_with_clicks(1)
    threads: list[threading.Thread] = []
    real_fit = learning.fit_click_table

    def fit_recorded(*args):  # (the real fit, its thread noted)
        threads.append(threading.current_thread())
        return real_fit(*args)

    monkeypatch.setattr(learning, "fit_click_table", fit_recorded)
    solve_threads: list[threading.Thread] = []
    real_solve = policies.solve_intervals

    def solve_recorded(*args, **kwargs):
        solve_threads.append(threading.current_thread())
        return real_solve(*args, **kwargs)

    monkeypatch.setattr(policies, "solve_intervals", solve_recorded)
    solves = runtime.solves
    extension.resolve()
    extension.resolve()  # the next round, while the fit runs: nothing more
    assert runtime.solves == solves  # the re-solve waits for the fit
    await until(lambda: runtime.solves > solves)
    assert runtime.solves == solves + 1
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    assert not runtime.state.learner.click_refit_due(clock.now)
    assert crawler.stats.get_value("echo/solver/solves") == runtime.solves
    # Nothing to fit now: the solve alone, on a thread too, while the reactor goes on.
    extension.resolve()
    assert runtime.solves == solves + 1
    await until(lambda: runtime.solves > solves + 1)
    assert runtime.solves == solves + 2 and len(threads) == 1
    assert solve_threads and threading.main_thread() not in solve_threads


@pytest_twisted.ensureDeferred
async def test_a_solve_made_for_a_state_given_up_meanwhile_is_dropped() -> None:
    crawler, runtime, clock = setup(ECHO_SOURCES=["http://news.test/"])
    clock.now = NOW
    extension = EchoExtension.from_crawler(crawler)
    runtime.core.add_sources(["http://news.test/", "http://other.test/"])
    runtime.core.state.learner = learner_with_clicks(2)
    runtime.replan()  # (the click fit done: the next round only solves)
    solves = runtime.solves
    extension.resolve()  # the solve goes to a thread; its install can only come after this
    fresh = make_policy(runtime.config.policy)
    runtime.core.reset(None, fresh)  # as a planner taking over another state does
    await until(lambda: not extension._resolving)
    assert runtime.solves == solves  # the solve of the state given up is not installed
    assert len(fresh.plan) == 0 and crawler.stats.get_value("echo/solver/errors") is None
    extension.resolve()  # the state in force now is solved as ever
    await until(lambda: runtime.solves > solves)
    assert len(runtime.policy.plan) == len(runtime.state.sources)


@pytest_twisted.ensureDeferred
async def test_a_planner_unsure_of_its_lease_installs_no_solve() -> None:
    crawler, runtime, clock = setup(ECHO_SOURCES=["http://news.test/"])
    clock.now = NOW
    extension = EchoExtension.from_crawler(crawler)
    runtime.core.add_sources(["http://news.test/"])
    runtime.replan()
    solves, plan = runtime.solves, runtime.policy.plan
    lease = [True]
    runtime.may_plan = lambda: lease[0]  # as a distributed planner's lease_sure
    extension.resolve()
    lease[0] = False  # the lease lapsed while the solve ran on its thread
    await until(lambda: not extension._resolving)
    assert runtime.solves == solves and runtime.policy.plan is plan
    assert crawler.stats.get_value("echo/solver/dropped_unsure_lease") == 1
    extension.resolve()  # nor is one started while it is not sure
    assert not extension._resolving and runtime.solves == solves
    lease[0] = True
    extension.resolve()
    await until(lambda: runtime.solves > solves)


def saved_state(sources: list[str]) -> bytes:
    _, runtime, clock = setup(ECHO_SOURCES=sources)
    runtime.core.add_sources(sources)

    def no_requests(payload: object) -> str:
        raise AssertionError("no request was saved")

    return snapshots.capture(runtime.core, clock(), no_requests).to_bytes()


def taking_over(redis_url: str, saved: bytes, sources: list[str]):
    worker = open_worker(redis_url, f"t{uuid.uuid4().hex[:8]}", ECHO_SOURCES=sources)
    worker._closing = True  # no round trips of its own: the test drives it
    store, planner = worker.store, worker.planner
    assert store.acquire_solver(worker.token, 60_000) == 1
    assert store.save_snapshot(worker.token, saved, "5-0")
    planner.term = 1
    solves = worker.runtime.solves
    return worker, planner, solves, planner.load(store.load_snapshot(), planner.begin_loading())


def test_a_planner_installs_the_plan_made_while_loading(redis_url) -> None:
    sources = [f"http://news{i}.test/" for i in range(3)]
    worker, planner, solves, loaded = taking_over(redis_url, saved_state(sources), sources)
    try:
        assert loaded.plan is not None and len(loaded.plan) == 3
        planner.take_over(loaded)
        assert worker.runtime.solves == solves + 1
        assert worker.runtime.policy.plan is loaded.plan  # no second solve on the reactor
    finally:
        worker.io.stop()


def test_a_planner_given_more_sources_than_it_loaded_plans_them_all(redis_url) -> None:
    saved = saved_state(["http://news0.test/", "http://news1.test/"])
    sources = ["http://news0.test/", "http://news1.test/", "http://news2.test/"]
    worker, planner, solves, loaded = taking_over(redis_url, saved, sources)
    try:
        assert loaded.plan is not None and len(loaded.plan) == 2
        planner.take_over(loaded)
        assert worker.runtime.solves == solves + 1
        assert len(worker.runtime.policy.plan) == 3  # solved again, with the new source
    finally:
        worker.io.stop()
