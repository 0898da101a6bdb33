"""A transaction of Redis commands and Lua scripts, in one round trip.

redis-py's pipeline makes sure its scripts are loaded by asking Redis first (``SCRIPT
EXISTS``): a second round trip for every transaction, the larger part of a worker's lease of
one request. Here scripts go by their digest alone. Redis forgets its scripts only when it
restarts (or on ``SCRIPT FLUSH``); then each script of that transaction fails with
``NOSCRIPT`` while the other commands commit, and each is run again on its own, in order,
after loading it: as if it had run in the transaction, just after the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import redis
from redis.exceptions import NoScriptError

if TYPE_CHECKING:
    from redis.commands.core import Script


class ScriptBatch:
    def __init__(self, client: redis.Redis) -> None:
        self.pipe = client.pipeline(transaction=True)  # plain commands go here directly
        self._scripts: dict[int, tuple[Script, list[str], list[Any]]] = {}

    def run(self, script: Script, keys: list[str], args: list[Any]) -> None:
        """Queue ``script`` (registered on the batch's client) with its keys and arguments."""
        self._scripts[len(self.pipe)] = (script, keys, args)
        self.pipe.evalsha(script.sha, len(keys), *keys, *args)

    def execute(self, *, raise_on_error: bool = True) -> list[Any]:
        """One answer per command queued; with ``raise_on_error=False`` a command that failed
        gives its exception (the others took effect all the same)."""
        if len(self.pipe) == 1 and 0 in self._scripts:
            # One script is atomic on its own: no MULTI/EXEC round of replies to parse.
            script, keys, args = self._scripts[0]
            self.pipe.reset()
            try:
                return [script(keys, args)]  # (loads it if Redis forgot it)
            except redis.ResponseError as exc:
                if raise_on_error:
                    raise
                return [exc]
        answers: list[Any] = self.pipe.execute(raise_on_error=False)
        for index, (script, keys, args) in self._scripts.items():
            if isinstance(answers[index], NoScriptError):
                try:
                    answers[index] = script(keys, args)  # (loads it, then runs it)
                except redis.RedisError as exc:
                    answers[index] = exc
        failed = [answer for answer in answers if isinstance(answer, Exception)]
        if raise_on_error and failed:
            raise failed[0]
        return answers
