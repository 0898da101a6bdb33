"""A held reactor moves the clocks of the slots that dispatched just before the hold (Scrapy's
own downloader slots, a hand-driven clock)."""

from __future__ import annotations

from collections import Counter

from scrapy.core.downloader import Slot

from scrapy_echo.crawler.reactor_stalls import MARGIN, STALL, TICK, ReactorStalls


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def watcher(slots: dict[str, Slot]) -> tuple[ReactorStalls, Clock, Counter[str], dict]:
    clock, counts, highest = Clock(), Counter[str](), {}

    def inc(name: str, count: int) -> None:
        counts[name] += count

    def top(name: str, value: float) -> None:
        highest[name] = max(highest.get(name, 0.0), value)

    return ReactorStalls(lambda: slots, inc, top, clock=clock), clock, counts, highest


def slot(delay: float, lastseen: float) -> Slot:
    made = Slot(concurrency=1, delay=delay, jitter=0.0)
    made.lastseen = lastseen
    return made


def test_a_hold_moves_the_slots_that_dispatched_just_before_it_to_when_it_ended() -> None:
    slots = {
        "just-before": slot(0.5, 100.0 - MARGIN / 2),  # dispatched, maybe not sent
        "long-before": slot(0.5, 100.0 - 3 * MARGIN),  # sent before the last tick on time
        "no-delay": slot(0.0, 100.0),  # nothing to space
    }
    stalls, clock, counts, highest = watcher(slots)
    assert stalls.tick() == 0  # the first tick only starts the clock
    clock.now += TICK + 0.7  # held 0.7 s
    assert stalls.tick() == 1
    assert slots["just-before"].lastseen == clock.now
    assert slots["long-before"].lastseen == 100.0 - 3 * MARGIN
    assert slots["no-delay"].lastseen == 100.0
    assert counts == {"echo/politeness/stalls": 1, "echo/politeness/stalled_slots": 1}
    assert highest["echo/politeness/longest_stall"] == round(0.7 + TICK, 3)


def test_ticks_on_time_or_barely_late_move_nothing() -> None:
    slots = {"busy": slot(2.0, 100.0)}
    stalls, clock, counts, _ = watcher(slots)
    stalls.tick()
    for late in (0.0, STALL / 2, STALL):
        clock.now += TICK + late
        slots["busy"].lastseen = clock.now - 0.01  # a dispatch just now, sent on time
        assert stalls.tick() == 0
    assert slots["busy"].lastseen == clock.now - 0.01
    assert not counts


def test_the_next_request_waits_a_full_delay_from_the_end_of_the_hold() -> None:
    """What Scrapy's downloader computes for the slot's next dispatch: no sooner than a delay
    after the hold ended, where the first request really left."""
    slots = {"host": slot(0.5, 100.0)}
    stalls, clock, _, _ = watcher(slots)
    stalls.tick()
    clock.now += TICK + 0.4
    stalls.tick()
    host = slots["host"]
    penalty = host.download_delay() - clock.now + host.lastseen  # Scrapy's _process_queue
    assert penalty == 0.5
