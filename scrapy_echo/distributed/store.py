"""The Redis side of distributed mode: key names and every round trip, one batch each.

All calls here block, so they run on the worker's Redis thread (:mod:`.iothread`), never on
the reactor. Keys are ``{<ECHO_REDIS_KEY_PREFIX>:<spider>}:<name>`` (:func:`key_base`); see
:data:`KEY_NAMES`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from scrapy_echo.distributed import planner_scripts, scripts
from scrapy_echo.distributed.script_batch import ScriptBatch

if TYPE_CHECKING:
    import redis

KEY_NAMES = (
    "queue",  # ECHO's requests, in the order the planner chose them (sorted set)
    "plainq",  # the spider's own requests (sorted set, by time)
    "req",  # request id -> "<LANE>|<score>|<slot>|<json>" (hash)
    "leases",  # "<request id>|<lease number>" -> expiry in ms (sorted set)
    "done",  # ids of pages and filtered requests done -> when (sorted set; the dupefilter)
    "budget",  # the global token bucket (hash)
    "served",  # requests served per lane, for ECHO_PLAIN_SHARE (hash)
    "counters",  # reclaimed, acked, rejected:<kind>, lease_seq, solver_term, dead,
    # dead_dropped, malformed (hash)
    "attempts",  # request id -> times leased since queued, until acked (hash)
    "dead",  # request id -> its stored entry, leased too often: set aside, not lost (hash;
    # the last Kept.dead of them)
    "dead_since",  # request id -> when (ms) it was set aside: the oldest go first (sorted set)
    "events",  # observations from every worker, applied by the planner (stream)
    "solver",  # the planner's lease: its token (string with expiry)
    "solver_log",  # "<term> <token> <ms>" per planner lease taken (list; the last
    # Kept.solver_log)
    "snapshot",  # the last event, source and signal in the saved state, and its size (hash)
    "state",  # the planner's saved state (string, written and read a block at a time)
    "sources",  # URLs users push to add sources at run time (list)
    "sources_taken",  # those the planner took, until a saved state has them (stream, url)
    "solves",  # "<term> <ms>" per re-solve, so anyone can check one solver at a time (list;
    # the last Kept.solves)
    "signals",  # change signals users add, fields url and ts (stream, until a saved state has
    # them)
    "crawl",  # which crawl these keys hold: project, spider class, when created (hash)
    "owners",  # download slot -> "<token>|<until ms>|<leases held>": its worker (hash)
    "host_next",  # download slot -> when (ms) its next request may be leased (hash)
    "host_delay",  # download slot -> its delay (s), as its worker's downloader keeps it (hash)
)


def key_base(prefix: str, spider: str) -> str:
    """``{<prefix>:<spider>}``: the braces are a Redis Cluster hash tag, so all of a crawl's
    keys live in one slot (every script touches several at once; across slots Redis Cluster
    refuses them with ``CROSSSLOT``)."""
    return f"{{{prefix}:{spider}}}"


SIGNALS_PER_ROUND = 1000
SOURCES_PER_ROUND = 100  # sources users pushed, taken by the planner per round
SNAPSHOT_BLOCK = 4 << 20  # bytes of saved state per command
_STAGED_TTL_MS = 600_000


@dataclass(frozen=True)
class Kept:
    """How many entries the keys that only grow keep (the oldest go first): requests set aside
    in ``dead`` (those dropped are counted, ``dead_dropped``), the re-solves logged in
    ``solves`` and the planner terms in ``solver_log``. Each term's line must outlive its
    planner's stalls: a planner whose line was dropped steps down rather than take the lease
    back (:data:`.planner_scripts.RENEW_SOLVER`), so the log keeps many."""

    dead: int = 10_000
    solves: int = 10_000
    solver_log: int = 10_000


@dataclass(frozen=True)
class PushedApplied:
    """The last pushed source and signal the planner applied (their ids in the
    ``sources_taken`` and ``signals`` streams; ``"0-0"``: none): where it reads on, and what
    the save of its state removes from Redis."""

    source: str = "0-0"
    signal: str = "0-0"


class Polled(NamedTuple):
    """What the planner's round trip brought back (:meth:`RedisStore.poll`)."""

    held: int  # the term it holds, a new one if it took the lease back, 0 if lost
    events: list[tuple[str, bytes]]  # (id, event)
    sources: list[tuple[str, bytes]]  # (id in sources_taken, URL) pushed by users
    depth: int  # requests in ECHO's queue
    signals: list[tuple[str, dict[bytes, bytes]]]  # (id, fields) added by users
    pushes: int = 0  # the planner's pushes Redis has counted (see scripts.PUSH)


