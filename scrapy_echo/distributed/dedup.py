"""Events sent twice are applied once: each worker numbers the events it sends.

A worker whose round trip failed sends its events again, but a round trip can fail after
the server ran it (the connection broke before the answer came back): its events are then in
the stream twice. Each event carries its worker's token and a number that grows by one per
event (:func:`stamp`), and a worker sends its events in order, again after a failure, so the
planner has only to remember the highest number applied per worker (:class:`EventDedup`).
That memory belongs to the planner's saved state: a planner taking over replays the events
after the saved state with the numbers that state had applied.
"""

from __future__ import annotations

from typing import Any

WORKER = "w"
SEQ = "q"
# Workers remembered, the least recently heard from forgotten first: a worker's events can
# come twice only within its own round trips, so one not heard from for 10,000 others'
# turns is gone (tokens are never reused: host, pid and a random part).
MAX_WORKERS = 10_000


def stamp(data: dict[str, Any], worker: str, seq: int) -> dict[str, Any]:
    """``data`` (an event's JSON form) marked as event number ``seq`` of ``worker``."""
    return {**data, WORKER: worker, SEQ: seq}


class EventDedup:
    """The highest event number applied, per worker.

    >>> dedup = EventDedup()
    >>> [dedup.seen("w1", n) for n in (1, 2, 1, 2, 3)]
    [False, False, True, True, False]
    >>> EventDedup.from_data(dedup.to_data()).seen("w1", 3)
    True
    """

    def __init__(self, *, max_workers: int = MAX_WORKERS) -> None:
        self.max_workers = max_workers
        self._last: dict[str, int] = {}  # in order of last use: the oldest first

    def __len__(self) -> int:
        return len(self._last)

    def seen(self, worker: str, seq: int) -> bool:
        """True if event ``seq`` of ``worker`` was applied already (drop it); else record
        it as applied and return False."""
        last = self._last.pop(worker, 0)
        self._last[worker] = max(last, seq)
        if len(self._last) > self.max_workers:
            del self._last[next(iter(self._last))]
        return seq <= last

    def seen_event(self, data: object) -> bool:
        """:meth:`seen` for an event's JSON form, as read from the stream; False for one
        without a valid stamp (a command's event, an older worker's), which is applied."""
        if not isinstance(data, dict):
            return False
        worker, seq = data.get(WORKER), data.get(SEQ)
        if not isinstance(worker, str) or not isinstance(seq, int) or isinstance(seq, bool):
            return False
        return self.seen(worker, seq)

    def to_data(self) -> dict[str, Any]:
        """Plain JSON data, for the planner's saved state."""
        return {"workers": [[worker, seq] for worker, seq in self._last.items()]}

    @classmethod
    def from_data(cls, data: object, *, max_workers: int = MAX_WORKERS) -> EventDedup:
        """What :meth:`to_data` gave; ``ValueError`` naming what is wrong otherwise."""
        rows = data.get("workers") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ValueError(f"event numbers: expected {{'workers': [...]}}, got {data!r:.80}")
        dedup = cls(max_workers=max_workers)
        for row in rows[-max_workers:]:
            if (
                not isinstance(row, list)
                or len(row) != 2
                or not isinstance(row[0], str)
                or not isinstance(row[1], int)
                or isinstance(row[1], bool)
            ):
                raise ValueError(f"event numbers: bad row {row!r:.80}")
            dedup._last[row[0]] = row[1]
        return dedup
