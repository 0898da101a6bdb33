"""The Redis side of distributed mode: key names and every round trip, one batch each.

All calls here block, so they run on the worker's Redis thread (:mod:`.iothread`), never on
the reactor. Keys are ``{<ECHO_REDIS_KEY_PREFIX>:<spider>}:<name>`` (:func:`key_base`); see
:data:`KEY_NAMES`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from scrapy_echo.distributed import planner_scripts, scripts
from scrapy_echo.distributed.script_batch import ScriptBatch
from scrapy_echo.distributed.store_messages import (
    Exchange,
    FleetRules,
    Kept,
    Polled,
    Pushed,
    PushedApplied,
    Queued,
    Reply,
    push_arguments,
    read_count,
    read_delays,
    read_reply,
    stream_entries,
)

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
    "host_hold",  # download slot -> until when (ms) its host asked to be left alone (hash)
    "plain_tail",  # download slot -> the last score its plain requests were moved to (hash)
    "host_delay",  # download slot -> its delay (s), as its worker's downloader keeps it (hash)
)


ASIDE_KEPT = 30 * 86400.0  # s an unreadable state set aside is kept for its owner to see


def key_base(prefix: str, spider: str) -> str:
    """``{<prefix>:<spider>}``: the braces are a Redis Cluster hash tag, so all of a crawl's
    keys live in one slot (every script touches several at once; across slots Redis Cluster
    refuses them with ``CROSSSLOT``)."""
    return f"{{{prefix}:{spider}}}"


SIGNALS_PER_ROUND = 1000
SOURCES_PER_ROUND = 100  # sources users pushed, taken by the planner per round
SNAPSHOT_BLOCK = 4 << 20  # bytes of saved state per command
_STAGED_TTL_MS = 600_000


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
        self._hold = register(scripts.HOLD)
        self._holds = register(scripts.HOLDS)
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
        the fleet (:mod:`.scripts`), ``batch.delays`` updates the slots' delays and
        ``batch.holds`` keeps every worker off the slots whose hosts said Retry-After."""
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
        if batch.holds:
            horizon = fleet.horizon_ms if fleet is not None else 0
            held = [x for slot, wait in batch.holds.items() for x in (slot, wait * 1000 + horizon)]
            batched.run(self._hold, self._k("host_next", "host_hold"), held)
            parts.append("holds")
        if batch.refunds:
            # (The lease script caps the bucket at its burst when it next reads it.)
            pipe.hincrbyfloat(self.keys["budget"], "tokens", batch.refunds)
            parts.append("refunds")
        if batch.renew:
            keys = self._k("leases", "req", "owners")
            batched.run(self._renew, keys, [lease_ms, token, *batch.renew])
            parts.append("renew")
        if batch.plain:
            batched.run(self._push, self._k("queue", "plainq", "req", "done", "solver", "dead",
                                            "counters"),
                        ["", *push_arguments(batch.plain, "p")])  # fmt: skip
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
                        "done", "plain_tail"),
                [batch.want, lease_ms, rate, burst, plain_share, max_attempts, token,
                 default_ms, fleet.horizon_ms if fleet is not None else 0, self.kept.dead,
                 done_ttl_ms, *batch.acks],
            )  # fmt: skip
            parts.append("lease")
        return read_reply(batch, parts, batched.execute(raise_on_error=False))

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
            stream_entries(signals),
            read_count(pushes),
        )

    def reported_delays(self) -> dict[str, float]:
        """The download slots' delays as their workers last reported them."""
        return read_delays(self.client.hgetall(self.keys["host_delay"]))  # type: ignore[arg-type]

    def fleet_holds(self) -> dict[str, float]:
        """The download slots whose hosts asked any worker to be left alone (Retry-After),
        and the seconds each hold has left (ended ones are deleted)."""
        reply: Any = self._holds(keys=self._k("host_hold"))
        pairs: list[Any] = list(reply) if isinstance(reply, list) else []
        holds: dict[str, float] = {}
        for slot, left in zip(pairs[::2], pairs[1::2], strict=False):
            key = slot.decode("utf-8", "replace") if isinstance(slot, bytes) else str(slot)
            holds[key] = float(left) / 1000.0
        return holds

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
        added, dead, pushes = self._push(keys, [token, *push_arguments(requests, "e")])
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
        this worker holds the lease: a state no worker can read is kept, never saved over, for
        :data:`ASIDE_KEPT` seconds (then it expires: set aside again and again, states would
        pile up)."""
        keys = [*self._k("solver", "snapshot", "state"), aside, f"{aside}:snapshot"]
        return bool(self._set_aside(keys, [token, int(ASIDE_KEPT * 1000)]))

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
