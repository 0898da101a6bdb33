"""The Redis side of distributed mode: key names and every round trip, one batch each.

All calls here block, so they run on the worker's Redis thread (:mod:`.iothread`), never on
the reactor. Keys are ``<ECHO_REDIS_KEY_PREFIX>:<spider>:<name>``; see :data:`KEY_NAMES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy_echo.distributed import scripts

if TYPE_CHECKING:
    import redis

KEY_NAMES = (
    "queue",  # ECHO's requests, in the order the planner chose them (sorted set)
    "plainq",  # the spider's own requests (sorted set, by time)
    "req",  # request id -> "<lane>|<score>|<json>" (hash)
    "leases",  # "<request id>|<lease number>" -> expiry in ms (sorted set)
    "done",  # ids of pages and filtered requests done -> when (sorted set; the dupefilter)
    "budget",  # the global token bucket (hash)
    "served",  # requests served per lane, for ECHO_PLAIN_SHARE (hash)
    "counters",  # reclaimed, acked, rejected:<kind>, lease_seq, solver_term, dead,
    # malformed (hash)
    "attempts",  # request id -> times leased since queued, until acked (hash)
    "dead",  # request id -> its stored entry, leased too often: set aside, not lost (hash)
    "events",  # observations from every worker, applied by the planner (stream)
    "solver",  # the planner's lease: its token (string with expiry)
    "solver_log",  # "<term> <token> <ms>" per planner lease taken (list)
    "snapshot",  # the planner's state and the last event it includes (hash)
    "sources",  # URLs users push to add sources at run time (list)
    "solves",  # "<term> <ms>" per re-solve, so anyone can check one solver at a time (list)
    "signals",  # change signals users add, fields url and ts (stream; the planner takes them)
)


SIGNALS_PER_ROUND = 1000


def _stream_fields(entries: Any) -> list[dict[bytes, bytes]]:
    """Each stream entry's fields (a script returns them as flat lists); an entry of any
    other shape gives an empty dict, which the intake counts as a row missing its fields."""
    rows: list[dict[bytes, bytes]] = []
    for entry in entries or ():
        flat = entry[1] if isinstance(entry, list) and len(entry) == 2 else None
        if not isinstance(flat, list) or len(flat) % 2:
            rows.append({})
            continue
        rows.append(dict(zip(flat[::2], flat[1::2], strict=True)))
    return rows


@dataclass
class Exchange:
    """What a worker sends and asks for in one round trip."""

    events: list[str] = field(default_factory=list)
    acks: list[str] = field(default_factory=list)
    renew: list[str] = field(default_factory=list)
    plain: list[tuple[str, float, str]] = field(default_factory=list)  # id, score, json
    rejected: list[str] = field(default_factory=list)  # kinds of payloads refused
    want: int = 0

    def put_back(self, batch: Exchange) -> None:
        """What ``batch`` carried (not renewals: they are asked afresh), to go in front of
        what this one holds: sent again, in order."""
        self.events[:0] = batch.events
        self.acks[:0] = batch.acks
        self.plain[:0] = batch.plain
        self.rejected[:0] = batch.rejected


@dataclass
class Reply:
    """What a round trip brought back."""

    leased: list[tuple[str, bytes]] = field(default_factory=list)  # (lease member, payload)
    lost: list[str] = field(default_factory=list)  # renewals refused: leases no longer held
    dead: list[str] = field(default_factory=list)  # request ids set aside in ``dead``
    malformed: int = 0  # stored entries removed, not requests
    # What did not take effect (a command failed inside the transaction, which still
    # committed the rest): to send again, and only that.
    unsent: Exchange = field(default_factory=Exchange)
    errors: list[str] = field(default_factory=list)


class RedisStore:
    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix
        self.keys = {name: f"{prefix}:{name}" for name in KEY_NAMES}
        register = client.register_script
        self._lease = register(scripts.LEASE)
        self._push = register(scripts.PUSH)
        self._ack = register(scripts.ACK)
        self._renew = register(scripts.RENEW)
        self._acquire = register(scripts.ACQUIRE)
        self._renew_solver = register(scripts.RENEW_SOLVER)
        self._release_solver = register(scripts.RELEASE_SOLVER)
        self._save = register(scripts.SAVE_SNAPSHOT)
        self._take_signals = register(scripts.TAKE_SIGNALS)

    def _k(self, *names: str) -> list[str]:
        return [self.keys[name] for name in names]

    # -- every worker ----------------------------------------------------------------------
    def exchange(
        self,
        batch: Exchange,
        *,
        lease_ms: int,
        rate: float,
        burst: float,
        plain_share: float,
        done_ttl_ms: int,
        max_attempts: int,
    ) -> Reply:
        """Send events, acks, lease renewals and plain requests; lease up to ``want``
        requests within the global budget. One transaction: if it raises, nothing of it
        happened (unless the connection broke after the server ran it; then its events
        arrive twice, and the planner drops the second copy by their worker and sequence
        number). If one command fails inside it (a key of the wrong type), the others took
        effect: what it carried is in ``Reply.unsent``, to send again."""
        pipe = self.client.pipeline(transaction=True)
        for event in batch.events:
            pipe.xadd(self.keys["events"], {"d": event})
        parts = ["event"] * len(batch.events)
        if batch.acks:
            self._ack(self._k("leases", "req", "done", "counters", "attempts"),
                      [done_ttl_ms, *batch.acks], client=pipe)  # fmt: skip
            parts.append("acks")
        if batch.renew:
            self._renew(self._k("leases"), [lease_ms, *batch.renew], client=pipe)
            parts.append("renew")
        if batch.plain:
            flat: list[Any] = [""]
            for rid, score, payload in batch.plain:
                flat += [rid, "p", repr(score), payload]
            self._push(self._k("queue", "plainq", "req", "done", "solver"), flat, client=pipe)
            parts.append("plain")
        for kind in batch.rejected:
            pipe.hincrby(self.keys["counters"], f"rejected:{kind}", 1)
            parts.append("rejected")
        if batch.want > 0:
            self._lease(
                self._k("queue", "plainq", "req", "leases", "budget", "served", "counters",
                        "attempts", "dead"),
                [batch.want, lease_ms, rate, burst, plain_share, max_attempts],
                client=pipe,
            )  # fmt: skip
            parts.append("lease")
        return _reply(batch, parts, pipe.execute(raise_on_error=False))

    # -- the planner -----------------------------------------------------------------------
    def acquire_solver(self, token: str, lease_ms: int) -> int:
        """A new term number if this worker took the planner lease, else 0."""
        return int(self._acquire(self._k("solver", "counters", "solver_log"), [token, lease_ms]))

    def release_solver(self, token: str) -> None:
        self._release_solver(self._k("solver"), [token])

    def poll(
        self,
        token: str,
        lease_ms: int,
        after: str,
        count: int,
        solves: list[str] = (),  # type: ignore[assignment]
    ) -> tuple[bool, list[tuple[str, bytes]], list[bytes], int, list[dict[bytes, bytes]]]:
        """Renew the lease; events after ``after``; sources users pushed; queue depth; the
        signals users added (taken: at most once, as pushed sources are). Logs
        ``solves`` (unfenced on purpose: a planner that kept solving after losing its lease
        would show in the log)."""
        pipe = self.client.pipeline(transaction=True)
        if solves:
            pipe.rpush(self.keys["solves"], *solves)
        self._renew_solver(self._k("solver"), [token, lease_ms], client=pipe)
        pipe.xrange(self.keys["events"], f"({after}", "+", count=count)
        pipe.lrange(self.keys["sources"], 0, 99)
        pipe.ltrim(self.keys["sources"], 100, -1)
        pipe.zcard(self.keys["queue"])
        self._take_signals(self._k("signals"), [SIGNALS_PER_ROUND], client=pipe)
        *_, held, events, sources, _, depth, taken = pipe.execute()
        decoded = [(eid.decode(), fields.get(b"d", b"")) for eid, fields in events]
        return bool(held), decoded, list(sources), int(depth), _stream_fields(taken)

    def push(self, token: str, requests: list[tuple[str, float, str]]) -> int:
        """Queue the planner's requests (fenced: -1 if it no longer holds the lease)."""
        flat: list[Any] = [token]
        for rid, score, payload in requests:
            flat += [rid, "e", repr(score), payload]
        return int(self._push(self._k("queue", "plainq", "req", "done", "solver"), flat))

    def save_snapshot(self, token: str, state: bytes, event_id: str) -> bool:
        return bool(self._save(self._k("solver", "snapshot", "events"), [token, state, event_id]))

    def load_snapshot(self) -> tuple[bytes, str] | None:
        state, event = self.client.hmget(self.keys["snapshot"], ["state", "event"])
        if not isinstance(state, bytes):
            return None
        return state, event.decode() if isinstance(event, bytes) else "0-0"

    # -- inspection (tests, reports) -------------------------------------------------------
    def counters(self) -> dict[str, int]:
        counters: dict[bytes, bytes] = self.client.hgetall(self.keys["counters"])  # type: ignore[assignment]
        return {key.decode(): int(value) for key, value in counters.items()}


def _reply(batch: Exchange, parts: list[str], answers: list[Any]) -> Reply:
    """The transaction's answers, one per command of ``parts``, as a :class:`Reply`."""
    reply = Reply()
    unsent = reply.unsent
    events, rejected = iter(batch.events), iter(batch.rejected)
    for part, answer in zip(parts, answers, strict=True):
        failed = isinstance(answer, Exception)
        if failed:
            reply.errors.append(f"{part}: {answer}")
        if part == "event":
            event = next(events)
            unsent.events += [event] if failed else []
        elif part == "rejected":
            kind = next(rejected)
            unsent.rejected += [kind] if failed else []
        elif failed and part == "acks":
            unsent.acks = batch.acks
        elif failed and part == "plain":
            unsent.plain = batch.plain
        elif failed:
            continue  # renewals go again at the next renewal; leases are asked again
        elif part == "renew":
            reply.lost = [member.decode() for member in answer]
        elif part == "lease":
            out, dead, reply.malformed = answer
            reply.leased = [(out[i].decode(), out[i + 1]) for i in range(0, len(out), 2)]
            reply.dead = [rid.decode() for rid in dead]
    return reply
