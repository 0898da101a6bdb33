"""Ranking sites by how temporal they are (Wang et al. 2008): the model, the page-view log
reader, ``scrapy echo-rank-sites`` and its output as ``echo-discover``'s hosts."""

from __future__ import annotations

import csv
import json
import logging
import math
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scrapy.exceptions import UsageError

from scrapy_echo.commands.discover import _read_hosts
from scrapy_echo.commands.rank_sites import _evaluate, _read_labels
from scrapy_echo.inputs.pageview_log import read_page_views, sites_of_pages
from scrapy_echo.model.temporal_sites import (
    InterestCurves,
    TemporalPages,
    accumulated_interest,
    classify_pages,
    confusion,
    fit_interest_curves,
    prf,
    score_sites,
)
from scrapy_echo.sim.pageview_synth import (
    SiteSpec,
    default_sites,
    write_labels,
    write_log,
    write_page_labels,
)
from tests.test_site_tuning import table_one_log

SCRAPY = [sys.executable, "-m", "scrapy"]


def curves_of(mu: np.ndarray, sigma: np.ndarray, views: float = 100.0) -> InterestCurves:
    """Pages with these fits, born mid-log and seen for 30 days."""
    n = len(mu)
    full = np.full(n, 1.0)
    return InterestCurves(full * views, full * 10, mu, sigma, full * 30, np.zeros(n, bool))


def _classes(temporal: np.ndarray, classified: np.ndarray) -> TemporalPages:
    return TemporalPages(temporal & classified, classified, {})


# The model ---------------------------------------------------------------------------------


@given(st.floats(-4, 4), st.floats(0.01, 4), st.floats(0.1, 30), st.floats(0.05, 0.95))
def test_the_closed_form_rule_agrees_with_the_cdf(mu: float, sigma: float, n: float, q: float):
    phi = float(accumulated_interest(mu, sigma, n))
    assert phi == pytest.approx(NormalDist().cdf((math.log(n) - mu) / sigma), abs=1e-7)
    assume(abs(phi - q) > 1e-6)  # the table's error, not the rule's
    temporal = classify_pages(curves_of(np.array([mu]), np.array([sigma])), n=n, q=q).temporal
    assert bool(temporal[0]) == (phi > q)


@given(st.floats(0.4, 1.5), st.floats(2.0, 3.0), st.integers(0, 2**32 - 1))
def test_a_pages_mu_and_sigma_are_recovered_from_its_views(sigma: float, z0: float, seed: int):
    # The first bin holds the ages below z0 standard deviations (20 to 450 of the views), so
    # the page's birth (its first bin with a view) is the true one. Closer to the mode, a
    # curve a few bins wide reads wider than it is.
    bin_days = 1 / 48
    mu = math.log(bin_days) + z0 * sigma
    ages = np.random.default_rng(seed).lognormal(mu, sigma, 20_000)
    page = np.r_[np.zeros(ages.size, int), 1]  # page 1, without views, starts the log at 0
    fit = fit_interest_curves(
        page, np.r_[7.0 + ages, 0.0], np.r_[np.ones(ages.size), 0.0], bin_days=bin_days
    )
    assert fit.birth[0] == 7.0
    assert fit.mu[0] == pytest.approx(mu, abs=0.05)
    assert fit.sigma[0] == pytest.approx(sigma, abs=0.05)


@pytest.mark.parametrize(
    ("mu", "sigma", "seen"), [(1.0, 0.8, 0.5), (2.0, 1.0, 0.3), (0.0, 1.2, 0.7)]
)
def test_a_lifetime_cut_off_by_the_logs_end_is_filled_in(mu: float, sigma: float, seen: float):
    """The log ends when only ``seen`` of the interest has come: the truncated fit recovers
    µ and σ; the plain moments of the log ages would be far off."""
    end = math.exp(mu + sigma * NormalDist().inv_cdf(seen))
    ages = np.random.default_rng(1).lognormal(mu, sigma, 40_000)
    ages = ages[ages < end]
    bin_days = 1 / 24
    # A first reader at age 0 pins the birth; a page without views marks the log's end.
    page, t = np.r_[np.zeros(ages.size + 1, int), 1], np.r_[0.0, ages, end - 1e-6]
    fit = fit_interest_curves(page, t, np.r_[np.ones(ages.size + 1), 0], bin_days=bin_days)
    assert fit.observed[0] == pytest.approx(end, abs=bin_days)
    assert fit.mu[0] == pytest.approx(mu, abs=0.12)
    assert fit.sigma[0] == pytest.approx(sigma, abs=0.12)
    plain = np.log(np.floor(ages / bin_days) * bin_days + bin_days / 2)
    assert abs(plain.mean() - mu) > 0.4  # what the fit had to make good


