"""The docs: every ECHO_* setting the code reads is in the reference, and they build with no
warnings (as in ``tox -e docs``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_echo.crawler.settings import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent


def settings_read_by_the_code() -> set[str]:
    names = set(DEFAULTS)
    for path in (ROOT / "scrapy_echo").rglob("*.py"):
        names |= set(re.findall(r"\bECHO_[A-Z_]+[A-Z]\b", path.read_text(encoding="utf-8")))
    return names


def test_every_setting_is_in_the_reference() -> None:
    reference = (ROOT / "docs" / "reference.rst").read_text(encoding="utf-8")
    names = settings_read_by_the_code()
    assert len(names) > 25
    missing = sorted(name for name in names if f"``{name}``" not in reference)
    assert missing == [], f"settings missing from docs/reference.rst: {missing}"


def test_every_setting_has_a_default() -> None:
    # A name in the code but not in DEFAULTS would be read nowhere, or typo'd somewhere.
    assert settings_read_by_the_code() == set(DEFAULTS)


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(ROOT / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
