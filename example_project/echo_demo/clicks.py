"""The demo site's visitors: clicks on the articles a crawler fetched, as a click feed.

A search engine only logs clicks on pages it has indexed, so an article earns clicks from the
moment the crawler fetched it; before that its visitors went elsewhere. Each tick appends, for
every fetched article, a Poisson number of clicks with mean ``p (e^{-μ a1} - e^{-μ a2})`` over
the ages ``[a1, a2]`` the tick covers, as JSON Lines that ECHO reads (``ECHO_CLICK_FEED``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from twisted.internet.task import LoopingCall

from echo_demo.site import NewsSite


class ClickSimulator:
    def __init__(
        self, site: NewsSite, feed: Path, *, port: int, period: float = 1.0, seed: int = 0
    ) -> None:
        self.site = site
        self.feed = feed
        self.base = f"http://127.0.0.1:{port}"
        self.period = period
        self.rng = np.random.default_rng(seed)
        self._last = 0.0
        self._loop = LoopingCall(self.tick)

    def start(self) -> None:
        self._loop.start(self.period, now=False)

    def stop(self) -> None:
        if self._loop.running:
            self._loop.stop()

    def tick(self) -> None:
        now = self.site.clock()
        rows = []
        for ident, fetched in self.site.first_fetched.items():
            article = self.site.model.articles[ident]
            a1 = max(self._last, fetched) - article.published
            a2 = now - article.published
            if a2 <= a1:
                continue
            mean = article.profit * (math.exp(-article.decay * a1) - math.exp(-article.decay * a2))
            clicks = int(self.rng.poisson(mean))
            if clicks:
                rows.append({
                    "url": f"{self.base}/article/{ident}.html",
                    "ts": self.site.epoch + now,
                    "clicks": clicks,
                })  # fmt: skip
        self._last = now
        if rows:
            with open(self.feed, "a", encoding="utf-8") as handle:
                handle.writelines(json.dumps(row) + "\n" for row in rows)
