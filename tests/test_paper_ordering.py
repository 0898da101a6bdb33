"""The paper's headline, as a regression test: on a synthetic trace of the paper's regime
ECHO-newpages catches more than ECHO-schedule, ECHO-greedy, Fixed-quota, Frequency and BFS at
three budgets (Lefortier et al., CIKM 2013, Table 1: "ECHO-newpages shows the best results" at
each of its three crawl rates). A change that breaks it fails here, not only in
docs/benchmarks.rst."""

from __future__ import annotations

import math

import pytest

from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import PAPER_SETUP, SimSettings, simulate
from scrapy_echo.sim.results import score, upper_bound
from scrapy_echo.sim.search import needed_rate
from scrapy_echo.sim.synth import SynthParams, synthesize

pytestmark = pytest.mark.slow

# A third of the default trace's sources over two weeks, at a third of its budgets (0.05,
# 0.1 and 0.2 crawls/s there): the same regime, a quarter of the replay time (about 3 min).
RATES = (0.0167, 0.033, 0.067)
BASELINES = ("echo-schedule", "echo-greedy", "fixed-quota", "frequency", "bfs")


def test_echo_newpages_catches_most_at_every_budget() -> None:
    trace = synthesize(SynthParams(sources=1000, days=14, seed=0))
    bound, _ = upper_bound(trace)
    fractions: dict[tuple[str, float], float] = {}
    for rate in RATES:
        for name in ("echo-newpages", *BASELINES):
            replay = simulate(trace, make_policy(name), SimSettings(rate, **PAPER_SETUP))
            fractions[name, rate] = score(trace, replay, bound=bound).fraction_of_upper_bound
    for rate in RATES:
        ours = fractions["echo-newpages", rate]
        for name in BASELINES:
            assert ours > fractions[name, rate], (rate, name, fractions)
    # BFS spends the budget recrawling sources: at the lowest rate it catches a small part of
    # what ECHO-newpages does (5.5% of the bound against 65.5% when this was written).
    assert fractions["bfs", RATES[0]] < 0.25 * fractions["echo-newpages", RATES[0]]


def test_bfs_needs_several_times_echos_rate_for_the_same_share() -> None:
    """The paper's other headline: BFS needs 1 crawl/s for 99% of the upper bound where
    ECHO-newpages needs 0.2, five times less ("BFS wastes lots of resources recrawling
    content sources"). Here, for 95% on a small trace of the same regime, the rates measured
    when this was written were 0.0617 and 0.0200 (3.1 times; the default trace's 99%: 3.17,
    docs/benchmarks.rst). A change that lets BFS close in, or ECHO fall back, fails here."""
    trace = synthesize(SynthParams(sources=300, days=7, seed=0))
    bound, _ = upper_bound(trace)

    def needed(name: str, low: float) -> float:
        def fraction(rate: float) -> float:
            replay = simulate(trace, make_policy(name), SimSettings(rate, **PAPER_SETUP))
            return score(trace, replay, bound=bound).fraction_of_upper_bound

        return needed_rate(fraction, 0.95, low=low, high=2.0, precision=0.1)

    echo, bfs = needed("echo-newpages", 0.01), needed("bfs", 0.04)
    assert math.isfinite(bfs) and bfs / echo >= 2.5, (echo, bfs)
