"""A live crawl's re-solve at scale: what it holds the reactor for, with 100 k sources, a week
of crawls each and a click feed whose fit is due.

Measured, in one run, on the same state (rebuilt for each):

- baseline: the re-solve as it ran before, all on the reactor: the click fit inside the
  estimates (``EchoRuntime.replan`` with a fit due);
- now: what an ``EchoExtension`` round holds the reactor for: taking the click table
  (``CrawlCore.refit_work``), then installing the fit, taking the estimates and installing
  the plan; the fit and the solve run on the thread pool meanwhile (timed apart);
- a re-solve with no fit due (most rounds: the feed is fitted at most hourly), all on the
  reactor as before, and split as the extension makes it now.

Medians of ``--runs``; the ratio is now / baseline.

Run: python benchmarks/bench_resolve.py [--sources 100000] [--pages 4] [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bench_state import NOW, fingerprints, scheduler_with_state  # noqa: E402
from scrapy_echo.crawler.runtime import EchoRuntime  # noqa: E402
from scrapy_echo.model.estimation.learning import SourceLearner  # noqa: E402


def with_clicks(jobdir: str, sources: int, pages: int) -> EchoRuntime:
    """A state of ``sources`` sources, re-solved once, then each with ``pages`` pages crawled
    over the last day and their clicks in, so a click fit is due."""
    runtime = scheduler_with_state(jobdir, fingerprints(10_000, seed=1), sources).runtime
    learner = runtime.state.learner
    runtime.clock = lambda: NOW - learner.refit_every  # (the last fit, an hour ago)
    runtime.replan()  # (the sources' hosts looked up once, as in a running crawl)
    runtime.clock = lambda: NOW
    rng = np.random.default_rng(2)
    ages = rng.uniform(3_600.0, 86_400.0, sources * pages)
    urls, ts, counts = [], [], []
    for i, age in enumerate(ages.tolist()):
        url = page_url(i)
        learner.add_page(url, source=i % sources, appeared=NOW - age, crawled=NOW - age + 60)
        urls.append(url)
        ts.append(NOW - age + float(rng.uniform(60.0, age)))
        counts.append(float(rng.integers(1, 20)))
    learner.add_clicks(urls, ts, counts)
    assert learner.click_refit_due(NOW)
    return runtime


def timed(call: object) -> float:
    started = time.perf_counter()
    call()  # type: ignore[operator]
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=100_000)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, list[float]] = {
        name: [] for name in ("base", "now", "fit", "plain", "plain_reactor", "solve")
    }
    with tempfile.TemporaryDirectory() as jobdir:
        runtime = with_clicks(jobdir, args.sources, args.pages)
        learner = runtime.state.learner
        for run in range(args.runs):
            now = NOW + 2 * run * learner.refit_every
            runtime.clock = lambda now=now: now
            fit_due_again(learner, now)
            started = time.perf_counter()
            work = runtime.core.refit_work(now)
            taking = time.perf_counter() - started
            assert work is not None
            started = time.perf_counter()
            install = work()  # (the thread's part)
            out["fit"].append(time.perf_counter() - started)
            started = time.perf_counter()
            install()
            on_reactor, solving = split_replan(runtime)
            out["now"].append(taking + time.perf_counter() - started - solving)
            out["plain"].append(timed(runtime.replan))
            on_reactor, solving = split_replan(runtime)
            out["plain_reactor"].append(on_reactor)
            out["solve"].append(solving)
            # The baseline on the same state, an hour on: the fit inside the re-solve.
            later = now + learner.refit_every
            runtime.clock = lambda later=later: later
            fit_due_again(learner, later)
            out["base"].append(timed(runtime.replan))
    base, now_ = statistics.median(out["base"]), statistics.median(out["now"])
    print(f"state: {args.sources} sources, {args.sources * args.pages} pages with clicks")
    print(f"baseline (click fit and re-solve on the reactor): median {base * 1000:.0f} ms "
          f"of {args.runs}")  # fmt: skip
    print(f"now (table taken, then fit installed and re-solve, on the reactor): median "
          f"{now_ * 1000:.0f} ms; the fit on its thread meanwhile: "
          f"{statistics.median(out['fit']) * 1000:.0f} ms; ratio {now_ / base:.3f}")  # fmt: skip
    plain, reactor = statistics.median(out["plain"]), statistics.median(out["plain_reactor"])
    print(f"a re-solve with no fit due, all on the reactor: median {plain * 1000:.0f} ms; "
          f"now on the reactor (estimates, install) {reactor * 1000:.0f} ms, the solve on its "
          f"thread meanwhile {statistics.median(out['solve']) * 1000:.0f} ms; "
          f"ratio {reactor / plain:.3f}")  # fmt: skip


def split_replan(runtime: EchoRuntime) -> tuple[float, float]:
    """A re-solve as the extension makes it: seconds on the reactor (the estimates, then the
    install), and seconds of the solve (on the thread pool, timed here in line)."""
    started = time.perf_counter()
    work = runtime.replan_job()
    estimated = time.perf_counter() - started
    started = time.perf_counter()
    install = work()
    solving = time.perf_counter() - started
    return estimated + timed(install), solving


def fit_due_again(learner: SourceLearner, now: float) -> None:
    """A click on the first page at ``now``: the fit is due again."""
    learner.add_clicks([page_url(0)], [now - 1.0], [1.0])
    assert learner.click_refit_due(now)


def page_url(i: int) -> str:
    return f"https://h{i % 2000}.example/a/{i}"


if __name__ == "__main__":
    main()