def test_rows_in_any_order_and_pages_without_views() -> None:
    rng = np.random.default_rng(2)
    page, t = rng.integers(0, 50, 2000), rng.uniform(0, 40, 2000)
    views = rng.poisson(3, 2000).astype(float)
    views[page == 7] = 0
    a = fit_interest_curves(page, t, views, pages=52)
    order = rng.permutation(2000)
    b = fit_interest_curves(page[order], t[order], views[order], pages=52)
    np.testing.assert_allclose(a.mu, b.mu)
    assert np.isnan(a.birth[[7, 50, 51]]).all() and np.isnan(a.mu[[7, 50, 51]]).all()
    classes = classify_pages(a, min_views=0, keep_alive_at_start=True)
    assert not classes.classified[[7, 50, 51]].any()
    assert classes.left_out["too_few_views"] == 3


def test_pages_too_young_or_alive_at_start_or_thin_are_left_out_and_counted() -> None:
    # Page 0: in the first bin; 1: 30 views, born day 10; 2: 4 views; 3: born 2 days before
    # the end (day 20 is the last).
    page, t = [0, 1, 2, 3, 3], [0, 10, 12, 19, 20]
    fit = fit_interest_curves(page, t, [50, 30, 4, 40, 1])
    classes = classify_pages(fit)
    assert classes.classified.tolist() == [False, True, False, False]
    assert classes.left_out == {"too_few_views": 1, "too_young": 1, "alive_at_start": 1}
    assert classify_pages(fit, n=2).classified[3]  # seen 2 days: enough for n = 2
    assert classify_pages(fit, keep_alive_at_start=True).classified[0]


@given(st.integers(0, 2**32 - 1), st.floats(0.05, 0.9), st.floats(0.01, 0.09))
def test_more_days_or_a_lower_quantile_never_remove_a_temporal_page(seed: int, q: float, dq: float):
    rng = np.random.default_rng(seed)
    curves = curves_of(rng.normal(0.5, 1.5, 300), rng.uniform(0.1, 2.0, 300))
    base = classify_pages(curves, n=3, q=q + dq).temporal
    assert np.all(classify_pages(curves, n=3, q=q).temporal >= base)
    assert np.all(classify_pages(curves, n=4, q=q + dq).temporal >= base)


