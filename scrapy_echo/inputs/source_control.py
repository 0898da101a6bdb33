"""Sources added and removed while a crawl runs: the sources file, re-read when it changes, and
the commands ``scrapy echo-sources`` leaves in a JOBDIR (docs/sources.rst, "Managing sources").

Both become :class:`~scrapy_echo.core.events.SourceAdded` and
:class:`~scrapy_echo.core.events.SourceRemoved` events, which the crawl applies as it applies
what it observes (in distributed mode they travel to the planner like any event).

The JOBDIR command file is appended to under an exclusive ``flock`` and taken by renaming it
first, then reading it under the same lock: a command written while the crawl reads is in
the next file, never lost, never applied twice.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scrapy.exceptions import NotConfigured

from scrapy_echo.core.events import SourceAdded, SourceRemoved
from scrapy_echo.crawler.settings import read_sources

logger = logging.getLogger(__name__)

COMMANDS_FILE = "echo-sources.jsonl"
SOURCES_POLL = 5.0  # seconds between looks at the sources file and the JOBDIR's commands
OPERATIONS = ("add", "remove")
SourceChange = SourceAdded | SourceRemoved


@dataclass
class SourceChanges:
    """What one poll found: events to apply and commands that could not be read."""

    events: list[SourceChange]
    bad: int = 0


class SourcesFile:
    """``ECHO_SOURCES`` given as a file: the sources it gained and lost since last read."""

    def __init__(self, path: Path, urls: tuple[str, ...]) -> None:
        self.path = path
        self.urls = set(urls)
        self._stamp = self._read_stamp()

    def changes(self) -> list[SourceChange]:
        """Events for what changed since the last read; ``ValueError`` (the file's error,
        its line named) if it no longer reads, and then nothing changes."""
        stamp = self._read_stamp()
        if stamp == self._stamp:
            return []
        self._stamp = stamp
        try:
            urls = set(read_sources(self.path))
        except NotConfigured as exc:
            raise ValueError(str(exc)) from None
        added, removed = urls - self.urls, self.urls - urls
        self.urls = urls
        return [SourceAdded(url) for url in sorted(added)] + [
            SourceRemoved(url) for url in sorted(removed)
        ]

    def _read_stamp(self) -> tuple[int, int] | None:
        try:
            info = self.path.stat()
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size


def poll(
    watched: SourcesFile | None, jobdir: Path | None, count: Callable[[str, int], None]
) -> list[SourceChange]:
    """What changed in the sources file ``watched`` and the commands left in ``jobdir``; a
    file that no longer reads and bad command lines are logged and counted (``count(stat,
    n)``), and change nothing."""
    events: list[SourceChange] = []
    if watched is not None:
        try:
            events += watched.changes()
        except ValueError as exc:
            count("echo/sources/file_unreadable", 1)
            logger.error("ECHO sources file not re-read, sources unchanged: %s", exc)
    if jobdir is not None:
        taken = take_commands(jobdir)
        events += taken.events
        if taken.bad:
            count("echo/sources/bad_commands", taken.bad)
            logger.warning("ECHO skipped %d unreadable source commands", taken.bad)
    if events:
        count("echo/sources/changes", len(events))
        logger.info(
            "ECHO sources changed while running: %s",
            ", ".join(f"{type(e).__name__.removeprefix('Source').lower()} {e.url}" for e in events),
        )
    return events


def append_commands(jobdir: Path, operation: str, urls: list[str]) -> None:
    """Leave ``add`` or ``remove`` commands for the crawl using ``jobdir`` (it applies them
    within seconds while it runs, else when it starts)."""
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {OPERATIONS}, got {operation!r}")
    read_sources(list(urls))  # NotConfigured names a URL that is not one
    jobdir.mkdir(parents=True, exist_ok=True)
    with open(jobdir / COMMANDS_FILE, "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.writelines(json.dumps({"op": operation, "url": url}) + "\n" for url in urls)
        handle.flush()
        os.fsync(handle.fileno())


def pending_commands(jobdir: Path) -> list[tuple[str, str]]:
    """The commands not yet applied (for listing), unchecked lines left out."""
    path = jobdir / COMMANDS_FILE
    if not path.exists():
        return []
    return _parse(path.read_text(encoding="utf-8", errors="replace"))[0]


def take_commands(jobdir: Path) -> SourceChanges:
    """The commands left in ``jobdir``, as events, removing them from the file."""
    path = jobdir / COMMANDS_FILE
    taken = path.with_name(f"{COMMANDS_FILE}.taking-{os.getpid()}")
    try:
        os.replace(path, taken)
    except FileNotFoundError:
        if not taken.exists():  # (left by a crash of this process between rename and read)
            return SourceChanges([])
    with open(taken, encoding="utf-8", errors="replace") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # a writer that opened it before the rename is done
        text = handle.read()
    commands, bad = _parse(text)
    taken.unlink()
    events: list[SourceChange] = [
        SourceAdded(url) if operation == "add" else SourceRemoved(url)
        for operation, url in commands
    ]
    return SourceChanges(events, bad)


def _parse(text: str) -> tuple[list[tuple[str, str]], int]:
    commands, bad = [], 0
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            operation, url = row["op"], row["url"]
            if operation not in OPERATIONS:
                raise ValueError(operation)
            read_sources([url])
        except (ValueError, TypeError, KeyError, NotConfigured):
            bad += 1
            continue
        commands.append((str(operation), str(url)))
    return commands, bad


__all__ = [
    "COMMANDS_FILE",
    "SOURCES_POLL",
    "SourceChanges",
    "SourcesFile",
    "append_commands",
    "pending_commands",
    "poll",
    "take_commands",
]
