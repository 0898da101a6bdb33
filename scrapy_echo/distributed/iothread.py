"""One thread per worker for every blocking Redis call: calls run one at a time, in order, and
the reactor never waits on the network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool

T = TypeVar("T")


class RedisThread:
    def __init__(self) -> None:
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name="echo-redis")

    def start(self) -> None:
        self._pool.start()

    def stop(self) -> None:
        self._pool.stop()

    def run(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> Deferred[T]:
        # Imported here: importing it at module level would install a reactor of its own.
        from twisted.internet import reactor

        return deferToThreadPool(reactor, self._pool, call, *args, **kwargs)
