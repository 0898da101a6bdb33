"""A set of 64-bit fingerprints that forgets what was not seen for a while, and stays cheap to
save.

The crawl remembers every link its sources showed (so a link is new once) and every page it
fetched. A monitor running for months would hold them all: a Python set costs some 70 bytes a
link, and copying one of 10 M to save it holds the reactor for a third of a second. So a
:class:`FingerprintSet` keeps two parts:

- the *young* part, a Python set: what was seen (or seen again) in the current period of
  ``ttl / GENERATIONS`` seconds, where every lookup and insertion goes first;
- the *old* part, two numpy arrays sorted by fingerprint (the fingerprint, and when it was last
  seen at the latest): 16 bytes a link, never changed in place, only replaced whole.

When a period ends, the young set is closed (never changed again) and a new one opens; a
snapshot closes it too, so it needs no copy. :meth:`FingerprintSet.merge_job` returns a pure
function that merges the closed sets into the old arrays and drops what was last seen before
``now - ttl``. The simulator runs it inline; a live crawl runs it on a thread and installs the
result on the reactor, so the reactor never does the O(n) work, and a save copies nothing (it
reads the parts as they are).

A fingerprint is forgotten between ``ttl`` and ``ttl`` plus two periods (a quarter of ``ttl``)
after it was last seen (later if merges lag), never sooner (docs/monitor.rst, "Bounded state").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice

import numpy as np
from numpy.typing import NDArray

GENERATIONS = 8  # periods per ttl: more, a smaller young set; fewer, fewer merges
_MAX_CLOSED = 8  # closed sets that make a merge due before the period ends
_SLICE = 65536  # fingerprints read from a set per call
_EMPTY_KEYS: NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)
_EMPTY_STAMPS: NDArray[np.float64] = np.zeros(0, dtype=np.float64)


@dataclass(frozen=True)
class Remembered:
    """Every fingerprint held, sorted, and when it was last seen at the latest (what a snapshot
    stores); the arrays are the set's own or fresh ones, never changed later."""

    keys: NDArray[np.uint64]
    stamps: NDArray[np.float64]


@dataclass(frozen=True)
class Housekeeping:
    """A merge the owner's thread need not wait for: ``work`` is pure (run it anywhere:
    inline, or on a thread), then ``done`` takes its result on the owner's thread, or
    ``failed`` is called if it raised."""

    what: str
    work: Callable[[], Remembered]
    done: Callable[[Remembered], None]
    failed: Callable[[], None]


def run_inline(job: Housekeeping) -> None:
    """Run a piece of upkeep here and now."""
    try:
        result = job.work()
    except BaseException:
        job.failed()
        raise
    job.done(result)


