"""Each source's host (the host name of its URL: Scrapy's download slot), and what the per-host
and per-site settings make of it for the plan: weights, site scores, capacities."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol
from urllib.parse import urlsplit

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.core.identity import site_of_host
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.limits import ScheduleLimits


class _Located(Protocol):
    @property
    def url(self) -> str: ...


class SourceHosts:
    """Sources' hosts, numbered as first seen; learned as sources are added (a source keeps
    its index, so only new ones are looked at)."""

    def __init__(self) -> None:
        self._host_of: list[int] = []  # per source, its host's index in _hosts
        self._hosts: dict[str, int] = {}
        self._weights: list[float] = []  # per host, its weight (site_weights)
        self._scores: list[float] = []  # per host, its site's score (site_scores)
        self._site_of_host: list[int] = []  # per host, its site's index in _sites
        self._sites: dict[str, int] = {}

    def indices(self, sources: Sequence[_Located]) -> list[int]:
        """Per source (in source order), its host's index."""
        while len(self._host_of) < len(sources):
            host = urlsplit(sources[len(self._host_of)].url).hostname or ""
            self._host_of.append(self._hosts.setdefault(host, len(self._hosts)))
        return self._host_of

    def sites(self, sources: Sequence[_Located]) -> NDArray[np.intp]:
        """Per source, its site's index (sites numbered as first seen; a site is a
        registered domain: :func:`~scrapy_echo.core.identity.site_of_host`)."""
        host_of = self.indices(sources)
        for host in list(self._hosts)[len(self._site_of_host) :]:  # (in index order)
            site = site_of_host(host)
            self._site_of_host.append(self._sites.setdefault(site, len(self._sites)))
        return np.array(self._site_of_host, dtype=np.intp)[np.array(host_of, dtype=np.intp)]

    def weights(self, sources: Sequence[_Located], given: Mapping[str, float]) -> FloatArray | None:
        return self._by_site(sources, given, self._weights)

    def scores(self, sources: Sequence[_Located], given: Mapping[str, float]) -> FloatArray | None:
        return self._by_site(sources, given, self._scores)

    def limits(
        self,
        sources: Sequence[_Located],
        capacity: Callable[[str], float] | None,
        min_interval: float,
        max_interval: float,
    ) -> ScheduleLimits:
        """Each source's host and that host's ``capacity``, and the interval bounds."""
        host_of = self.indices(sources)
        rates = np.full(max(1, len(self._hosts)), math.inf)
        if capacity is not None:
            for host, index in self._hosts.items():
                rates[index] = capacity(host)
        return ScheduleLimits(np.array(host_of, dtype=np.intp), rates, min_interval, max_interval)

    def _by_site(
        self, sources: Sequence[_Located], given: Mapping[str, float], cache: list[float]
    ) -> FloatArray | None:
        """Per source, what ``given`` says of its host, else of its site, else 1; ``cache``
        holds it per host, in host order."""
        if not given:
            return None
        host_of = self.indices(sources)
        for host in list(self._hosts)[len(cache) :]:  # (in index order)
            value = given.get(host)
            cache.append(given.get(site_of_host(host), 1.0) if value is None else value)
        return np.array(cache, dtype=np.float64)[host_of]


__all__ = ["SourceHosts"]
