"""The model's ceiling on a trace: hindsight estimates and the rates the model needs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scrapy_echo.model.intervals.plan import Estimates
from scrapy_echo.sim.ceiling import bfs_fraction, ceiling, hindsight_estimates, optimal_fraction
from scrapy_echo.sim.trace import Trace

HOUR = 3600.0


def curve_trace(
    *, pages: int = 40, every: float = 4 * HOUR, profit: float = 60.0, half_life: float = 10 * HOUR
) -> Trace:
    """Source 0 publishes a page every ``every`` seconds; each page's clicks follow
    ``P (1 - e^{-μ t})`` exactly, one row per hour of age; the click log ends a day after the
    last page (so the late pages are censored). Source 1 publishes nothing."""
    mu = np.log(2.0) / half_life
    created = every * (1 + np.arange(pages))
    duration = float(created[-1] + every)
    click_end = created[-1] + 24 * HOUR
    ages = HOUR * np.arange(24 * 10)
    counts = profit * (np.exp(-mu * ages) - np.exp(-mu * (ages + HOUR)))
    page = np.repeat(np.arange(pages), ages.size)
    ts = created[page] + np.tile(ages, pages) + 0.5 * HOUR
    keep = ts <= click_end
    order = np.argsort(ts[keep], kind="stable")
    return Trace(
        duration=duration,
        source_ids=["0", "1"],
        source_urls=["https://a.example/", "https://b.example/"],
        page_urls=[f"https://a.example/{j}" for j in range(pages)],
        page_created=created,
        link_source=np.zeros(pages, dtype=np.intp),
        link_page=np.arange(pages),
        link_appeared=created,
        link_disappeared=np.full(pages, np.inf),
        click_page=page[keep][order],
        click_ts=ts[keep][order],
        click_count=np.tile(counts, pages)[keep][order],
    )


def test_hindsight_recovers_the_curve_despite_censoring() -> None:
    # Slow decay: the pages of the last days have only part of their clicks when the log ends.
    trace = curve_trace(half_life=48 * HOUR)
    est = hindsight_estimates(trace)
    assert est.link_rate[0] == pytest.approx(40 / trace.duration)
    assert est.link_rate[1] == 0.0 and est.profit[1] == 0.0
    # Binned at one hour, sampled mid-bin: exact up to the fit's precision.
    assert est.profit[0] == pytest.approx(60.0, rel=0.02)
    assert est.decay[0] == pytest.approx(np.log(2.0) / (48 * HOUR), rel=0.02)


def test_a_page_counts_for_the_source_that_showed_it_first() -> None:
    trace = curve_trace(pages=4)
    # Source 1 links to every page an hour after source 0 does.
    both = Trace(
        **{
            **trace.__dict__,
            "link_source": np.concatenate([trace.link_source, np.ones(4, dtype=np.intp)]),
            "link_page": np.concatenate([trace.link_page, trace.link_page]),
            "link_appeared": np.concatenate([trace.link_appeared, trace.link_appeared + HOUR]),
            "link_disappeared": np.full(8, np.inf),
        }
    )
    est = hindsight_estimates(both)
    assert est.link_rate[0] == pytest.approx(4 / trace.duration)
    assert est.link_rate[1] == 0.0


def test_one_source_the_optimal_schedule_is_bfs() -> None:
    est = Estimates(np.array([1e-3]), np.array([5.0]), np.array([1e-5]))
    for rate in (0.002, 0.01, 0.1):
        assert optimal_fraction(est, rate) == pytest.approx(bfs_fraction(est, rate), rel=1e-6)
    # Below the new-page rate BFS crawls nothing but pages and never finds more.
    assert bfs_fraction(est, 5e-4) == 0.0
    found = ceiling(est, rates=[0.01], target=0.99)
    assert found.ratio == pytest.approx(1.0, abs=0.02)
    # Known answer: (1 - e^{-x})/x = 0.99 at x = 0.0201; I = x/μ, N = 1/I + λ.
    assert found.optimal_needed == pytest.approx(1e-5 / 0.020134 + 1e-3, rel=0.01)


def test_unequal_sources_the_optimal_schedule_saves_crawls() -> None:
    rng = np.random.default_rng(1)
    n = 200
    est = Estimates(
        rng.lognormal(0, 1, n) * 1e-5, rng.lognormal(0, 2, n), np.full(n, np.log(2) / 36000)
    )
    rates = [0.005, 0.02, 0.1]
    found = ceiling(est, rates=rates, target=0.95)
    assert all(o >= b for o, b in zip(found.optimal, found.bfs, strict=True))
    assert found.optimal == sorted(found.optimal) and found.bfs == sorted(found.bfs)
    assert optimal_fraction(est, found.optimal_needed) >= 0.95
    assert optimal_fraction(est, found.optimal_needed * 0.98) < 0.95
    assert found.ratio > 2


def test_cli_ceiling(tmp_path: Path) -> None:
    trace_dir, out = tmp_path / "trace", tmp_path / "out"
    python = [sys.executable, "-m", "scrapy_echo.sim"]
    synth = ["synth", "--out", str(trace_dir), "--sources", "60", "--days", "3"]
    subprocess.run([*python, *synth], check=True, capture_output=True, text=True)
    done = subprocess.run(
        [*python, "ceiling", "--trace", str(trace_dir), "--rates", "0.01,0.1", "--out", str(out)],
        check=True,
        capture_output=True,
        text=True,
    )
    assert "| 0.01 |" in done.stdout and "bfs / optimal schedule:" in done.stdout
    saved = json.loads((out / "ceiling.json").read_text())
    assert [r["rate"] for r in saved["rates"]] == [0.01, 0.1]
    assert saved["needed_rate"]["bfs"] >= saved["needed_rate"]["optimal_schedule"] > 0


def test_cli_synth_param(tmp_path: Path) -> None:
    python = [sys.executable, "-m", "scrapy_echo.sim", "synth", "--sources", "10", "--days", "1"]
    trace_dir = tmp_path / "trace"
    subprocess.run(
        [
            *python,
            "--out",
            str(trace_dir),
            "--param",
            "profit_sigma=2.5",
            "--param",
            "hub_items=3,9",
        ],
        check=True,
        capture_output=True,
    )
    meta = json.loads((trace_dir / "meta.json").read_text())["synth"]
    assert meta["profit_sigma"] == 2.5 and meta["hub_items"] == [3, 9]
    for bad, message in [
        ("nope=1", "NAME one of"),
        ("profit_sigma=x", "expected a value like 1.5"),
        ("profit_sigma=inf", "expected a value like 1.5"),
        ("hub_items=3", "expected a value like 10,50"),
        ("profit_sigma=-1", "profit_sigma must be >= 0"),
    ]:
        done = subprocess.run(
            [*python, "--out", str(tmp_path / "bad"), "--param", bad],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 2 and message in done.stderr, (bad, done.stderr)