@given(st.integers(0, 2**32 - 1))
def test_a_page_turning_temporal_never_lowers_its_sites_score(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pages = 40
    site = rng.integers(0, 4, pages)
    curves = replace(curves_of(np.zeros(pages), np.ones(pages)), views=rng.uniform(10, 500, pages))
    temporal = rng.random(pages) < 0.5
    cold = np.flatnonzero(~temporal)
    assume(cold.size > 0)
    classified = np.ones(pages, bool)
    before = score_sites(site, curves, _classes(temporal, classified), sites=4, min_pages=1)
    temporal[cold[0]] = True
    after = score_sites(site, curves, _classes(temporal, classified), sites=4, min_pages=1)
    changed = site[cold[0]]
    assert after.score1[changed] > before.score1[changed]
    assert after.score2[changed] > before.score2[changed]
    others = np.arange(4) != changed
    np.testing.assert_array_equal(after.score[others], before.score[others])
    # Score = 0.6 Score1 + 0.4 Score2, and the order is by score.
    scored = ~np.isnan(after.score)
    expected = 0.6 * after.score1 + 0.4 * after.score2
    np.testing.assert_allclose(after.score[scored], expected[scored])
    assert np.all(np.diff(after.score[after.order]) <= 0)


def test_the_papers_cases_through_the_classifier_and_the_commands_report(capsys) -> None:
    """focus.cn: the project's classifier at n = 3, q = 0.7 on pages built to fall as the
    paper's did (2,337 temporal and 703 untemporal labels) gives hit 2,829, miss 141 and
    false alarm 70, and the paper's precision and recall of the temporal class. Table 1: the
    command's report of the top 100 sites of 975,151 classified pages."""
    z, ln3 = NormalDist().inv_cdf(0.7), math.log(3)
    # Just inside and just outside the boundary µ + σ z_0.7 = ln 3, and far from it.
    mu = np.r_[np.full(2196, ln3 - z - 0.01), np.full(141, ln3 - z + 0.01)]
    mu = np.r_[mu, np.full(70, ln3 - z - 0.01), np.full(633, ln3 - z + 0.01)]
    label = np.r_[np.ones(2337, bool), np.zeros(703, bool)]
    classes = classify_pages(curves_of(mu, np.ones(mu.size)))
    counts = confusion(classes.temporal, label)
    assert (counts.hits, counts.misses, counts.false_alarms) == (2829, 141, 70)
    assert counts.performance() == 2829 - 141 - 70
    assert counts.performance(1, 0, 10) == 2829 - 700
    precision, recall, _ = counts.prf()
    assert (round(precision, 3), round(recall, 3)) == (0.969, 0.94)
    assert prf(0, 0, 5) == (0.0, 0.0, 0.0)

    site, curves, table, _ = table_one_log()
    names = [f"site{i}.example" for i in range(400)]
    scores = score_sites(site, curves, table, sites=400)
    chosen = scores.order[:100]
    _evaluate({}, names, scores, chosen, (1.0, 1.0, 1.0))
    out = capsys.readouterr().out
    assert (
        "pages of the written sites: 70110 temporal of 91996; precision 0.762, recall 0.516, "
        "F 0.615" in out
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: fit_interest_curves([0], [0], [-1]), "views must be finite and >= 0"),
        (lambda: fit_interest_curves([0], [0], [1], bin_days=0), "bin_days (0)"),
        (lambda: fit_interest_curves([3], [0], [1], pages=2), "[0, pages) = [0, 2)"),
        (lambda: classify_pages(curves_of(np.zeros(1), np.ones(1)), q=1.0), "q (1.0)"),
        (lambda: classify_pages(curves_of(np.zeros(1), np.ones(1)), n=0), "n (0)"),
        (
            lambda: score_sites(
                [0],
                curves_of(np.zeros(1), np.ones(1)),
                classify_pages(curves_of(np.zeros(1), np.ones(1))),
                alpha=0.7,
                beta=0.7,
            ),
            "sum to 1",
        ),
    ],
)
def test_bad_arguments_name_the_parameter_and_rule(call, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


# Reading page-view logs --------------------------------------------------------------------

GOOD = "url,ts,clicks\nhttps://news.orf.at/a,0,3\nhttps://orf.at/b,86400,2\n"


def test_bad_rows_are_skipped_counted_by_kind_and_logged_once(tmp_path: Path, caplog) -> None:
    path = tmp_path / "views.csv"
    bad = [
        "ftp://x.org/a,0,1",
        "https://x.org/a,yesterday,1",
        "https://x.org/a,0,-2",
        "https://x.org/a,,1",
        "https://x.org/a,0",
        "",
        "ftp://y.org/b,0,1",
    ]
    path.write_text(GOOD + "\n".join(bad) + "\nhttps://www.bbc.co.uk/c,172800,1")
    with caplog.at_level(logging.WARNING):
        log = read_page_views(path)
    assert log.rows == 3  # the last line, without a newline, counts: the log is finished
    assert dict(log.invalid) == {
        "bad_url": 2,
        "bad_ts": 1,
        "bad_clicks": 1,
        "missing_field": 1,
        "csv_columns": 1,
    }
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 5 and any("line 4" in w and "ftp://x.org" in w for w in warnings)
    site, names = sites_of_pages(log.urls, level="domain")
    assert names == ["orf.at", "bbc.co.uk"] and site.tolist() == [0, 0, 1]
    site, names = sites_of_pages(log.urls)
    assert names == ["news.orf.at", "orf.at", "www.bbc.co.uk"] and site.tolist() == [0, 1, 2]


def test_the_column_path_and_the_row_path_read_the_same(tmp_path: Path, monkeypatch) -> None:
    """A CSV in many blocks, one bad row in a block, an ISO time in another: the same rows as
    JSON Lines read row by row by the click feed's own code."""
    from scrapy_echo.inputs import pageview_log as pageviews

    monkeypatch.setattr(pageviews, "BLOCK_BYTES", 1 << 16)
    taken = []
    columns = pageviews._PageViewReader._columns
    monkeypatch.setattr(
        pageviews._PageViewReader,
        "_columns",
        lambda self, lines: taken.append(columns(self, lines)) or taken[-1],
    )
    rng = np.random.default_rng(3)
    n = 60_000
    urls = [f"https://Site{i % 5000 % 37}.example.com/p/{i % 5000}.html" for i in range(n)]
    urls[100] += "#frag"  # still the page of rows 5100, 10100, ...
    times = (1_700_000_000 + rng.integers(0, 60, n) * 3600).tolist()
    views = rng.poisson(2, n).tolist()
    iso = {40_000: "2023-11-14T22:13:20Z"}  # == 1_700_000_000
    lines = [
        f"{u},{iso.get(i, t)},{v}"
        for i, (u, t, v) in enumerate(zip(urls, times, views, strict=True))
    ]
    lines[30_000] = f"{urls[30_000]},{times[30_000]},-1"
    (tmp_path / "a.csv").write_text("url,ts,clicks\n" + "\n".join(lines) + "\n")
    rows = [
        {"url": u, "ts": iso.get(i, t), "clicks": v}
        for i, (u, t, v) in enumerate(zip(urls, times, views, strict=True))
    ]
    rows[30_000]["clicks"] = -1
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    fast, slow = read_page_views(tmp_path / "a.csv"), read_page_views(tmp_path / "a.jsonl")
    assert fast.rows == slow.rows == n - 1
    assert dict(fast.invalid) == dict(slow.invalid) == {"bad_clicks": 1}
    assert fast.urls == slow.urls and len(fast.urls) == 5000
    assert taken.count(False) == 1 and taken.count(True) > 30  # only the bad row's block fell back
    np.testing.assert_array_equal(fast.page, slow.page)
    np.testing.assert_array_equal(fast.ts, slow.ts)
    np.testing.assert_array_equal(fast.views, slow.views)
    assert fast.ts[40_000 - 1] == 1_700_000_000  # one row before it was skipped


# The command -------------------------------------------------------------------------------


def rank(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SCRAPY, "echo-rank-sites", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bool]]:
    folder = tmp_path_factory.mktemp("log")
    log = write_log(folder / "views.csv", default_sites(scale=0.25, seed=5), seed=5)
    write_labels(folder / "labels.csv", log.labels)
    return folder, log.labels