class Pushed(NamedTuple):
    """What :meth:`RedisStore.push_checked` did."""

    added: int  # requests queued; -1 if this worker no longer holds the planner's lease
    dead: list[str]  # ids set aside in ``dead``: not queued again
    pushes: int  # the planner's pushes Redis has counted, this one included


def _stream_entries(entries: Any) -> list[tuple[str, dict[bytes, bytes]]]:
    """Each stream entry's id and fields (a script returns them as flat lists); fields of any
    other shape give an empty dict, which the intake counts as a row missing its fields."""
    rows: list[tuple[str, dict[bytes, bytes]]] = []
    for entry_id, flat in entries or ():
        if not isinstance(flat, list) or len(flat) % 2:
            flat = []
        rows.append((entry_id.decode(), dict(zip(flat[::2], flat[1::2], strict=True))))
    return rows


@dataclass(frozen=True)
class FleetRules:
    """Fleet politeness for one worker's round trips (:mod:`.scripts`): its token, the delay
    of a slot no worker reported, and how far ahead a slot's turn may be to lease now."""

    token: str
    default_delay_ms: int
    horizon_ms: int


# A queued request: id, score, stored JSON, download slot ('' for none).
Queued = tuple[str, float, str, str]


@dataclass
class Exchange:
    """What a worker sends and asks for in one round trip."""

    events: list[str] = field(default_factory=list)
    acks: list[str] = field(default_factory=list)
    renew: list[str] = field(default_factory=list)
    plain: list[Queued] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # kinds of payloads refused
    delays: dict[str, float] = field(default_factory=dict)  # slot -> its delay now (s)
    want: int = 0

    def put_back(self, batch: Exchange) -> None:
        """What ``batch`` carried (not renewals: they are asked afresh), to go in front of
        what this one holds: sent again, in order."""
        self.events[:0] = batch.events
        self.acks[:0] = batch.acks
        self.plain[:0] = batch.plain
        self.rejected[:0] = batch.rejected
        self.delays = {**batch.delays, **self.delays}


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
    server: float | None = None  # Redis's clock (s), for the fleet's clock


