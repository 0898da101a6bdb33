"""Sources that list the same pages: detected by the Jaccard overlap of their recent links,
and their rates credited to one of each pair (Pham et al., WSDM 2018, section 4.1;
docs/how-it-works.rst, "Overlapping sources").

A front page and its section often list the same stories. ECHO counts a link for the source
that showed it first, so two sources showing the same stories split them by whichever was
crawled first, and the solver, seeing two sources of half the rate each, gives the pair more
crawls than one source of the whole rate would get (``1/I`` grows as ``√λ``). Pham et al. prune
one of each pair whose link sets overlap by ``Jaccard ≥ ξ = 0.7``. Here the follower of such
a pair (the one worth less, ``λP``) keeps only the share of its rate that its own links bring,
and the leader takes the rest: the pair's rate is unchanged, and the crawls go to one of them.

Each source keeps the fingerprints of the last :data:`RECENT_LINKS` links that were new to
it (a fixed ring per source: 256 bytes, whatever the source lists), and counts how many of
those another source had shown first. A link is new to a source when its previous crawl did
not list it, so each source's last listing is kept too (8 bytes a link: 2.4 KB for a hub of
300 links); links a source lists from its first crawl on, its navigation among them, never
count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.intervals.curves import FloatArray

RECENT_LINKS = 32
OVERLAP_XI = 0.7  # Pham et al.'s threshold
MIN_LINKS = 8  # a pair is judged once both have shown this many links


@dataclass(frozen=True)
class Overlap:
    """Two sources' recent links overlapping by ``jaccard``; ``follower`` is the one worth
    less, ``shared`` the share of its recent links the leader also showed."""

    leader: int
    follower: int
    jaccard: float
    shared: float


class OverlapBook:
    """Each source's recent links and how many of its links another source showed first."""

    def __init__(self, sources: int = 0, *, recent: int = RECENT_LINKS) -> None:
        self.recent = int(recent)
        self._size = 0
        # Rows for more sources than there are, doubled when full: a source joins at its
        # first crawl, and copying every ring at each would cost O(n²).
        self._keys: NDArray[np.uint64] = np.zeros((0, self.recent), dtype=np.uint64)  # 0: empty
        self._head: NDArray[np.intp] = np.zeros(0, dtype=np.intp)
        self._shown: FloatArray = np.zeros(0)  # links new to the source, since it was added
        self._echoed: FloatArray = np.zeros(0)  # of which another source showed first
        # Per source crawled since this book was made, the links of its last crawl: what is
        # new to it at the next (not kept in snapshots: the first crawl after a restart only
        # notes it again).
        self.listing: dict[int, NDArray[np.uint64]] = {}
        self.grow(sources)

    def __len__(self) -> int:
        return self._size

    @property
    def keys(self) -> NDArray[np.uint64]:
        """Each source's ring of link fingerprints (0: an empty slot), a view."""
        return self._keys[: self._size]

    @property
    def shown(self) -> FloatArray:
        return self._shown[: self._size]

    @property
    def echoed(self) -> FloatArray:
        return self._echoed[: self._size]

    def grow(self, sources: int) -> None:
        if sources <= self._size:
            return
        capacity = self._head.size
        if sources > capacity:
            extra = max(sources, 2 * capacity) - capacity
            zeros = np.zeros((extra, self.recent), dtype=np.uint64)
            self._keys = np.vstack([self._keys, zeros])
            self._head = np.concatenate([self._head, np.zeros(extra, dtype=np.intp)])
            self._shown = np.concatenate([self._shown, np.zeros(extra)])
            self._echoed = np.concatenate([self._echoed, np.zeros(extra)])
        self._size = sources

    def record(self, source: int, marks: list[int], seen_before: list[bool]) -> None:
        """A crawl of ``source`` showed links with fingerprints ``marks``; ``seen_before``
        says which the crawl had seen already (on any source). The links it did not show at
        its previous crawl go to its ring; the first crawl this book sees of a source only
        notes what it lists (its backlog and navigation say nothing about who shows new links
        first)."""
        self.grow(source + 1)
        wanted = np.array(marks, dtype=np.uint64)
        before = self.listing.get(source)
        self.listing[source] = np.unique(wanted)
        if before is None or not wanted.size:
            return
        fresh = ~np.isin(wanted, before)
        if not fresh.any():
            return
        wanted, seen = wanted[fresh], np.asarray(seen_before, dtype=bool)[fresh]
        _, once = np.unique(wanted, return_index=True)  # a link listed twice is one
        once.sort()
        wanted, seen = wanted[once], seen[once]
        self._shown[source] += wanted.size
        self._echoed[source] += int(seen.sum())
        take = wanted[-self.recent :]  # the newest, when a crawl shows more than the ring
        at = (self._head[source] + np.arange(take.size)) % self.recent
        self._keys[source, at] = take
        self._head[source] = (self._head[source] + take.size) % self.recent

    def echoed_share(self) -> FloatArray:
        """Per source, the share of its links another source showed first (NaN: none yet)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.shown > 0, self.echoed / self.shown, np.nan)

    def pairs(self, value: FloatArray, *, xi: float = OVERLAP_XI) -> list[Overlap]:
        """Pairs whose recent links overlap by ``Jaccard ≥ xi``, most overlapping first; in
        each, the follower is the one with the smaller ``value``. Sources with fewer than
        :data:`MIN_LINKS` recent links are not judged."""
        n = min(len(self), value.size)
        keys = self.keys[:n]
        sizes = (keys != 0).sum(axis=1)
        judged = np.flatnonzero(sizes >= MIN_LINKS)
        if judged.size < 2:
            return []
        flat = keys[judged].ravel()
        owner = np.repeat(judged, self.recent)
        present = flat != 0
        flat, owner = flat[present], owner[present]
        order = np.argsort(flat, kind="stable")
        flat, owner = flat[order], owner[order]
        # Runs of one key: every two sources in a run share it (runs are short: a link is
        # on a few sources at most).
        starts = np.flatnonzero(np.concatenate([[True], flat[1:] != flat[:-1]]))
        ends = np.concatenate([starts[1:], [flat.size]])
        shared: dict[tuple[int, int], int] = {}
        for start, end in zip(
            starts[ends - starts > 1].tolist(), ends[ends - starts > 1].tolist(), strict=True
        ):
            group = sorted(set(owner[start:end].tolist()))
            for i, a in enumerate(group):
                for b in group[i + 1 :]:
                    shared[(a, b)] = shared.get((a, b), 0) + 1
        found = []
        for (a, b), both in shared.items():
            jaccard = both / (sizes[a] + sizes[b] - both)
            if jaccard >= xi:
                leader, follower = (a, b) if value[a] >= value[b] else (b, a)
                found.append(
                    Overlap(leader, follower, float(jaccard), both / float(sizes[follower]))
                )
        found.sort(key=lambda o: (-o.jaccard, o.leader, o.follower))
        return found

    def to_data(self) -> dict[str, Any]:
        """Plain data for a snapshot: each ring oldest first, and the counts."""
        heads = self._head[: self._size]
        rolled = [np.roll(row, -int(head)) for row, head in zip(self.keys, heads, strict=True)]
        keys = np.array(rolled, dtype=np.uint64).reshape(len(self), self.recent)
        return {"keys": keys, "shown": self.shown.copy(), "echoed": self.echoed.copy()}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> OverlapBook:
        keys = np.asarray(data["keys"], dtype=np.uint64)
        shown = np.asarray(data["shown"], dtype=np.float64)
        echoed = np.asarray(data["echoed"], dtype=np.float64)
        if keys.ndim != 2 or keys.shape[1] < 1:
            raise ValueError("overlap data: a ring of link fingerprints per source expected")
        n = keys.shape[0]
        if shown.shape != (n,) or echoed.shape != (n,):
            raise ValueError("overlap data: one shown and echoed count per source expected")
        book = cls(n, recent=keys.shape[1])
        book._keys[:n] = keys
        # Oldest first, so the next link overwrites the oldest: after the last one held.
        book._head[:n] = (keys != 0).sum(axis=1) % book.recent
        book._shown[:n], book._echoed[:n] = shown, echoed
        return book


def credit_overlaps(link_rate: FloatArray, overlaps: list[Overlap]) -> FloatArray:
    """``link_rate`` with each follower's shared share moved to its leader (a source is a
    follower once, in its most overlapping pair; a follower leads no one)."""
    rate = np.array(link_rate, dtype=np.float64)
    followed: set[int] = set()
    for o in overlaps:
        if o.follower in followed or o.leader in followed:
            continue
        moved = rate[o.follower] * o.shared
        rate[o.follower] -= moved
        rate[o.leader] += moved
        followed.add(o.follower)
    return rate


__all__ = ["MIN_LINKS", "OVERLAP_XI", "RECENT_LINKS", "Overlap", "OverlapBook", "credit_overlaps"]