@pytest.mark.slow  # (about 45 s: the command on a generated log, births fitted)
def test_temporal_sites_come_first_with_the_huge_and_the_tiny_one(tmp_path, generated) -> None:
    folder, labels = generated
    assert not (tmp_path / "scrapy.cfg").exists()  # no project
    # The labels name registered domains: the sites are taken at that level.
    run = rank(
        tmp_path,
        str(folder / "views.csv"),
        "-o",
        "out.csv",
        "--labels",
        str(folder / "labels.csv"),
        "--site-level",
        "domain",
    )
    assert run.returncode == 0, run.stderr[-3000:]
    with open(tmp_path / "out.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0])[:2] == ["site", "score"]
    assert {"score1", "score2", "pages", "temporal_pages", "views"} <= set(rows[0])
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True) and min(scores) >= 0.5
    written = {r["site"] for r in rows}
    assert "tiny-bulletin.co.uk" in written and "huge-encyclopedia.org" not in written
    counts = confusion([s in written for s in labels], list(labels.values()))
    precision, recall, f = counts.prf()
    assert f >= 0.9
    out = run.stdout
    assert f"hits {counts.hits}, misses {counts.misses}, false alarms {counts.false_alarms}" in out
    assert f"precision {precision:.3f}, recall {recall:.3f}, F {f:.3f}" in out
    assert f"Performance {counts.performance():g} (A=1, B=1, C=1)" in out
    hot, pages = (sum(int(r[c]) for r in rows) for c in ("temporal_pages", "pages"))
    assert (
        f"pages of the written sites: {hot} temporal of {pages}; precision {hot / pages:.3f}" in out
    )
    assert re.search(r"read \d+ rows of .*views\.csv \(bad rows skipped: none\)", out)

    # --top K writes the K best, and echo-discover takes the file as its host list.
    top = rank(
        tmp_path, str(folder / "views.csv"), "-o", "top.csv", "--top", "3", "--site-level", "domain"
    )
    assert top.returncode == 0, top.stderr[-3000:]
    hosts = _read_hosts(str(tmp_path / "top.csv"))
    assert hosts == [r["site"] for r in rows[:3]]