class RedisStore:
    def __init__(self, client: redis.Redis, prefix: str, *, kept: Kept = Kept()) -> None:
        self.client = client
        self.prefix = prefix
        self.kept = kept
        self.keys = {name: f"{prefix}:{name}" for name in KEY_NAMES}
        register = client.register_script
        self._lease = register(scripts.LEASE)
        self._push = register(scripts.PUSH)
        self._renew = register(scripts.RENEW)
        self._claim = register(scripts.CLAIM)
        self._acquire = register(planner_scripts.ACQUIRE)
        self._renew_solver = register(planner_scripts.RENEW_SOLVER)
        self._release_solver = register(planner_scripts.RELEASE_SOLVER)
        self._save = register(planner_scripts.SAVE_SNAPSHOT)
        self._take_signals = register(planner_scripts.TAKE_SIGNALS)
        self._take_sources = register(planner_scripts.TAKE_SOURCES)
        self._set_aside = register(planner_scripts.SET_ASIDE_STATE)

    def _k(self, *names: str) -> list[str]:
        return [self.keys[name] for name in names]

    # -- every worker ----------------------------------------------------------------------
    def claim(self, who: str) -> tuple[str, float, bool]:
        """Whose crawl these keys hold (``who`` if none: it is now), since when (ms), and
        whether it was created now."""
        held, created, fresh = self._claim(self._k("crawl"), [who])
        return held.decode(errors="replace"), float(created), bool(fresh)

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
        fleet: FleetRules | None = None,
    ) -> Reply:
        """Send events, acks, lease renewals and plain requests; lease up to ``want``
        requests within the global budget. One transaction: if it raises, nothing of it
        happened (unless the connection broke after the server ran it; then its events
        arrive twice, and the planner drops the second copy by their worker and sequence
        number). If one command fails inside it (a key of the wrong type), the others took
        effect: what it carried is in ``Reply.unsent``, to send again. ``Reply.server`` is
        Redis's time (s). With ``fleet``, leases keep each download slot's politeness for
        the fleet (:mod:`.scripts`), and ``batch.delays`` updates the slots' delays."""
        token = fleet.token if fleet is not None else ""
        default_ms = fleet.default_delay_ms if fleet is not None else 0
        batched = ScriptBatch(self.client)
        pipe = batched.pipe
        queue_work = bool(batch.acks) or batch.want > 0
        parts = [] if queue_work else ["time"]  # (the lease script tells the time itself)
        if not queue_work:
            pipe.time()
        for event in batch.events:
            pipe.xadd(self.keys["events"], {"d": event})
        parts += ["event"] * len(batch.events)
        if batch.delays:
            pipe.hset(self.keys["host_delay"], mapping=batch.delays)  # type: ignore[arg-type]
            parts.append("delays")
        if batch.renew:
            keys = self._k("leases", "req", "owners")
            batched.run(self._renew, keys, [lease_ms, token, *batch.renew])
            parts.append("renew")
        if batch.plain:
            batched.run(self._push, self._k("queue", "plainq", "req", "done", "solver", "dead",
                                            "counters"),
                        ["", *_flat(batch.plain, "p")])  # fmt: skip
            parts.append("plain")
        for kind in batch.rejected:
            pipe.hincrby(self.keys["counters"], f"rejected:{kind}", 1)
            parts.append("rejected")
        if queue_work:
            # Acks first, then leases: one script, so a lease round reads the clock once.
            batched.run(
                self._lease,
                self._k("queue", "plainq", "req", "leases", "budget", "served", "counters",
                        "attempts", "dead", "owners", "host_next", "host_delay", "dead_since",
                        "done"),
                [batch.want, lease_ms, rate, burst, plain_share, max_attempts, token,
                 default_ms, fleet.horizon_ms if fleet is not None else 0, self.kept.dead,
                 done_ttl_ms, *batch.acks],
            )  # fmt: skip
            parts.append("lease")
        return _reply(batch, parts, batched.execute(raise_on_error=False))

    # -- the planner -----------------------------------------------------------------------
    def acquire_solver(self, token: str, lease_ms: int) -> int:
        """A new term number if this worker took the planner lease, else 0."""
        keys = self._k("solver", "counters", "solver_log")
        return int(self._acquire(keys, [token, lease_ms, self.kept.solver_log]))

    def release_solver(self, token: str) -> None:
        self._release_solver(self._k("solver"), [token])

    def poll(
        self,
        token: str,
        term: int,
        lease_ms: int,
        after: str,
        count: int,
        solves: list[str] = (),  # type: ignore[assignment]
        *,
        pushed: PushedApplied = PushedApplied(),
    ) -> Polled:
        """Renew the lease; read the events after ``after``, and the sources and signals users
        pushed after ``pushed`` (only while this worker holds the lease: one that lost it
        steps down without them). Nothing read is deleted: the save of a state that applied
        it does that (:meth:`save_snapshot`), so a planner dying before its next save loses
        none of it. Logs ``solves`` (unfenced on purpose: a planner that kept solving after
        losing its lease would show in the log), keeping the last ``Kept.solves``."""
        batched = ScriptBatch(self.client)
        pipe = batched.pipe
        if solves:
            pipe.rpush(self.keys["solves"], *solves)
            pipe.ltrim(self.keys["solves"], -self.kept.solves, -1)
        batched.run(self._renew_solver, self._k("solver", "counters", "solver_log"),
                    [token, lease_ms, term, self.kept.solver_log])  # fmt: skip
        pipe.xrange(self.keys["events"], f"({after}", "+", count=count)
        # Read after the renewal, and only if it left this worker the holder.
        batched.run(self._take_sources, self._k("solver", "sources", "sources_taken"),
                    [token, pushed.source, SOURCES_PER_ROUND])  # fmt: skip
        pipe.zcard(self.keys["queue"])
        batched.run(self._take_signals, self._k("solver", "signals"),
                    [token, pushed.signal, SIGNALS_PER_ROUND])  # fmt: skip
        pipe.hget(self.keys["counters"], "planner_pushes")
        *_, held, events, sources, depth, signals, pushes = batched.execute()
        return Polled(
            int(held),
            [(eid.decode(), fields.get(b"d", b"")) for eid, fields in events],
            [(sid.decode(), url) for sid, url in sources],
            int(depth),
            _stream_entries(signals),
            _count(pushes),
        )

    def reported_delays(self) -> dict[str, float]:
        """The download slots' delays as their workers last reported them."""
        return _delays(self.client.hgetall(self.keys["host_delay"]))  # type: ignore[arg-type]

    def renew_solver(self, token: str, term: int, lease_ms: int) -> int:
        """Only renew the planner lease (as :meth:`poll` does): the term held, or 0."""
        keys = self._k("solver", "counters", "solver_log")
        return int(self._renew_solver(keys, [token, lease_ms, term, self.kept.solver_log]))

    def push(self, token: str, requests: list[Queued] | list[tuple[str, float, str]]) -> int:
        """Queue the planner's requests (fenced: -1 if it no longer holds the lease)."""
        return self.push_checked(token, requests)[0]

    def push_checked(
        self, token: str, requests: list[Queued] | list[tuple[str, float, str]]
    ) -> Pushed:
        """:meth:`push`, the ids of those set aside in ``dead`` (not queued again: the
        planner then counts a source's crawl as failed) and the planner's pushes counted. A
        request without a slot (three fields) is queued outside fleet politeness."""
        keys = self._k("queue", "plainq", "req", "done", "solver", "dead", "counters")
        added, dead, pushes = self._push(keys, [token, *_flat(requests, "e")])
        return Pushed(int(added), [rid.decode() for rid in dead], int(pushes))

    def save_snapshot(
        self,
        token: str,
        state: bytes | list[bytes],
        event_id: str,
        pushed: PushedApplied = PushedApplied(),
    ) -> bool:
        """Save the planner's state (fenced: False if it no longer holds the lease), a block
        at a time: each command stays short whatever the state's size, well under the
        socket timeout and Redis's bulk limit (512 MB), and a save cut short changes
        nothing. ``state`` may come in blocks (:meth:`Captured.to_blocks`), never joined
        here. The state applied the events up to ``event_id`` and the pushed sources and
        signals up to ``pushed``: the save removes those from Redis, at once with it."""
        staged = f"{self.keys['state']}:staged:{token}"
        self.client.delete(staged)
        size = 0
        for block in _blocks(state if isinstance(state, list) else [state]):
            # Each block renews the staged copy's expiry: a planner that dies mid-upload
            # leaves nothing behind for longer than that.
            pipe = self.client.pipeline(transaction=False)
            pipe.append(staged, block)
            pipe.pexpire(staged, _STAGED_TTL_MS)
            pipe.execute()
            size += len(block)
        keys = [*self._k("solver", "snapshot", "events", "state"), staged,
                *self._k("sources_taken", "signals")]  # fmt: skip
        return bool(self._save(keys, [token, event_id, size, pushed.source, pushed.signal]))

    def set_aside_state(self, token: str, aside: str) -> bool:
        """Move the saved state to ``aside`` (its size and event in ``aside:snapshot``), if
        this worker holds the lease: a state no worker can read is kept, never saved over."""
        keys = [*self._k("solver", "snapshot", "state"), aside, f"{aside}:snapshot"]
        return bool(self._set_aside(keys, [token]))

    def load_snapshot(self) -> tuple[bytes, str] | None:
        """The saved state and the last event in it (joined: see :meth:`load_blocks`)."""
        loaded = self.load_blocks()
        return None if loaded is None else (b"".join(loaded[0]), loaded[1])

    def load_blocks(self) -> tuple[list[bytes], str] | None:
        """The saved state in the blocks it was read in, and the last event in it. (Never
        joined here: one join, or one buffer of 300 MiB, would hold the interpreter, and
        stall the reactor, for a third of a second.) No blocks if the state is missing or
        cut (evicted, damaged): unreadable, counted by the caller. A save that lands while
        the blocks are read (the block reads are not one transaction) is read again."""
        for _ in range(_READ_TRIES):
            head = self.client.hmget(self.keys["snapshot"], _HEAD)
            event, size, _ = head
            event_id = event.decode() if isinstance(event, bytes) else "0-0"
            if not isinstance(size, bytes):
                return None
            blocks = self._state_blocks(int(size))
            if self.client.hmget(self.keys["snapshot"], _HEAD) == head:
                return blocks, event_id
        return [], event_id  # (saved over at every try: read as cut)

    def _state_blocks(self, size: int) -> list[bytes]:
        """The saved state's ``size`` bytes a block at a time; none if it is shorter."""
        blocks: list[bytes] = []
        at = 0
        while at < size:
            block = self.client.getrange(self.keys["state"], at, at + SNAPSHOT_BLOCK - 1)
            block = block if isinstance(block, bytes) else block.encode()
            if not block:
                return []
            blocks.append(block)
            at += len(block)
        return blocks if at == size else []

    # -- inspection (tests, reports) -------------------------------------------------------
    def counters(self) -> dict[str, int]:
        counters: dict[bytes, bytes] = self.client.hgetall(self.keys["counters"])  # type: ignore[assignment]
        return {key.decode(): int(value) for key, value in counters.items()}


