"""What a worker checks of Redis before its first round trip, and refuses or warns about.

Refused (the worker stops with the reason): a Redis older than 6.2 (the scripts trim streams
by ``MINID``); ``maxmemory-policy`` ``allkeys-*``, which may evict any key, the queue and the
saved state included; keys that hold another project's or spider class's crawl under the same
prefix and spider name (two crawls would silently merge). Warned about: no persistence (a
restart loses the queue and the saved state: the planner then saves again what it holds, but
a restart with no planner alive starts the crawl over), ``volatile-*`` eviction (the solver
lease may be evicted: a needless change of planner), and settings it cannot read (``CONFIG``
renamed or disabled, as managed services do). docs/distributed.rst, "Redis settings".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from scrapy_echo.distributed.store import RedisStore

logger = logging.getLogger(__name__)

MIN_VERSION = (6, 2)


@dataclass
class Verdict:
    refused: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def log(self) -> None:
        """Every note, warning and refusal in the crawl's log, each at its level."""
        for note in self.notes:
            logger.info("ECHO: %s", note)
        for warning in self.warnings:
            logger.warning("ECHO: %s", warning)
        for reason in self.refused:
            logger.error("ECHO refuses to run on this Redis: %s", reason)


def crawl_of(settings: BaseSettings, spider: object) -> str:
    """What names a crawl: the project (``BOT_NAME``) and the spider's class."""
    kind = type(spider)
    return f"{settings.get('BOT_NAME')}/{kind.__module__}.{kind.__qualname__}"


def check(store: RedisStore, who: str, now_ms: float) -> Verdict:
    """Blocking: run on the Redis thread. ``who`` names the project and spider class."""
    verdict = Verdict()
    _server(store.client, verdict)
    held, created, fresh = store.claim(who)
    if held != who:
        verdict.refused.append(
            f"keys {store.prefix} hold another crawl ({held!r}, not {who!r}): set "
            "ECHO_REDIS_KEY_PREFIX to keep the two apart, or delete those keys to start over"
        )
    elif not fresh:
        age = max(0.0, now_ms - created) / 3.6e6
        verdict.notes.append(f"joining the crawl under {store.prefix}, started {age:.1f} h ago")
    return verdict


def _server(client: Any, verdict: Verdict) -> None:
    version = str(client.info("server").get("redis_version", "0"))
    numbers = tuple(int(part) for part in version.split(".")[:2] if part.isdigit())
    if numbers < MIN_VERSION:
        verdict.refused.append(f"Redis {version} is older than 6.2, which the scripts need")
    try:
        config = client.config_get("maxmemory-policy", "appendonly", "save", "maxmemory")
    except redis.ResponseError as exc:  # CONFIG renamed or disabled
        verdict.warnings.append(f"cannot read Redis's configuration ({exc}): persistence "
                                "and eviction unchecked")  # fmt: skip
        return
    policy = _text(config.get("maxmemory-policy") or config.get(b"maxmemory-policy"))
    if policy.startswith("allkeys-"):
        verdict.refused.append(
            f"maxmemory-policy is {policy}: Redis may evict the crawl's queue and saved "
            "state; use noeviction"
        )
    elif policy.startswith("volatile-") and _text(config.get("maxmemory") or b"0") != "0":
        verdict.warnings.append(
            f"maxmemory-policy is {policy}: evicting the solver lease changes planner "
            "needlessly; noeviction is safer"
        )
    aof = _text(config.get("appendonly") or config.get(b"appendonly"))
    rdb = _text(config.get("save") or config.get(b"save"))
    if aof != "yes" and not rdb.strip():
        verdict.warnings.append(
            'Redis persists nothing (appendonly no, save ""): a restart loses the queue and '
            "the saved state; use appendonly yes"
        )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value or "")