@pytest.mark.slow  # (about 50 s: a labelled log generated, tuned and ranked)
def test_page_labels_tune_the_thresholds_and_the_ranking_uses_them(tmp_path: Path) -> None:
    """A log whose page labels follow a planted rule Φ(1) > 0.8, with weekly magazines whose
    pages are temporal at the fixed Φ(3) > 0.7 but not under the planted rule: the command
    prints the tuned triple, near the planted one, and ranks with it."""
    sites = default_sites(scale=0.1, temporal=4, plain=4, seed=3)
    sites += [
        SiteSpec(f"weekly{i}.com", (f"www.weekly{i}.com",), True, 120, 0.8, 60.0, hot_median=1.2)
        for i in range(3)
    ]
    log = write_log(tmp_path / "views.csv", sites, seed=3, planted=(1.0, 0.8))
    write_page_labels(tmp_path / "pages.csv", log.page_labels)
    run = rank(tmp_path, "views.csv", "-o", "out.csv", "--page-labels", "pages.csv", "--top", "12")
    assert run.returncode == 0, run.stderr[-3000:]
    found = re.search(
        r"page labels: (\d+) pages found in the log \(\d+ temporal\), 0 not in it; bad rows "
        r"skipped: none\ntuned: n ([\d.]+) days, q ([\d.]+) \(hits (\d+), .*\); alpha:beta "
        r"([\d.]+):([\d.]+) \(top 12 sites' pages: precision [\d.]+, recall [\d.]+, F ([\d.]+)\)",
        run.stdout,
    )
    assert found, run.stdout
    pages, n, q, hits = int(found[1]), float(found[2]), float(found[3]), int(found[4])
    assert pages == len(log.page_labels)
    assert 0.5 <= n <= 2.0 and 0.75 <= q <= 0.9  # the planted (1, 0.8), or an equivalent
    assert hits > 0.8 * pages
    written = [line.split(",")[0] for line in (tmp_path / "out.csv").read_text().splitlines()[1:]]
    assert not any("weekly" in name for name in written)  # no longer temporal when tuned
    fixed = rank(tmp_path, "views.csv", "-o", "fixed.csv", "--top", "12")
    assert fixed.returncode == 0, fixed.stderr[-3000:]
    assert "weekly" in (tmp_path / "fixed.csv").read_text()  # the fixed thresholds take them
    assert "birth_unknown" in fixed.stdout and "(host level)" in fixed.stdout


def test_a_json_lines_log_ranks_the_same(tmp_path: Path) -> None:
    sites = default_sites(scale=0.05, temporal=4, plain=4, seed=2)
    write_log(tmp_path / "views.csv", sites, seed=9)
    write_log(tmp_path / "views.jsonl", sites, seed=9)
    for name in ("views.csv", "views.jsonl"):
        run = rank(tmp_path, name, "-o", f"{name}.out", "--min-score", "0")
        assert run.returncode == 0, run.stderr[-3000:]
    ranked = (tmp_path / "views.csv.out").read_text()
    assert ranked == (tmp_path / "views.jsonl.out").read_text() and ranked.count("\n") > 8