class FingerprintSet:
    """Fingerprints (ints below 2**64) forgotten ``ttl`` seconds after they were last seen
    (``inf``: never).

    >>> seen = FingerprintSet(ttl=80.0)
    >>> seen.add_new([1, 2, 2], now=0.0)
    [True, True, False]
    >>> seen.add_new([2, 3], now=15.0)  # a period (10 s) ended: 1 and 2 are closed, still seen
    [False, True]
    >>> seen.install(seen.merge_job(now=15.0)())
    >>> [mark in seen for mark in (1, 2, 3, 4)]
    [True, True, True, False]
    >>> seen.install(seen.merge_job(now=100.0)())  # 1 was last seen by 15 s: forgotten
    >>> [mark in seen for mark in (1, 2, 3, 4)]
    [False, True, True, False]
    """

    def __init__(self, ttl: float = math.inf, *, generations: int = GENERATIONS) -> None:
        if not ttl > 0:
            raise ValueError(f"ttl ({ttl!r}) must be > 0")
        if generations < 1:
            raise ValueError(f"generations ({generations!r}) must be >= 1")
        self.ttl = float(ttl)
        self.period = self.ttl / generations
        self._young: set[int] = set()
        self._young_since = math.nan  # start of the young set's period (NaN: not started)
        # Young sets closed (at a period's end, or by a capture) and not merged yet, oldest
        # first, each with the time it was closed: its members were last seen by then. A
        # closed set is never changed again.
        self._closed: list[tuple[set[int], float]] = []
        self._keys = _EMPTY_KEYS  # sorted; replaced whole, never changed in place
        self._stamps = _EMPTY_STAMPS  # when each was last seen, at the latest
        self._oldest = math.inf  # the earliest of the stamps
        self._merging = 0  # closed sets the running merge takes (0: none runs)
        self._period_closed = False  # a period ended since the last merge

    # -- lookups ---------------------------------------------------------------------------
    def __len__(self) -> int:
        """Fingerprints held (one seen again in a later period counts once per part)."""
        return len(self._young) + sum(len(part) for part, _ in self._closed) + self._keys.size

    def __contains__(self, mark: object) -> bool:
        if mark in self._young or any(mark in part for part, _ in self._closed):
            return True
        keys = self._keys
        if not keys.size or not isinstance(mark, int) or not 0 <= mark < 2**64:
            return False
        at = int(keys.searchsorted(np.uint64(mark)))
        return at < keys.size and int(keys[at]) == mark

    def __iter__(self) -> Iterator[int]:
        """Every fingerprint held, once (for tests and tools: it builds a set)."""
        return iter(self._young.union(*(part for part, _ in self._closed), self._keys.tolist()))

    def __eq__(self, other: object) -> bool:
        """Same fingerprints held (whatever the times); a set compares too."""
        if isinstance(other, FingerprintSet):
            return set(self) == set(other)
        if isinstance(other, set | frozenset):
            return set(self) == other
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # (mutable)

    def add(self, mark: int, now: float) -> None:
        """Remember ``mark`` as seen at ``now``."""
        self._roll(now)
        self._young.add(mark)

    def add_new(self, marks: Sequence[int], now: float) -> list[bool]:
        """Whether each of ``marks`` is new (not held, nor earlier in ``marks``); all are then
        held as seen at ``now``. Old ones seen again are kept for another ``ttl``."""
        self._roll(now)
        young = self._young
        # New to the young set, and added to it at once (so a repeat in marks is not new;
        # one seen in an older part is renewed): ``set.add`` returns None.
        new = [mark not in young and not young.add(mark) for mark in marks]  # type: ignore[func-returns-value]
        closed, keys = self._closed, self._keys
        if not (closed or keys.size) or not any(new):
            return new
        unknown = [i for i, is_new in enumerate(new) if is_new]
        for part, _ in reversed(closed):  # (the newest holds most of what is seen again)
            unknown = [i for i in unknown if marks[i] not in part]
        if unknown and keys.size:  # (one vectorised look-up for all: ~2 µs, one or eight)
            wanted = np.array([marks[i] for i in unknown], dtype=np.uint64)
            at = np.minimum(keys.searchsorted(wanted), keys.size - 1)
            held = (keys[at] == wanted).tolist()
            unknown = [i for i, was in zip(unknown, held, strict=True) if not was]
        if len(unknown) < new.count(True):
            new = [False] * len(new)
            for i in unknown:
                new[i] = True
        return new

    # -- periods and merges ----------------------------------------------------------------
    def _roll(self, now: float) -> None:
        if now - self._young_since < self.period:  # (False for NaN: start the first period)
            return
        self._period_closed = self._close_young(now) or self._period_closed
        self._young_since = now

    def _close_young(self, now: float) -> bool:
        if not self._young:
            return False
        self._closed.append((self._young, now))
        self._young = set()
        return True

    def merge_job(self, now: float) -> Callable[[], Remembered] | None:
        """A pure function merging the closed young sets into the old arrays and dropping
        what was last seen before ``now - ttl``; ``None`` if there is nothing to do or a merge
        runs. Run it anywhere (it reads only parts nobody changes), then :meth:`install` its
        result."""
        self._roll(now)
        if self._merging:
            return None
        cutoff = now - self.ttl
        # A period's set, or enough small ones closed by snapshots (each costs every lookup
        # of a link not in the young set a probe).
        due = self._period_closed or len(self._closed) >= _MAX_CLOSED
        if not due and not self._oldest < cutoff:
            return None
        self._merging = len(self._closed) or -1  # (-1: an expiry alone, taking no set)
        keys, stamps, closed = self._keys, self._stamps, tuple(self._closed)
        return lambda: _merged(keys, stamps, closed, cutoff)

    def install(self, merged: Remembered) -> None:
        """Take the result of the last :meth:`merge_job`."""
        self._keys, self._stamps = merged.keys, merged.stamps
        self._oldest = float(merged.stamps.min()) if merged.stamps.size else math.inf
        del self._closed[: max(self._merging, 0)]
        self._merging = 0
        self._period_closed = bool(self._closed)  # (sets closed meanwhile: the next merge's)

    def merge_failed(self) -> None:
        """The last :meth:`merge_job` did not finish: keep the closed sets, try again later."""
        self._merging = 0

    # -- snapshots -------------------------------------------------------------------------
    def capture(self, now: float) -> Callable[[], Remembered]:
        """A consistent view for a snapshot taken at ``now``, at no cost: the young set is
        closed (so nothing held changes any more), and the function returned builds the
        arrays from the parts anywhere, later."""
        self._close_young(now)
        keys, stamps, closed = self._keys, self._stamps, tuple(self._closed)
        return lambda: _merged(keys, stamps, closed, -math.inf)

    @classmethod
    def restore(
        cls,
        ttl: float,
        keys: Iterable[int] | NDArray[np.uint64],
        stamps: NDArray[np.float64] | None,
        now: float,
    ) -> FingerprintSet:
        """A set holding ``keys``, last seen at ``stamps`` (``None``: at ``now``, for
        snapshots from before expiry)."""
        out = cls(ttl)
        keys = np.asarray(keys if isinstance(keys, np.ndarray) else list(keys), dtype=np.uint64)
        if stamps is None:
            stamps = np.full(keys.size, now, dtype=np.float64)
        stamps = np.asarray(stamps, dtype=np.float64)
        if stamps.shape != keys.shape:
            raise ValueError(f"{keys.size} fingerprints but {stamps.size} times")
        if keys.size > 1 and not np.all(keys[1:] > keys[:-1]):
            # (A set this class saved is sorted already: restoring 10 M links skips a sort of
            # 2 s a set, profiled in a planner's take-over.)
            order = np.lexsort((-stamps, keys))  # by key, the latest time first
            keys, stamps = keys[order], stamps[order]
            first = np.ones(keys.size, dtype=bool)
            first[1:] = keys[1:] != keys[:-1]
            keys, stamps = keys[first], stamps[first]
        out.install(Remembered(keys, stamps))
        return out


