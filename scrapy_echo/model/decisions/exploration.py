"""Exploration: a share of source crawls for the sources least recently looked at, the share
tuned by UCB1 (Pham et al., WSDM 2018, section 4.3, "BANDIT"; docs/how-it-works.rst,
"Exploration").

A source whose estimates came out low is recrawled rarely or never, so they are never
corrected. Pham et al. spend ``1 - r`` of each cycle's crawls on round robin (the source crawled
longest ago) and picks the exploitation ratio ``r`` each cycle with UCB1 (Auer et al. 2002)
over the arms ``{0.6, 0.7, 0.8, 0.9, 1.0}``, rewarded by what the cycle's crawls found. Here
a cycle is a plan (a re-solve period) and the reward is the value the cycle's source crawls
found per crawl (each new page at its source's remaining value ``P e^{-μ age}``), divided by
the largest such value of any cycle so far: UCB1 wants rewards in ``[0, 1]``, and the paper
does not say how it scaled them.
"""

from __future__ import annotations

import math
from typing import Any

SEED_RATIOS = (0.6, 0.7, 0.8, 0.9, 1.0)


class Ucb1:
    """UCB1 over ``arms`` arms with rewards in ``[0, 1]``: each arm once, then the arm with
    the largest ``mean + sqrt(2 ln n / n_j)``.

    Examples
    --------
    >>> bandit = Ucb1(2)
    >>> [bandit.choose() for _ in range(1)], bandit.update(0, 1.0)
    ([0], None)
    >>> bandit.choose(), bandit.update(1, 0.0)
    (1, None)
    >>> bandit.choose()  # arm 0 paid, arm 1 did not
    0
    """

    def __init__(self, arms: int) -> None:
        if arms < 1:
            raise ValueError(f"a bandit needs at least one arm, got {arms!r}")
        self.plays = [0] * arms
        self.totals = [0.0] * arms

    def choose(self) -> int:
        for arm, plays in enumerate(self.plays):
            if plays == 0:
                return arm
        log_n = math.log(sum(self.plays))
        bounds = [
            total / plays + math.sqrt(2.0 * log_n / plays)
            for total, plays in zip(self.totals, self.plays, strict=True)
        ]
        return max(range(len(bounds)), key=bounds.__getitem__)

    def update(self, arm: int, reward: float) -> None:
        if not 0.0 <= reward <= 1.0:
            raise ValueError(f"UCB1 rewards are in [0, 1], got {reward!r}")
        self.plays[arm] += 1
        self.totals[arm] += reward

    def means(self) -> list[float]:
        return [t / p if p else math.nan for t, p in zip(self.totals, self.plays, strict=True)]


class ExplorationShare:
    """Which source crawls of a cycle explore, with the cycle's exploitation ratio from UCB1.

    The driver calls :meth:`next_cycle` at each plan, :meth:`explore_next` when a source
    crawl is to be made (and :meth:`crawled` once it is), and :meth:`found` with the value a
    source crawl revealed."""

    def __init__(self, ratios: tuple[float, ...] = SEED_RATIOS) -> None:
        if not ratios or any(not 0.0 <= r <= 1.0 for r in ratios):
            raise ValueError(f"exploitation ratios are shares in [0, 1], got {ratios!r}")
        self.ratios = tuple(float(r) for r in ratios)
        self.bandit = Ucb1(len(self.ratios))
        self.arm = self.bandit.choose()
        self.crawls = 0  # source crawls this cycle
        self.explored = 0  # of which exploring
        self.value = 0.0  # found by them
        self.best = 0.0  # the largest value per crawl of any cycle: the reward's scale
        self.cycles = 0

    @property
    def ratio(self) -> float:
        return self.ratios[self.arm]

    def next_cycle(self) -> None:
        """Reward the cycle that ends (if it crawled sources) and pick the next ratio."""
        if self.crawls:
            per_crawl = self.value / self.crawls
            self.best = max(self.best, per_crawl)
            reward = per_crawl / self.best if self.best > 0 else 0.0
            self.bandit.update(self.arm, min(max(reward, 0.0), 1.0))
            self.cycles += 1
        self.arm = self.bandit.choose()
        self.crawls = self.explored = 0
        self.value = 0.0

    def explore_next(self) -> bool:
        """Whether the next source crawl explores: while fewer than ``1 - r`` of this cycle's
        source crawls have."""
        return self.explored < (1.0 - self.ratio) * (self.crawls + 1) - 1e-9

    def crawled(self, *, explored: bool) -> None:
        self.crawls += 1
        self.explored += explored

    def found(self, value: float) -> None:
        if math.isfinite(value) and value > 0:
            self.value += value

    def to_data(self) -> dict[str, Any]:
        """What was learned and this cycle's counts, as plain data (for snapshots)."""
        return {
            "plays": list(self.bandit.plays),
            "totals": list(self.bandit.totals),
            "arm": self.arm,
            "crawls": self.crawls,
            "explored": self.explored,
            "value": self.value,
            "best": self.best,
            "cycles": self.cycles,
        }

    def load_data(self, data: dict[str, Any]) -> None:
        """Take :meth:`to_data` back; ``ValueError``, ``KeyError`` or ``TypeError`` if it is
        not one for these ratios."""
        plays, totals = [int(p) for p in data["plays"]], [float(t) for t in data["totals"]]
        arm = int(data["arm"])
        if not len(plays) == len(totals) == len(self.ratios) or not 0 <= arm < len(plays):
            raise ValueError("exploration data for other exploitation ratios")
        self.bandit.plays, self.bandit.totals, self.arm = plays, totals, arm
        self.crawls, self.explored = int(data["crawls"]), int(data["explored"])
        self.value, self.best = float(data["value"]), float(data["best"])
        self.cycles = int(data["cycles"])


__all__ = ["SEED_RATIOS", "ExplorationShare", "Ucb1"]
