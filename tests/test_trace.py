"""Trace files: round trips, and a clear error for every malformed input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from scrapy_echo.sim.synth import SynthParams, synthesize
from scrapy_echo.sim.trace import TraceError, load_trace, write_trace

GOOD = {
    "sources.csv": "source_id,url\ns1,https://a.example/\ns2,https://b.example/\n",
    "links.csv": (
        "source_id,page_url,appeared,disappeared\n"
        "s1,https://a.example/1,10,\n"
        "s1,https://a.example/2,20,500\n"
        "s2,https://a.example/1,15,30\n"
    ),
    "clicks.csv": (
        "page_url,ts,clicks\n"
        "https://a.example/1,40,3\n"
        "https://a.example/2,25,1\n"
        "https://nowhere.example/x,30,9\n"
    ),
    "meta.json": json.dumps({"duration": 1000, "warmup": 100, "name": "tiny"}),
}


def make(tmp_path: Path, **changes: str | None) -> Path:
    root = tmp_path / "trace"
    root.mkdir()
    for name, text in {**GOOD, **changes}.items():
        if text is not None:
            (root / name).write_text(text, encoding="utf-8")
    return root


def test_loads_a_small_trace(tmp_path: Path) -> None:
    trace = load_trace(make(tmp_path))
    assert (trace.n_sources, trace.n_pages, trace.duration, trace.warmup) == (2, 2, 1000, 100)
    assert trace.page_created.tolist() == [10.0, 20.0]  # first appearance by default
    assert np.isinf(trace.link_disappeared[0]) and trace.link_disappeared[1] == 500
    assert trace.click_ts.tolist() == [25.0, 40.0]  # sorted by time
    assert trace.skipped_clicks == 1  # a page no link points to


def test_round_trip_plain_and_gzip(tmp_path: Path) -> None:
    trace = synthesize(SynthParams(sources=40, days=2, warmup_days=1, seed=5))
    for compress in (False, True):
        root = tmp_path / f"out{compress}"
        write_trace(trace, root, compress=compress)
        back = load_trace(root)
        for name in ("page_created", "link_appeared", "link_disappeared", "click_ts"):
            assert np.array_equal(getattr(back, name), getattr(trace, name)), name
        for name in ("link_source", "link_page", "click_page", "click_count"):
            assert np.array_equal(getattr(back, name), getattr(trace, name)), name
        assert back.page_urls == trace.page_urls and back.source_urls == trace.source_urls
        assert (back.duration, back.warmup) == (trace.duration, trace.warmup)


def test_signals_are_optional_sorted_and_round_trip(tmp_path: Path) -> None:
    assert load_trace(make(tmp_path)).signal_ts.size == 0  # no signals.csv: none
    (tmp_path / "b").mkdir()
    trace = load_trace(make(tmp_path / "b", **{"signals.csv": "source_id,ts\ns2,30\ns1,5\n"}))
    assert trace.signal_ts.tolist() == [5.0, 30.0] and trace.signal_source.tolist() == [0, 1]
    noisy = synthesize(SynthParams(sources=40, days=2, warmup_days=1, signal_recall=0.5))
    for compress in (False, True):
        root = tmp_path / f"signals{compress}"
        write_trace(noisy, root, compress=compress)
        back = load_trace(root)
        assert np.array_equal(back.signal_ts, noisy.signal_ts)
        assert np.array_equal(back.signal_source, noisy.signal_source)
    quiet = synthesize(SynthParams(sources=40, days=2, warmup_days=1))
    write_trace(quiet, root)  # over the one with signals: its signals.csv goes
    assert load_trace(root).signal_ts.size == 0


def test_pages_csv_sets_creation_times(tmp_path: Path) -> None:
    root = make(tmp_path, **{"pages.csv": "page_url,created\nhttps://a.example/1,5\n"})
    assert load_trace(root).page_created.tolist() == [5.0, 20.0]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"links.csv": "source_id,page_url,appeared\ns1,u,1\n"},
            "links.csv line 1: missing column",
        ),
        (
            {"links.csv": "source_id,page_url,appeared,disappeared\ns1,u,abc,\n"},
            "links.csv line 2, column 'appeared': 'abc' is not a number",
        ),
        (
            {"links.csv": "source_id,page_url,appeared,disappeared\ns1,u,1,\ns1,v,-5,\n"},
            "links.csv line 3, column 'appeared': -5.0 is negative",
        ),
        (
            {"links.csv": "source_id,page_url,appeared,disappeared\ns1,u,50,40\n"},
            "links.csv line 2, column 'disappeared': 40.0 is before appeared",
        ),
        (
            {"links.csv": "source_id,page_url,appeared,disappeared\ns1,u,2000,\n"},
            "links.csv line 2, column 'appeared': 2000.0 is after the end",
        ),
        (
            {"links.csv": "source_id,page_url,appeared,disappeared\ns9,u,1,\n"},
            "links.csv line 2, column 'source_id': 's9' is not in sources.csv",
        ),
        (
            {"links.csv": "source_id,page_url,appeared,disappeared\ns1,u,nan,\n"},
            "column 'appeared': 'nan' is not a finite number",
        ),
        (
            {"sources.csv": "source_id,url\ns1,a\ns1,b\n"},
            "sources.csv line 3, column 'source_id': 's1' is listed twice",
        ),
        (
            {"clicks.csv": "page_url,ts,clicks\nhttps://a.example/1,40,0\n"},
            "clicks.csv line 2, column 'clicks': 0.0 must be > 0",
        ),
        (
            {"clicks.csv": "page_url,ts,clicks\nhttps://a.example/1,9999999,1\n"},
            "clicks.csv line 2, column 'ts': 9999999.0 is more than a week after the end",
        ),
        (
            {"pages.csv": "page_url,created\nhttps://a.example/2,25\n"},
            "pages.csv line 2, column 'created': 25.0 is after the page's first link",
        ),
        (
            {"signals.csv": "source_id,ts\ns9,5\n"},
            "signals.csv line 2, column 'source_id': 's9' is not in sources.csv",
        ),
        (
            {"signals.csv": "source_id,ts\ns1,5\ns2,1001\n"},
            "signals.csv line 3, column 'ts': 1001.0 is after the end",
        ),
        ({"signals.csv": "source_id,ts\ns1,-1\n"}, "signals.csv line 2, column 'ts'"),
        ({"signals.csv": "source_id,when\ns1,1\n"}, "signals.csv"),
        ({"meta.json": "[]"}, "meta.json: must be a JSON object"),
        ({"meta.json": "{}"}, "'duration' must be a number of seconds > 0"),
        ({"meta.json": '{"duration": 10, "warmup": 20}'}, "'warmup' must be in"),
        ({"meta.json": "{"}, "meta.json line 1"),
        ({"clicks.csv": None}, "missing clicks.csv"),
        ({"meta.json": None}, "missing meta.json"),
    ],
)
def test_errors_name_file_line_and_column(tmp_path: Path, changes, message) -> None:
    with pytest.raises(TraceError) as caught:
        load_trace(make(tmp_path, **changes))
    assert message in str(caught.value)


def test_plain_and_gzip_copies_together_are_an_error(tmp_path: Path) -> None:
    root = make(tmp_path)
    with gzip.open(root / "links.csv.gz", "wt", encoding="utf-8") as out:
        out.write(GOOD["links.csv"])
    with pytest.raises(TraceError, match=r"both links\.csv and links\.csv\.gz"):
        load_trace(root)


def test_gzip_only_loads(tmp_path: Path) -> None:
    root = make(tmp_path)
    with gzip.open(root / "links.csv.gz", "wt", encoding="utf-8") as out:
        out.write(GOOD["links.csv"])
    (root / "links.csv").unlink()
    assert load_trace(root).n_pages == 2
