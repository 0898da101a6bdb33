"""A capacity-aware greedy that knows the trace: the upper reference on webs whose hosts
decide the crawl (docs/simulator.rst, "Hosts").

It reads each source's true rate ``λ`` (its links per second), value ``P`` (its pages' mean
clicks) and decay ``μ`` (from its pages' click delays), each page's true publication time,
and each host's delay. At each slot, among the sources whose host is free (the replay hides
the others, as for every policy), it takes the best of:

- fetching a source's newest waiting page: worth ``P e^{-μ a}`` at age ``a``;
- crawling a hub, per request of its host: the crawl followed by its ``m`` newest new pages,
  one per host delay, best ``m``. The ``j``-th newest page that appeared since the last crawl
  ``τ`` ago is ``Γ(j, λ)`` old, so it is there and new with probability
  ``P(Γ(j, λ) ≤ τ)``, and worth, fetched ``j d`` after the crawl, on average
  ``P (λ/(λ+μ))^j e^{-μ j d} P(Γ(j, λ+μ) ≤ τ)``; the crawl and its ``m`` pages take
  ``m + 1`` requests.

A source never crawled is crawled first (its first crawl only records what it lists, as
ECHO's does). Neither learning nor the budget's price is modelled: the slots are the budget,
and each goes to the most valuable request a free host can take.
"""

from __future__ import annotations

import math
from urllib.parse import urlsplit

import numpy as np

from scrapy_echo.model.decisions.frontier import Frontier
from scrapy_echo.model.decisions.policies import Decision, Policy
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.host_requests import hub_value_per_request
from scrapy_echo.sim.trace import Trace
from scrapy_echo.sim.web_hosts import first_sources

_MOST_PAGES = 10  # pages after a hub crawl weighed at most (a hub shows about as many)


class CapacityGreedy(Policy):
    """The capacity-aware greedy with the trace's true parameters; only the simulator can
    run it (:meth:`attach`)."""

    name = "capacity-greedy"
    uses_solver = False

    def __init__(self, *, seed: int = 0, repair_solves: int = 0) -> None:
        super().__init__(seed=seed, repair_solves=repair_solves)
        self._rate = np.zeros(0)
        self._profit = np.zeros(0)
        self._decay = np.zeros(0)
        self._delay = np.zeros(0)
        self._created: dict[str, float] = {}

    def attach(self, trace: Trace, discovered: FloatArray, page_urls: list[str]) -> None:
        """Read ``trace``'s true parameters (``page_urls``: the replay's URL of each page);
        :func:`~scrapy_echo.sim.engine.simulate` calls this before the first slot."""
        del discovered  # (the greedy oracle's signature: this one needs no discoveries)
        n = trace.n_sources
        own = first_sources(trace.link_page, trace.link_source, trace.link_appeared, trace.n_pages)
        pages_of = np.bincount(own, minlength=n).astype(np.float64)
        self._rate = pages_of / max(trace.duration, 1.0)
        clicks = np.bincount(own[trace.click_page], trace.click_count, minlength=n)
        self._profit = np.divide(clicks, pages_of, out=np.zeros(n), where=pages_of > 0)
        delays = trace.click_ts - trace.page_created[trace.click_page]
        weighted = np.bincount(own[trace.click_page], trace.click_count * delays, minlength=n)
        mean_delay = np.divide(weighted, clicks, out=np.full(n, math.inf), where=clicks > 0)
        self._decay = 1.0 / np.maximum(mean_delay, 1e-9)
        hosts = trace.hosts
        delay = [
            (hosts.delay.get(urlsplit(url).hostname or "", 0.0) if hosts is not None else 0.0)
            for url in trace.source_urls
        ]
        self._delay = np.array(delay, dtype=np.float64)
        self._created = dict(zip(page_urls, trace.page_created.tolist(), strict=True))

    def choose(self, now: float, last_crawl: FloatArray, frontier: Frontier) -> Decision | None:
        first = self._first_crawl(last_crawl)
        if first is not None or not last_crawl.size:
            return first
        n = last_crawl.size
        rate, profit, decay = self._rate[:n], self._profit[:n], self._decay[:n]
        hub = hub_value_per_request(
            now - last_crawl,
            rate=rate,
            profit=profit,
            decay=decay,
            delay=self._delay[:n],
            most=_MOST_PAGES,
        )
        best_source = int(hub.argmax())
        best = Decision("source", best_source)
        value = float(hub[best_source])
        for source in frontier.waiting_sources().tolist():
            url = getattr(frontier.head(source).page, "url", "")
            age = max(now - self._created.get(url, now), 0.0)
            worth = float(profit[source] * math.exp(-decay[source] * age))
            if worth > value:
                best, value = Decision("page", source), worth
        return best


__all__ = ["CapacityGreedy"]
