"""The garbage collector paused while a large state is encoded or rebuilt on a thread (a
snapshot for JOBDIR or Redis, a planner taking over), so its objects cannot trigger a full
pass that stalls the reactor."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_pauses = [0, False]  # encodings under way that paused the collector; whether to resume it
_pauses_lock = threading.Lock()


@contextmanager
def collector_paused(*, keep: bool = False) -> Iterator[None]:
    """No automatic garbage collection while a snapshot is encoded (or, ``keep``, a state is
    rebuilt) on a thread.

    Encoding makes many short-lived objects, and enough of them trigger a full pass over the
    whole heap, which runs on the thread that triggered it holding the interpreter: the
    reactor stalls for as long as the pass takes (135 ms for a heap of 100 k sources, measured
    in ``benchmarks/bench_state.py``). Paused, the objects die young, uncounted, and the save
    triggers no pass; the crawl's own cyclic garbage waits the few seconds of a save.

    A rebuilt state stays: with ``keep`` every object alive at the end is frozen (moved where
    the collector never looks, :func:`gc.freeze`). Left young, millions of them would make the
    first pass after the pause walk them all, on whichever thread allocates next: most likely
    the reactor's. (Cyclic garbage alive at that moment is kept too: once per take-over.)"""
    with _pauses_lock:
        if _pauses[0] == 0:
            _pauses[1] = gc.isenabled()  # (paused by someone else: theirs to resume)
            gc.disable()
        _pauses[0] += 1
    try:
        yield
    finally:
        with _pauses_lock:
            if keep:
                gc.freeze()
            _pauses[0] -= 1
            if _pauses[0] == 0 and _pauses[1]:
                gc.enable()
