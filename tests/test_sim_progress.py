"""The simulator's progress: a bar on a terminal, one final line per replay in a log or a pipe."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_echo.sim.cli_output import Progress


@pytest.mark.slow  # (over 6 s: the README's quick command leaves it out)
def test_a_redirected_run_writes_one_final_line_per_replay(tmp_path: Path) -> None:
    python = [sys.executable, "-m", "scrapy_echo.sim"]
    trace = tmp_path / "trace"
    synth = ["synth", "--out", str(trace), "--sources", "20", "--days", "2"]
    subprocess.run([*python, *synth], check=True, capture_output=True)
    run = [*python, "run", "--trace", str(trace), "--policies", "echo-paper,bfs",
           "--rates", "0.01,0.02", "--out", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(run, check=True, capture_output=True, text=True)
    assert "\r" not in done.stderr
    finals = [line for line in done.stderr.splitlines() if " done in " in line]
    assert len(finals) == 4, done.stderr  # two policies at two rates
    assert {line.split()[0] for line in finals} == {"echo-paper", "bfs"}


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_a_bar_then_the_final_line(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = Terminal()
    monkeypatch.setattr(sys, "stderr", screen)
    monkeypatch.setattr(Progress, "DELAY", 0.0)
    bar = Progress("echo-paper @ 0.01/s")
    for k in range(1, 11):
        bar(k / 10)
    bar.done(1.25)
    written = screen.getvalue()
    assert "\r" in written and "% 00:00<" in written  # the bar, drawn in place
    assert written.endswith("echo-paper @ 0.01/s          done in 1.2 s\n")
