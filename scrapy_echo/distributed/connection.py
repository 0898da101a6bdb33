"""The Redis client every worker builds from its settings."""

from __future__ import annotations

from typing import Any

from redis.backoff import NoBackoff
from redis.retry import Retry
from scrapy.settings import BaseSettings
from scrapy_redis.connection import get_redis_from_settings  # type: ignore[import-untyped]

# Connection defaults that let a dead server be noticed in seconds (scrapy-redis waits 30 s),
# with no retries inside redis-py: the round trip retries itself, with back-off and a log
# line, and never resends half of a batch. REDIS_PARAMS overrides them.
_REDIS_PARAMS = {
    "socket_timeout": 5,
    "socket_connect_timeout": 5,
    "health_check_interval": 10,
    "retry_on_timeout": False,
    "retry": Retry(NoBackoff(), 0),
}


def redis_client(settings: BaseSettings) -> Any:
    """A client from ``REDIS_URL`` / ``REDIS_PARAMS`` (scrapy-redis's helper), with replies
    as bytes whatever ``REDIS_DECODE_RESPONSES`` says: payloads are decoded here."""
    params = {**_REDIS_PARAMS, **settings.getdict("REDIS_PARAMS")}
    params.pop("decode_responses", None)
    names = ("REDIS_URL", "REDIS_HOST", "REDIS_PORT", "REDIS_DB", "REDIS_ENCODING")
    own = BaseSettings({name: settings.get(name) for name in names if settings.get(name)})
    own.set("REDIS_PARAMS", params)
    return get_redis_from_settings(own)