_READ_TRIES = 3  # reads of a state saved over while it is read
_HEAD = ["event", "size", "saves"]  # a save changes its count of saves at least


def _count(stored: bytes | None) -> int:
    """A counter read from Redis; 0 for none, or for what is not a count (then, to the
    planner, Redis went back: it queues again what it has outstanding, which costs nothing
    that was not lost)."""
    try:
        return max(0, int(stored)) if stored is not None else 0
    except ValueError:
        return 0


def _delays(stored: dict[bytes, bytes]) -> dict[str, float]:
    """The slots' reported delays; a value that is not a finite number >= 0 is left out."""
    delays = {}
    for key, value in stored.items():
        try:
            delay = float(value)
        except ValueError:
            continue
        if math.isfinite(delay) and delay >= 0:
            delays[key.decode(errors="replace")] = delay
    return delays


def _blocks(parts: list[bytes]) -> Iterator[bytes]:
    """``parts`` regrouped into blocks of at most :data:`SNAPSHOT_BLOCK` bytes."""
    pending: list[bytes] = []
    size = 0
    for part in parts:
        for at in range(0, len(part), SNAPSHOT_BLOCK):
            piece = part[at : at + SNAPSHOT_BLOCK]
            if size + len(piece) > SNAPSHOT_BLOCK:
                yield b"".join(pending)
                pending, size = [], 0
            pending.append(piece)
            size += len(piece)
    if pending:
        yield b"".join(pending)


def _flat(requests: Any, lane: str) -> list[Any]:
    """The PUSH script's arguments for ``requests`` of ``lane``."""
    flat: list[Any] = []
    for rid, score, payload, *slot in requests:
        # '|' separates an entry's fields; no host name has one.
        flat += [rid, lane, repr(score), (slot[0] if slot else "").replace("|", "%7C"), payload]
    return flat


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
        elif failed and part == "lease":
            unsent.acks = batch.acks  # (leases are asked again)
        elif failed and part == "plain":
            unsent.plain = batch.plain
        elif failed and part == "delays":
            unsent.delays = batch.delays
        elif failed:
            continue  # renewals go again at the next renewal; leases are asked again
        elif part == "time":
            reply.server = answer[0] + answer[1] / 1e6
        elif part == "renew":
            reply.lost = [member.decode() for member in answer]
        elif part == "lease":
            out, dead, reply.malformed, _, now = answer
            reply.server = int(now[0]) + int(now[1]) / 1e6
            reply.leased = [(out[i].decode(), out[i + 1]) for i in range(0, len(out), 2)]
            reply.dead = [rid.decode() for rid in dead]
    return reply
