"""What a third-party call raised that it is not documented to raise: counted, logged once.

Around a library call that parses someone else's input (a URL, a response's encoding) the
project catches the errors that mean "bad input" and skips the input. Anything else, a
``Warning`` turned into an exception by a warnings filter or a new exception type in a
dependency's new release, is a change in the library, not bad input: taking it as bad input
would drop every link of every source without a word (w3lib 2.6.0's deprecation did, under
``-W error``). So such a failure is recorded here, logged with its traceback the first time
per place and type, and published by the extension as ``echo/unexpected/<place>/<type>``.

The counts are per process, as the libraries are: a change in one shows in every crawl the
process runs.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter

logger = logging.getLogger(__name__)

_lock = threading.Lock()  # URL cleaning also runs on the reactor's thread pool
_counts: Counter[str] = Counter()


def note_unexpected(place: str, exc: BaseException) -> None:
    """Count ``exc`` raised at ``place`` (a short slash-separated name); log its first one."""
    key = f"{place}/{type(exc).__name__}"
    with _lock:
        _counts[key] += 1
        first = _counts[key] == 1
    if first:
        logger.error(
            "ECHO: unexpected %s from a library call in %s, not a bad input (a dependency's "
            "new release?); skipping what it was reading, counting the rest in "
            "echo/unexpected/%s",
            type(exc).__name__,
            place,
            key,
            exc_info=exc,
        )


def unexpected_counts() -> dict[str, int]:
    """Each place/type's count so far in this process."""
    with _lock:
        return dict(_counts)


__all__ = ["note_unexpected", "unexpected_counts"]
