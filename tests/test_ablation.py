"""The ablation: ECHO-newpages with its additions switched off, by name, and the ``sim ablate``
command's table of them over repeated replays."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_echo.model.decisions.ablation import ADDITIONS, without
from scrapy_echo.model.decisions.echo_newpages import EchoNewPages
from scrapy_echo.model.decisions.registry import make_policy


def test_each_addition_is_a_flag_the_default_has_on() -> None:
    for flag in ADDITIONS:
        assert getattr(EchoNewPages, flag) is True, flag
        policy = make_policy(f"echo-newpages-without-{flag}")
        assert isinstance(policy, EchoNewPages) and getattr(policy, flag) is False
        assert policy.name == f"echo-newpages-without-{flag}"
        assert [f for f in ADDITIONS if f != flag and not getattr(policy, f)] == []
    both = make_policy("echo-newpages-without-learned_priors+uses_overlaps")
    assert not both.learned_priors and not both.uses_overlaps and both.pools_sites
    assert not any(getattr(without("all"), flag) for flag in ADDITIONS)


@pytest.mark.parametrize("name", ["echo-newpages-without-nope", "echo-newpages-without-"])
def test_an_unknown_addition_is_a_clear_error(name: str) -> None:
    with pytest.raises(ValueError, match="known: learned_priors"):
        make_policy(name)


@pytest.mark.slow
def test_sim_ablate_prints_each_variant_against_the_default(tmp_path: Path) -> None:
    trace, out = tmp_path / "trace", tmp_path / "out"
    python = [sys.executable, "-m", "scrapy_echo.sim"]
    synth = ["synth", "--out", str(trace), "--sources", "30", "--days", "2"]
    subprocess.run([*python, *synth], check=True, capture_output=True)
    run = subprocess.run(
        [*python, "ablate", "--trace", str(trace), "--out", str(out), "--rates", "0.01",
         "--repeats", "2", "--window", "21600"],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    rows = [line for line in run.stdout.splitlines() if line.startswith("| echo-")]
    names = [row.split(" | ")[0][2:] for row in rows]
    assert names == [
        "echo-newpages", "echo-paper",
        *(f"echo-newpages-without-{flag}" for flag in ADDITIONS), "echo-newpages-without-all",
    ]  # fmt: skip
    assert "(+0.00 ± 0.00)" in rows[0]  # the default against itself
    saved = json.loads((out / "ablation.json").read_text())
    assert len(saved) == 2 * len(names)  # two replays each, at two re-solve periods
    assert sorted({round(r["resolve_interval"]) for r in saved}) == [1440, 2160]


@pytest.mark.slow
def test_sim_ablate_in_processes_gives_the_serial_table(tmp_path: Path) -> None:
    """``--jobs 2`` replays in two processes; the table and the saved replays are the serial
    run's, in the same order (the table pairs replays by re-solve period)."""
    trace = tmp_path / "trace"
    python = [sys.executable, "-m", "scrapy_echo.sim"]
    synth = ["synth", "--out", str(trace), "--sources", "20", "--days", "1"]
    subprocess.run([*python, *synth], check=True, capture_output=True)
    tables, saved = [], []
    for jobs in ("1", "2"):
        out = tmp_path / f"out{jobs}"
        run = subprocess.run(
            [*python, "ablate", "--trace", str(trace), "--out", str(out), "--rates", "0.01,0.02",
             "--repeats", "2", "--window", "21600", "--additions", "learned_priors",
             "--jobs", jobs],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        tables.append([line for line in run.stdout.splitlines() if line.startswith("| ")])
        saved.append(json.loads((out / "ablation.json").read_text()))
    names = [row.split(" | ")[0][2:] for row in tables[0][1:]]
    assert names == [
        "echo-newpages", "echo-paper", "echo-newpages-without-learned_priors",
        "echo-newpages-without-all",
    ]  # fmt: skip
    assert tables[1] == tables[0]
    assert saved[1] == saved[0] and len(saved[0]) == 2 * 2 * len(names)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--additions", "learned_priors,nope"], "--additions: unknown addition 'nope'"),
        (["--jobs", "0"], "--jobs must be at least 1"),
    ],
)
def test_sim_ablate_refuses_bad_options(tmp_path: Path, option: list[str], message: str) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "scrapy_echo.sim", "ablate", "--trace", "synthetic",
         "--out", str(tmp_path), *option],
        capture_output=True, text=True,
    )  # fmt: skip
    assert run.returncode == 2 and message in run.stderr, run.stderr
