"""One snapshot format for a crawl's state: JOBDIR, Redis and ``scrapy echo-report`` read it.

The core's state is captured and restored here, and only here; a driver adds its own parts
(the plain lane's requests, feed positions, the events it applied) beside it. A snapshot is
versioned plain data (numbers, strings, lists and numeric arrays, through
:mod:`scrapy_echo.core.codec`: JSON, never pickle), built from each part's own ``to_data`` rather
than from its attributes. Waiting pages are data (:meth:`NewPage.to_data
<scrapy_echo.core.pages.NewPage.to_data>`); only the plain lane's requests, a driver's part, are
stored by its request codec (:mod:`scrapy_echo.distributed.wire`).

Before the first release a snapshot of another version is not read: :func:`read` raises a
:class:`~scrapy_echo.core.codec.CodecError` that names the version it found. ``tests/data/`` keeps
a snapshot written by this version, and a test loads it.

=============== ===========================================================================
key             value
=============== ===========================================================================
format, version ``"scrapy-echo-state"``, ``6``
saved_at        the crawl clock when saved
sources         per field of :class:`~scrapy_echo.core.state.SourceStatus` (``url, etag,
                last_modified, failures, last_fetched, crawls, new_links, ...``), its value for
                every source
last_crawl      per source, when its last crawl was dispatched (NaN: never)
seen            the 64-bit fingerprints of the links seen on sources, sorted
seen_times      when each was last seen, at the latest
fetched         the fingerprints of the fetched pages' keys
fetched_times   when each was fetched
aliases         ``[alias key, page key]`` pairs: a page's other URLs
crawled_pages   new pages fetched
learner         :meth:`SourceLearner.to_data
                <scrapy_echo.model.estimation.learning.SourceLearner.to_data>`
frontier        waiting new pages by field: ``source``, ``page`` (:meth:`NewPage.to_data
                <scrapy_echo.core.pages.NewPage.to_data>`), a list each, in the order they
                leave
signals         :meth:`SignalBook.to_data
                <scrapy_echo.model.estimation.change_signals.SignalBook.to_data>`
overlap         :meth:`OverlapBook.to_data
                <scrapy_echo.model.estimation.overlap.OverlapBook.to_data>`
overflow        :meth:`OverflowWatch.to_data
                <scrapy_echo.model.estimation.overflow.OverflowWatch.to_data>`
refresh         :meth:`RefreshLane.to_data
                <scrapy_echo.model.refetch.refresh_lane.RefreshLane.to_data>`
configured_sources, configured_known
                the sources the crawl last started with, and whether they are known
                (``CrawlCore.configure_sources``; optional: unknown in a state saved before)
page_retries    :meth:`PageRetries.to_data <scrapy_echo.core.page_retries.PageRetries.to_data>`:
                new pages whose fetch failed, waiting to be tried again (optional: none
                in a state saved before)
policy          ``{"name": ..., "data": ...}``: the policy's own
                :meth:`~scrapy_echo.model.decisions.policies.Policy.to_data` (a BFS cycle's
                order, the exploration's bandit)
profile         :meth:`WeekProfile.to_data
                <scrapy_echo.model.estimation.cycles.WeekProfile.to_data>`:
                the publishing cycle learned so far
history         one sample per re-solve, for reports
plain           the plain lane's requests, after those in flight when saved (JOBDIR only)
feeds           click and signal feed readers' positions, by path: each names its file by its
                bytes (:meth:`FeedReader.state <scrapy_echo.inputs.feed_reader.FeedReader.state>`)
journal         the first segment of the journal written after this snapshot: the ones before
                are in it, the later ones are replayed on top of it (JOBDIR only, see
                :mod:`scrapy_echo.crawler.journal`; none: 0)
events_applied  :meth:`EventDedup.to_data <scrapy_echo.distributed.dedup.EventDedup.to_data>`:
                the last event number applied per worker (Redis only)
=============== ===========================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from scrapy_echo.core import codec
from scrapy_echo.core.collector import collector_paused
from scrapy_echo.core.pages import NewPage
from scrapy_echo.core.seen import FingerprintSet, Remembered
from scrapy_echo.core.state import STATUS_FIELDS, CrawlState, SourceStatus
from scrapy_echo.model.estimation.change_signals import SignalBook
from scrapy_echo.model.estimation.cycles import WeekProfile
from scrapy_echo.model.estimation.learning import SourceLearner
from scrapy_echo.model.estimation.overflow import OverflowWatch
from scrapy_echo.model.estimation.overlap import OverlapBook
from scrapy_echo.model.refetch.refresh_lane import RefreshLane

if TYPE_CHECKING:
    from scrapy_echo.core.crawl import CrawlCore
    from scrapy_echo.core.state_config import StateConfig
    from scrapy_echo.model.decisions.policies import Policy

FORMAT = "scrapy-echo-state"
VERSION = 6
_FRONTIER_FIELDS = ("source", "page")


class Captured:
    """A snapshot taken on the state's own thread, not yet encoded: :meth:`chunks` (or
    :meth:`to_bytes`) may run on any thread, while the crawl goes on changing the state."""

    def __init__(
        self,
        parts: dict[str, Any],
        built: dict[str, Callable[[], Any]],
        requests: _Counted,
    ) -> None:
        self._parts = parts
        self._built = built  # parts built when encoding, from data nobody changes any more
        self._requests = requests

    @property
    def skipped(self) -> int:
        """Plain requests that could not be stored as data (known once encoded)."""
        return self._requests.failed

    def chunks(self) -> Iterator[str]:
        """The snapshot's JSON, a short string at a time."""
        snapshot = dict(self._parts)
        for name, build in self._built.items():
            snapshot[name] = build()
        return codec.dump_chunks(snapshot)

    def to_blocks(self) -> list[bytes]:
        """The snapshot's bytes in blocks of about a MiB: no one call holds the interpreter
        long (see :func:`collector_paused`); joined, 300 MiB would hold it a third of a second
        (the memory copy and its page faults)."""
        blocks: list[bytes] = []
        pending: list[str] = []
        size = 0
        with collector_paused():
            for chunk in self.chunks():
                pending.append(chunk)
                size += len(chunk)
                if size >= 1 << 20:
                    blocks.append("".join(pending).encode())
                    pending.clear()
                    size = 0
            blocks.append("".join(pending).encode())
        return blocks

    def to_bytes(self) -> bytes:
        """The snapshot's bytes (joined: for what is small, or not on a thread beside a
        reactor)."""
        return b"".join(self.to_blocks())


