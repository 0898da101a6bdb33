"""What the Redis store's round trips carry: the batches a worker sends, what comes back, and
how the scripts' answers are read (:mod:`.store` makes the round trips)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple


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


def stream_entries(entries: Any) -> list[tuple[str, dict[bytes, bytes]]]:
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
    holds: dict[str, float] = field(default_factory=dict)  # slot -> s its host asked for
    refunds: int = 0  # budget tokens back: leased requests never sent (robots.txt)
    want: int = 0

    def put_back(self, batch: Exchange) -> None:
        """What ``batch`` carried (not renewals: they are asked afresh), to go in front of
        what this one holds: sent again, in order."""
        self.events[:0] = batch.events
        self.acks[:0] = batch.acks
        self.plain[:0] = batch.plain
        self.rejected[:0] = batch.rejected
        self.delays = {**batch.delays, **self.delays}
        # (A hold sent again late holds as long from then: later, never shorter.)
        for slot, wait in batch.holds.items():
            self.holds[slot] = max(wait, self.holds.get(slot, 0.0))
        self.refunds += batch.refunds


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


def read_count(stored: bytes | None) -> int:
    """A counter read from Redis; 0 for none, or for what is not a count (then, to the
    planner, Redis went back: it queues again what it has outstanding, which costs nothing
    that was not lost)."""
    try:
        return max(0, int(stored)) if stored is not None else 0
    except ValueError:
        return 0


def read_delays(stored: dict[bytes, bytes]) -> dict[str, float]:
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


def push_arguments(requests: Any, lane: str) -> list[Any]:
    """The PUSH script's arguments for ``requests`` of ``lane``."""
    flat: list[Any] = []
    for rid, score, payload, *slot in requests:
        # '|' separates an entry's fields; no host name has one.
        flat += [rid, lane, repr(score), (slot[0] if slot else "").replace("|", "%7C"), payload]
    return flat


def read_reply(batch: Exchange, parts: list[str], answers: list[Any]) -> Reply:
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
        elif failed and part == "holds":
            unsent.holds = batch.holds
        elif failed and part == "refunds":
            unsent.refunds = batch.refunds
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
