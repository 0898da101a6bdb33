"""The garbage collector paused while a large state is encoded on a thread (a snapshot for
JOBDIR or Redis), so its objects cannot trigger a full pass that stalls the reactor."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_pauses = [0, False]  # encodings under way that paused the collector; whether to resume it
_pauses_lock = threading.Lock()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic garbage collection while a snapshot is encoded on a thread.

    Encoding makes many short-lived objects, and enough of them trigger a full pass over the
    whole heap, which runs on the thread that triggered it holding the interpreter: the
    reactor stalls for as long as the pass takes (135 ms for a heap of 100 k sources, measured
    in ``benchmarks/bench_state.py``). Paused, the objects die young, uncounted, and the save
    triggers no pass; the crawl's own cyclic garbage waits the few seconds of a save."""
    with _pauses_lock:
        if _pauses[0] == 0:
            _pauses[1] = gc.isenabled()  # (paused by someone else: theirs to resume)
            gc.disable()
        _pauses[0] += 1
    try:
        yield
    finally:
        with _pauses_lock:
            _pauses[0] -= 1
            if _pauses[0] == 0 and _pauses[1]:
                gc.enable()