def capture(
    core: CrawlCore,
    now: float,
    encode: Callable[[Any], str],
    plain: Iterable[Any] = (),
    extra: dict[str, Any] | None = None,
) -> Captured:
    """The core's state at ``now`` (with a driver's ``plain`` requests and ``extra`` parts),
    copied where it changes: cheap enough for the reactor (the fingerprint sets close their
    young parts instead of copying them; only the sources changed since the last capture are
    copied again; docs/monitor.rst, "Bounded state"), and encoded by :meth:`Captured.chunks`
    on any thread (a waiting page is never changed; the plain lane's requests are encoded
    there too, and one the crawl takes meanwhile was waiting when captured)."""
    state = core.state
    stored = _Counted(_retried(encode))
    waiting = [(w.source, w.page) for w in state.frontier.pages()]
    plain = list(plain)
    seen, fetched = _once(state.seen.capture(now)), _once(state.fetched.capture(now))
    for job in state.housekeeping(now):  # (captures close young sets: merge them in time)
        core.run_housekeeping(job)
    parts = {
        "format": FORMAT,
        "version": VERSION,
        "saved_at": now,
        "last_crawl": np.array(state.last_crawl),
        "aliases": [[alias, page] for alias, page in state.aliases.items()],
        "crawled_pages": state.crawled_pages,
        "history": list(state.history),  # (samples are never changed once taken)
        "signals": state.signals.to_data(),
        "overlap": state.overlap.to_data(),
        "overflow": state.overflow.to_data(),
        "refresh": state.refresh.to_data(),
        "page_retries": state.page_retries.to_data(),
        "configured_sources": list(state.configured_sources or ()),
        "configured_known": state.configured_sources is not None,
        "profile": state.profile.to_data(),
        "policy": {"name": core.policy.name, "data": core.policy.to_data()},
        **_arrays_copied(extra or {}),
    }
    rows = state.status_rows()
    built = {
        "sources": lambda: _source_table(rows),
        "learner": state.learner.captured(),
        "frontier": lambda: _frontier_table(waiting),
        "plain": lambda: [p for p in map(stored, plain) if p is not None],
        "seen": lambda: seen().keys,
        "seen_times": lambda: seen().stamps,
        "fetched": lambda: fetched().keys,
        "fetched_times": lambda: fetched().stamps,
    }
    return Captured(parts, built, stored)


