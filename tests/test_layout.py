"""The package's layout keeps its layers (docs/architecture.rst): the state has one writer,
the model is math only, the core does no I/O, names mean one thing, and the code cites papers
by their authors."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import scrapy_echo

PACKAGE = Path(scrapy_echo.__file__).parent
# The settings paths users write (``scrapy_echo.scheduler.EchoScheduler``, ...): re-exports of
# the classes in ``crawler/``, so their names stand twice with one meaning.
PUBLIC_PATHS = {
    "scheduler",
    "dupefilter",
    "downloadermw",
    "spidermw",
    "extension",
    "signals",
    "metrics",
}


def modules() -> dict[str, ast.Module]:
    return {
        str(path.relative_to(PACKAGE)): ast.parse(path.read_text(), str(path))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def imported(tree: ast.Module) -> list[tuple[str, str | None]]:
    """Every ``(module, name)`` a file imports (``name`` None for ``import module``),
    ``TYPE_CHECKING`` imports included."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def test_only_the_core_imports_the_state_class() -> None:
    outside = {
        path: [f"{m}.{n}" for m, n in imported(tree) if reaches_state_class(m, n)]
        for path, tree in modules().items()
        if not path.startswith("core/")
    }
    assert {path: found for path, found in outside.items() if found} == {}


def reaches_state_class(module: str, name: str | None) -> bool:
    if module == "scrapy_echo.core.state":
        return name in (None, "*", "CrawlState")
    return (module, name) in {("scrapy_echo.core", "state"), ("scrapy_echo.core", "CrawlState")}


def test_the_model_imports_numpy_and_the_standard_library_only() -> None:
    allowed = set(sys.stdlib_module_names) | {"numpy", "__future__"}
    foreign = {
        path: sorted({m for m, _ in imported(tree) if not model_may_import(m, allowed)})
        for path, tree in modules().items()
        if path.startswith("model/")
    }
    assert {path: found for path, found in foreign.items() if found} == {}


def model_may_import(module: str, allowed: set[str]) -> bool:
    return module.startswith("scrapy_echo.model") or module.split(".")[0] in allowed


def test_the_core_does_no_io_of_its_own() -> None:
    io = {"scrapy", "twisted", "redis", "scrapy_redis", "lxml", "socket", "requests"}
    glue = ("scrapy_echo.crawler", "scrapy_echo.distributed", "scrapy_echo.sim")
    found = {
        path: sorted({m for m, _ in imported(tree) if m.split(".")[0] in io or m.startswith(glue)})
        for path, tree in modules().items()
        if path.startswith("core/")
    }
    assert {path: names for path, names in found.items() if names} == {}


@pytest.mark.slow  # (over 6 s: the README's quick command leaves it out)
def test_no_two_modules_share_a_name_with_different_meanings() -> None:
    by_name: dict[str, list[str]] = {}
    for path in modules():
        name = Path(path).stem
        if name not in ("__init__", "__main__"):
            by_name.setdefault(name, []).append(path)
    repeated = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    # The one-process scheduler and the fleet's are both Scrapy schedulers (the fleet's
    # builds on the other); the public settings paths re-export crawler/'s classes.
    assert set(repeated) <= PUBLIC_PATHS
    for name in repeated:
        tree = modules()[f"{name}.py"]
        body = [n for n in tree.body if not isinstance(n, ast.Expr)]  # (its docstring)
        assert all(isinstance(n, ast.ImportFrom | ast.Assign) for n in body), name


def test_the_code_names_papers_not_seed_files_or_issue_numbers() -> None:
    pattern = re.compile(r"\b[Ss]eeds? ?0\d\d\b|\b[Ii]ssues? #?\d+\b")
    found = [
        f"{path.relative_to(PACKAGE)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_the_public_names_resolve() -> None:
    for name in scrapy_echo.__all__:
        assert getattr(scrapy_echo, name) is not None
    from scrapy_echo.scheduler import EchoScheduler

    assert EchoScheduler is scrapy_echo.EchoScheduler