def test_bad_rows_are_counted_in_the_commands_report(tmp_path: Path) -> None:
    rows = [
        f"https://www.news.co.uk/{i},{86400 * d},{v}"
        for i in range(6)
        for d, v in ((0, 40), (1, 5))
    ]
    rows += [
        "https://orf.at/b,432000,1",
        "not a url,0,1",
        "https://a.org/,0,x",
        "https://a.org/,0,y",
    ]
    (tmp_path / "log.csv").write_text(GOOD + "\n".join(rows) + "\n")
    run = rank(tmp_path, "log.csv", "-o", "out.csv", "--min-pages", "1", "--keep-alive-at-start")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "bad rows skipped: bad_clicks 2, bad_url 1" in run.stdout
    assert "Bad page-view row skipped" in run.stderr and "line 17" in run.stderr
    assert (tmp_path / "out.csv").read_text().splitlines()[1].startswith("www.news.co.uk,1.0")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--top", "0"], "--top (0) must be at least 1"),
        (["--quantile", "1.5"], "--quantile (1.5) must lie strictly between 0 and 1"),
        (["--alpha", "0.7", "--beta", "0.7"], "must be >= 0 and sum to 1"),
        (["--days", "-1"], "--days (-1.0) must be"),
        (["--weights", "1,2"], "--weights ('1,2') must be three numbers"),
        (["--labels", "labels.csv"], "line 2: temporal is 'maybe'"),
    ],
)
def test_bad_options_fail_with_a_clear_message(tmp_path: Path, args: list[str], message: str):
    (tmp_path / "log.csv").write_text(GOOD)
    (tmp_path / "labels.csv").write_text("site,temporal\norf.at,maybe\n")
    run = rank(tmp_path, "log.csv", "-o", "out.csv", *args)
    assert run.returncode != 0
    assert message in run.stderr
    assert not (tmp_path / "out.csv").exists()


def test_labels_name_sites_by_any_host_and_must_say_yes_or_no(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("# hand-made\nsite,temporal\nwww.bbc.co.uk,true\nhttps://news.orf.at/x,0\n")
    assert _read_labels(str(path), "domain") == {"bbc.co.uk": True, "orf.at": False}
    assert _read_labels(str(path)) == {"www.bbc.co.uk": True, "news.orf.at": False}
    assert _read_labels(str(path), "folder") == {"www.bbc.co.uk/": True, "news.orf.at/": False}
    path.write_text("bbc.co.uk,1\nnews.bbc.co.uk,no\n")
    with pytest.raises(UsageError, match=r"line 2: bbc\.co\.uk labelled both ways"):
        _read_labels(str(path), "domain")
    assert _read_labels(str(path)) == {"bbc.co.uk": True, "news.bbc.co.uk": False}


def test_a_missing_or_unusable_log_fails(tmp_path: Path) -> None:
    missing = rank(tmp_path, "nope.csv", "-o", "out.csv")
    assert missing.returncode != 0 and "is not a file" in missing.stderr
    (tmp_path / "log.csv").write_text("page,when,views\nhttps://a.org/,0,1\n")
    useless = rank(tmp_path, "log.csv", "-o", "out.csv")
    assert useless.returncode != 0 and "no usable page-view rows (bad rows: csv_columns 1)" in (
        useless.stderr
    )


# echo-discover's host list -----------------------------------------------------------------


def test_discover_reads_the_rank_sites_csv_and_plain_host_lists(tmp_path: Path) -> None:
    ranked = tmp_path / "ranked.csv"
    ranked.write_text("\ufeffsite,score,pages\nnews.example.org,0.9,10\n127.0.0.1,0.8,4\n")
    assert _read_hosts(str(ranked)) == ["news.example.org", "127.0.0.1"]
    moved = tmp_path / "moved.csv"  # the site column need not come first
    moved.write_text("score,site\n0.9,a.example.org\n\n0.8,b.example.org\n")
    assert _read_hosts(str(moved)) == ["a.example.org", "b.example.org"]
    plain = tmp_path / "hosts.txt"
    plain.write_text("# my hosts\na.example.org\n127.0.0.1  # local\n")
    assert [h.strip() for h in _read_hosts(str(plain)) if h.strip()] == [
        "a.example.org",
        "127.0.0.1",
    ]
    assert _read_hosts("a.example.org,127.0.0.1") == ["a.example.org", "127.0.0.1"]
