"""Where the ``scrapy echo-*`` commands find a crawl's saved state: a JOBDIR, or Redis."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import UsageError

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings

    from scrapy_echo.distributed.store import RedisStore


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobdir", help="the crawl's JOBDIR")
    parser.add_argument("--redis", help="REDIS_URL of a distributed crawl")
    parser.add_argument("--spider", help="the spider's name (with --redis)")
    parser.add_argument("--prefix", default=None, help="ECHO_REDIS_KEY_PREFIX (echo)")


def check(opts: argparse.Namespace) -> None:
    if bool(opts.jobdir) == bool(opts.redis):
        raise UsageError("give one of --jobdir DIR or --redis URL (with --spider NAME)")
    if opts.redis and not opts.spider:
        raise UsageError("--redis needs --spider NAME")


def load(opts: argparse.Namespace, settings: BaseSettings) -> dict[str, Any]:
    """The saved snapshot (:func:`scrapy_echo.core.snapshot.read`); ``UsageError`` if none."""
    check(opts)
    from scrapy_echo.core import snapshot
    from scrapy_echo.core.codec import CodecError

    if opts.jobdir:
        from scrapy_echo.crawler.jobdir import FILE_NAME

        path = Path(opts.jobdir) / FILE_NAME
        if not path.exists():
            raise UsageError(f"no ECHO state in {opts.jobdir} (no {FILE_NAME})")
        where, data = str(path), path.read_bytes()
    else:
        store = redis_store(opts, settings)
        loaded = store.load_snapshot()
        if loaded is None:
            raise UsageError(f"no ECHO state in Redis under {store.prefix}")
        where, data = f"Redis under {store.prefix}", loaded[0]
    try:
        return snapshot.read(data)
    except CodecError as exc:
        raise UsageError(f"the ECHO state in {where} is not readable: {exc}") from None


def redis_store(opts: argparse.Namespace, settings: BaseSettings) -> RedisStore:
    from scrapy.settings import BaseSettings as Settings

    from scrapy_echo.distributed.connection import redis_client
    from scrapy_echo.distributed.store import RedisStore, key_base

    prefix = opts.prefix or settings.get("ECHO_REDIS_KEY_PREFIX", "echo")
    client = redis_client(Settings({"REDIS_URL": opts.redis}))
    return RedisStore(client, key_base(prefix, opts.spider))