def _merged(
    keys: NDArray[np.uint64],
    stamps: NDArray[np.float64],
    closed: tuple[tuple[set[int], float], ...],
    cutoff: float,
) -> Remembered:
    """``keys`` with the ``closed`` sets merged in (oldest first: a later sighting wins), less
    what was last seen before ``cutoff``; new arrays where anything changed, the inputs
    untouched."""
    for part, seen_by in closed:
        if not part:
            continue
        added = _sorted_array(part)
        at = keys.searchsorted(added)
        held = np.zeros(added.size, dtype=bool)
        inside = at < keys.size
        held[inside] = keys[at[inside]] == added[inside]
        stamps = stamps.copy()
        stamps[at[held]] = seen_by
        fresh = ~held
        keys = np.insert(keys, at[fresh], added[fresh])
        stamps = np.insert(stamps, at[fresh], seen_by)
    if stamps.size and cutoff > -math.inf:
        kept = stamps >= cutoff
        if not kept.all():
            keys, stamps = keys[kept], stamps[kept]
    return Remembered(keys, stamps)


def _sorted_array(marks: set[int]) -> NDArray[np.uint64]:
    """The members of ``marks``, sorted; read a slice at a time, so a thread doing it lets the
    others run in between (``np.fromiter`` holds the interpreter until it is done)."""
    members = iter(marks)
    out = np.empty(len(marks), dtype=np.uint64)
    for at in range(0, out.size, _SLICE):
        size = min(_SLICE, out.size - at)
        out[at : at + size] = np.fromiter(islice(members, size), dtype=np.uint64, count=size)
    out.sort()
    return out


__all__ = ["GENERATIONS", "FingerprintSet", "Housekeeping", "Remembered", "run_inline"]
