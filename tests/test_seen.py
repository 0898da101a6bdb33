"""The expiring fingerprint set: never forgets sooner than its ttl, forgets soon after, and
its merges and snapshots work on parts nobody changes."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_echo.core.seen import FingerprintSet, Housekeeping, Remembered, run_inline

TTL = 80.0  # a period of 10 s


def merge(seen: FingerprintSet, now: float) -> bool:
    job = seen.merge_job(now)
    if job is None:
        return False
    run_inline(Housekeeping("test", job, seen.install, seen.merge_failed))
    return True


steps = st.lists(
    st.tuples(
        st.floats(0.0, 12.0),  # time since the last step
        st.lists(st.integers(0, 30), max_size=6),  # marks a source shows (few: they repeat)
        st.booleans(),  # run the merge job now
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_never_forgets_sooner_than_ttl_and_forgets_soon_after(script) -> None:
    seen = FingerprintSet(TTL)
    last_seen: dict[int, float] = {}
    now = 0.0
    for gap, marks, merging in script:
        now += gap
        if merging:
            merge(seen, now)
        new = seen.add_new(marks, now)
        for mark, is_new in zip(marks, new, strict=True):
            first_here = mark not in marks[: marks.index(mark)]
            if mark in last_seen and now - last_seen[mark] < TTL:
                assert not is_new, (mark, now, last_seen[mark])  # remembered: never sooner
            if not first_here:
                assert not is_new  # twice in one crawl: new once at most
            if mark not in last_seen:
                assert is_new  # never seen: new
            last_seen[mark] = now
    # Merged every step from here on, a mark is gone a ttl and two periods (and a step)
    # after it was last seen.
    for _ in range(12):
        now += 10.0
        merge(seen, now)
    for mark, when in last_seen.items():
        if now - when > TTL + 2 * seen.period + 10.0:
            assert mark not in seen, (mark, when, now)
        elif now - when < TTL:
            assert mark in seen


def test_a_mark_shown_again_is_kept_for_another_ttl() -> None:
    seen = FingerprintSet(TTL)
    assert seen.add_new([7], 0.0) == [True]
    for now in range(10, 400, 10):  # shown at every crawl, merged at every period
        merge(seen, float(now))
        assert seen.add_new([7], float(now)) == [False]
    for now in range(400, 600, 10):  # no longer shown
        merge(seen, float(now))
    assert 7 not in seen
    assert seen.add_new([7], 600.0) == [True]


def test_nothing_to_merge_gives_no_job_and_one_merge_runs_at_a_time() -> None:
    seen = FingerprintSet(TTL)
    assert seen.merge_job(0.0) is None  # empty
    seen.add_new([1, 2], 0.0)
    assert seen.merge_job(5.0) is None  # the period is not over
    job = seen.merge_job(12.0)
    assert job is not None
    seen.add_new([3], 25.0)  # a new period (from 25 s) while the merge runs
    assert seen.merge_job(25.0) is None  # one merge at a time
    seen.install(job())
    assert [m in seen for m in (1, 2, 3, 4)] == [True, True, True, False]
    assert seen.merge_job(30.0) is None  # 3's period is not over
    assert seen.merge_job(35.0) is not None


def test_a_failed_merge_keeps_everything_and_is_tried_again() -> None:
    seen = FingerprintSet(TTL)
    seen.add_new([1, 2], 0.0)
    job = seen.merge_job(12.0)
    assert job is not None

    def broken() -> Remembered:
        raise MemoryError("no room")

    with pytest.raises(MemoryError):
        run_inline(Housekeeping("test", broken, seen.install, seen.merge_failed))
    assert 1 in seen and 2 in seen
    assert merge(seen, 13.0)
    assert 1 in seen and 2 in seen and len(seen) == 2


def test_capture_is_not_changed_by_later_sightings_or_merges() -> None:
    seen = FingerprintSet(TTL)
    seen.add_new([5, 1], 0.0)
    merge(seen, 11.0)
    seen.add_new([9, 5], 11.0)
    build = seen.capture(11.0)
    seen.add_new([42], 30.0)
    merge(seen, 200.0)  # 1, 5 and 9 expire from the live set
    assert 1 not in seen
    captured = build()
    assert captured.keys.tolist() == [1, 5, 9]
    assert captured.stamps.tolist() == [11.0, 11.0, 11.0]
    back = FingerprintSet.restore(TTL, captured.keys, captured.stamps, 11.0)
    assert back == {1, 5, 9}
    assert back.add_new([9, 10], 12.0) == [False, True]


def test_restore_keeps_the_latest_time_of_a_repeated_mark_and_checks_lengths() -> None:
    back = FingerprintSet.restore(TTL, np.array([4, 2, 4], np.uint64), np.array([1.0, 2, 50]), 0)
    assert back == {2, 4}
    merge(back, 120.0)  # 2 was last seen at 2 s: gone; 4 at 50 s: kept
    assert 2 not in back and 4 in back
    with pytest.raises(ValueError, match="2 fingerprints but 1 times"):
        FingerprintSet.restore(TTL, [1, 2], np.array([0.0]), 0.0)
    old = FingerprintSet.restore(TTL, [3], None, now=100.0)  # no times: seen when saved
    merge(old, 170.0)
    assert 3 in old


def test_never_forgets_without_a_ttl_and_rejects_bad_ones() -> None:
    seen = FingerprintSet()
    seen.add_new([1], 0.0)
    assert seen.merge_job(1e12) is None and 1 in seen
    for bad in (0.0, -5.0, math.nan):
        with pytest.raises(ValueError, match="ttl"):
            FingerprintSet(bad)


def test_membership_of_things_that_are_not_fingerprints() -> None:
    seen = FingerprintSet.restore(TTL, [2**64 - 1], None, 0.0)
    assert 2**64 - 1 in seen
    assert -1 not in seen and 2**64 not in seen and "x" not in seen