def dump(
    core: CrawlCore, now: float, encode: Callable[[Any], str], plain: Iterable[Any] = ()
) -> tuple[bytes, int]:
    """The core's state (and ``plain`` requests) as bytes, here and now, and how many
    plain requests could not be stored as data (``encode`` raised ``ValueError``)."""
    captured = capture(core, now, encode, plain)
    return captured.to_bytes(), captured.skipped


def _retried(encode: Callable[[Any], str]) -> Callable[[Any], str]:
    """``encode``, tried again if the crawl changed the request as it ran (a request taken
    since the capture: a middleware may add a header or a meta key)."""

    def encode_steadily(request: Any) -> str:
        for _ in range(3):
            try:
                return encode(request)
            except RuntimeError:  # "dictionary changed size during iteration"
                continue
        raise ValueError(f"request {request.url} kept changing while it was saved")

    return encode_steadily


def _arrays_copied(value: Any) -> Any:
    """``value`` with its arrays copied, in it and in the dicts in it: a ``to_data`` builds
    fresh lists but hands out its live arrays."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {k: _arrays_copied(v) for k, v in value.items()}
    return value


def _once(build: Callable[[], Remembered]) -> Callable[[], Remembered]:
    """``build``, run at most once (a set's fingerprints and times come from one merge)."""
    done: list[Remembered] = []

    def get() -> Remembered:
        if not done:
            done.append(build())
        return done[0]

    return get


class NewerVersion(codec.CodecError):
    """A snapshot a newer build wrote (a rolling upgrade): readable there, not here."""


def read(data: bytes | list[bytes]) -> dict[str, Any]:
    """The snapshot in ``data``, its sources as :class:`SourceStatus` and its learner as a
    :class:`SourceLearner`; :class:`codec.CodecError` if ``data`` is not a snapshot of this
    version (naming the version it is)."""
    snapshot = codec.loads(data)
    if not isinstance(snapshot, dict) or snapshot.get("format") != FORMAT:
        raise codec.CodecError("not a state snapshot")
    version = snapshot.get("version")
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise NewerVersion(
            f"a state snapshot of version {version}, written by a newer build: this build "
            f"reads version {VERSION}"
        )
    if version != VERSION:
        raise codec.CodecError(
            f"a state snapshot of version {version!r:.20}, and this build reads version "
            f"{VERSION} only (an earlier build's state is not read before the first release)"
        )
    try:
        snapshot["sources"] = [
            SourceStatus.from_data(status) for status in _source_rows(snapshot["sources"])
        ]
        snapshot["learner"] = SourceLearner.from_data(snapshot["learner"])
        snapshot["frontier"] = _frontier_rows(snapshot["frontier"])
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise codec.CodecError(f"malformed snapshot: {exc!r:.200}") from None
    return snapshot


def _source_table(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """The sources by field, a list each: no object per source for the encoder to make."""
    columns = zip(*rows, strict=True) if rows else ([] for _ in STATUS_FIELDS)
    return {name: list(values) for name, values in zip(STATUS_FIELDS, columns, strict=True)}


def _frontier_table(waiting: list[tuple[int, Any]]) -> dict[str, list[Any]]:
    """The waiting pages by field."""
    return {
        "source": [source for source, _ in waiting],
        "page": [page.to_data() for _, page in waiting],
    }


def _frontier_rows(frontier: Any) -> list[Sequence[Any]]:
    """``[source, page]`` per waiting page."""
    columns = [frontier[name] for name in _FRONTIER_FIELDS]
    if len({len(column) for column in columns}) > 1:
        raise ValueError("frontier fields of different lengths")
    return list(zip(*columns, strict=True))


def _waiting_page(row: Any, sources: int) -> NewPage:
    """The waiting page a frontier row holds; ``ValueError`` if it is damaged."""
    source, data = row
    if isinstance(source, bool) or not isinstance(source, int | np.integer):
        raise ValueError(f"a waiting page of source {source!r:.20}")
    if not 0 <= int(source) < sources:
        raise ValueError(f"a waiting page of source {source}, of {sources}")
    return NewPage.from_data(int(source), data)


def _source_rows(sources: Any) -> list[dict[str, Any]]:
    """The sources of a snapshot, one dict each, from their table (a list per field)."""
    # A counter a later build added (``next_pages``) starts at its default in a state saved
    # before it; the url column must be there.
    columns = {name: sources[name] for name in STATUS_FIELDS if name == "url" or name in sources}
    count = len(columns["url"])
    if any(len(values) != count for values in columns.values()):
        raise ValueError("source fields of different lengths")
    return [{name: values[i] for name, values in columns.items()} for i in range(count)]


def restore(
    config: StateConfig,
    snapshot: dict[str, Any],
    decode: Callable[[Any], Any],
    policy: Policy | None = None,
) -> tuple[CrawlState, list[Any], int]:
    """A new state from a :func:`read` snapshot, the plain lane's requests, and how many
    stored requests and pages were skipped (``decode`` refused a request, ``ValueError``, or
    a page's row was damaged); ``policy`` (fresh, for the new core) takes what the saved
    one kept, if it is of the same name (a crawl resumed under another policy starts that
    one afresh). Runs on any thread: it touches nothing but what it builds. ``CodecError``
    if the snapshot does not fit. (A driver's own parts, such as ``feeds``, are its to
    read.)"""
    request = _Counted(decode)
    try:
        saved_policy = snapshot["policy"]
        if policy is not None and saved_policy["name"] == policy.name:
            policy.load_data(saved_policy["data"])
        state = CrawlState(config)
        state.add_sources(status.url for status in snapshot["sources"])
        state.sources[:] = snapshot["sources"]
        state.source_crawls = sum(status.crawls for status in state.sources)
        state.retired_count = sum(status.retired for status in state.sources)
        state.removed_count = sum(status.removed for status in state.sources)
        state.last_crawl[:] = snapshot["last_crawl"]
        saved_at, ttl = float(snapshot["saved_at"]), config.seen_ttl
        state.seen = FingerprintSet.restore(ttl, snapshot["seen"], snapshot["seen_times"], saved_at)
        state.fetched = FingerprintSet.restore(
            ttl, snapshot["fetched"], snapshot["fetched_times"], saved_at
        )
        state.aliases = {str(alias): str(page) for alias, page in snapshot["aliases"]}
        state.alias_times.extend((saved_at, alias) for alias in state.aliases)
        state.crawled_pages = int(snapshot["crawled_pages"])
        state.history = list(snapshot["history"])
        state.learner = snapshot["learner"]
        state.learner.grow(len(state.sources))
        state.signals = SignalBook.from_data(snapshot["signals"])
        state.signals.grow(len(state.sources))
        state.overlap = OverlapBook.from_data(snapshot["overlap"])
        state.overlap.grow(len(state.sources))
        state.overflow = OverflowWatch.from_data(snapshot["overflow"])
        state.overflow.grow(len(state.sources))
        state.refresh = _refresh_lane(snapshot["refresh"], state.refresh)
        state.profile = WeekProfile.from_data(snapshot["profile"])
        # (A state saved before failed pages were kept has none waiting.)
        state.page_retries.load_data(snapshot.get("page_retries", {}))
        if snapshot.get("configured_known", False):
            configured = snapshot["configured_sources"]
            if not (isinstance(configured, list) and all(isinstance(u, str) for u in configured)):
                raise ValueError("configured_sources must be a list of URLs")
            state.configured_sources = list(configured)
        for row in snapshot["frontier"]:  # (rows: see read)
            try:
                page = _waiting_page(row, len(state.sources))
            except ValueError:
                request.failed += 1  # (one damaged page must not cost the whole state)
                continue
            state.frontier.push(
                page.source, page, appeared=page.appeared, discovered=page.discovered
            )
        plain = [r for r in map(request, snapshot.get("plain", [])) if r is not None]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise codec.CodecError(f"malformed snapshot: {exc!r:.200}") from None
    return state, plain, request.failed


def _refresh_lane(data: Any, current: RefreshLane) -> RefreshLane:
    """The saved refresh lane, under this run's settings (not the saved ones)."""
    saved = RefreshLane.from_data(data)
    saved.share, saved.stale_cost = current.share, current.stale_cost
    saved.max_pages = current.max_pages
    saved.shortest, saved.longest = current.shortest, current.longest
    saved.very_stale = current.very_stale
    if saved.prior_period != current.prior_period:  # a new prior, until one is fitted
        saved.prior_period, saved.book.prior = current.prior_period, current.book.prior
    return saved


class _Counted:
    """``convert``, with a ``ValueError`` turned into ``None`` and counted in ``failed``."""

    def __init__(self, convert: Callable[[Any], Any]) -> None:
        self.convert = convert
        self.failed = 0

    def __call__(self, value: Any) -> Any:
        try:
            return self.convert(value)
        except ValueError:
            self.failed += 1
            return None
