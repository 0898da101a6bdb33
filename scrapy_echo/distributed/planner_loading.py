"""A planner taking over: the saved state read, rebuilt and planned off the reactor.

Seconds for millions of links, so :meth:`.Planner.load` runs this on a thread while the
planner's round trips only renew its lease; :meth:`.Planner.take_over` installs the result on
the reactor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy_echo.core import snapshot as snapshots
from scrapy_echo.core.codec import CodecError
from scrapy_echo.core.collector import collector_paused
from scrapy_echo.core.crawl import CrawlCore
from scrapy_echo.core.hosts import SourceHosts
from scrapy_echo.distributed.dedup import EventDedup
from scrapy_echo.model.decisions.registry import make_policy

if TYPE_CHECKING:
    from scrapy import Request

    from scrapy_echo.core.view import CrawlView
    from scrapy_echo.crawler.settings import EchoConfig
    from scrapy_echo.model.decisions.policies import Policy
    from scrapy_echo.model.intervals.plan import Plan

logger = logging.getLogger(__name__)


@dataclass
class Loaded:
    """A saved state read and rebuilt off the reactor (:meth:`Planner.load`)."""

    ticket: int
    state: CrawlView | None = None  # None: none saved, or unreadable (then ``error``)
    # A fresh policy, with what the saved one kept (a BFS cycle, the exploration bandit).
    policy: Policy | None = None
    hosts: SourceHosts | None = None  # the state's sources' hosts, looked up
    last_event: str = "0-0"
    feeds: Any = None
    dedup: EventDedup = field(default_factory=EventDedup)
    refused: int = 0
    error: str | None = None  # unreadable (set aside in Redis, the crawl starts afresh)
    newer: str | None = None  # written by a newer build: left for a worker that reads it
    dedup_error: str | None = None
    # The state's first plan, made on the loading thread too (with the budget it planned).
    plan: Plan | None = None
    budget: float = 0.0


def rebuild(
    loaded: tuple[bytes | list[bytes], str] | None,
    ticket: int,
    config: EchoConfig,
    decode: Callable[[bytes | str], Request],
    clock: Callable[[], float],
    budget: float,
    capacity: Callable[[str], float] | None,
) -> Loaded:
    """On any thread: the saved state ``loaded`` (``None``: none saved) rebuilt, and its
    first plan made with ``budget`` and ``capacity`` (those of when loading began)."""
    out = Loaded(ticket)
    if loaded is None:
        return out
    data, event = loaded
    try:
        with collector_paused(keep=True):  # millions of objects made, none to collect
            saved = snapshots.read(data)
            policy = make_policy(config.policy)
            out.state, _, out.refused = snapshots.restore(config, saved, decode, policy)
            out.hosts = SourceHosts()
            out.hosts.sites(out.state.sources)  # (hosts and sites: the plan needs both)
        out.policy = policy
    except snapshots.NewerVersion as exc:
        out.newer = str(exc)
        return out
    except CodecError as exc:
        out.error = str(exc)
        return out
    except (RecursionError, MemoryError, ArithmeticError, LookupError, TypeError) as exc:
        # (A state nested or shaped beyond what the decoder checks: unreadable as well.)
        out.error = f"{type(exc).__name__}: {exc!s:.200}"
        return out
    _first_plan(out, config, clock(), budget, capacity)
    out.last_event, out.feeds = event, saved.get("feeds")
    if "events_applied" in saved:
        try:
            out.dedup = EventDedup.from_data(saved["events_applied"])
        except ValueError as exc:
            out.dedup_error = str(exc)
    return out


def _first_plan(
    out: Loaded,
    config: EchoConfig,
    now: float,
    budget: float,
    capacity: Callable[[str], float] | None,
) -> None:
    """The loaded state's first re-solve (seconds at 100 k sources, with a click fit), on a
    core of its own until :meth:`.Planner.take_over` installs the state. If it fails,
    ``take_over`` re-solves on the reactor, as without it."""
    assert out.state is not None and out.policy is not None
    core = CrawlCore(config, out.policy)
    core.reset(out.state, out.policy, out.hosts)
    try:
        out.plan, out.budget = core.replan(now, budget, capacity), budget
    except Exception:
        logger.exception("ECHO could not plan the saved state while loading it; "
                         "planning it again once installed")  # fmt: skip


__all__ = ["Loaded", "rebuild"]
