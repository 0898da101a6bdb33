"""Synthetic page-view logs with known temporal and non-temporal sites, for the tests and the
benchmark of ``scrapy echo-rank-sites`` (docs/how-it-works.rst, "Ranking sites by how
temporal they are").

Each page follows the paper's interest curve: born at a uniform time (some before the log
starts, some in its last days), ``A`` views in all (lognormal), lognormal interest in its
age. A temporal page has the 70% quantile of its interest within about a day, an evergreen
one spreads it over weeks. Real sites mix both: a temporal site's pages are mostly temporal,
a non-temporal site's mostly evergreen. Each day's views are Poisson around the curve's mass in
that day times a weekday factor (fewer at weekends). :func:`default_sites` adds a huge
non-temporal site (most of the views) and a tiny temporal one (ten pages), the two a ranking
by raw counts gets wrong. Sites span several hosts of one registered domain, and a few rows
name their page with a fragment, which canonicalisation removes.

>>> import tempfile, pathlib
>>> log = write_log(pathlib.Path(tempfile.mkdtemp()) / "views.csv", default_sites(scale=0.1))
>>> log.labels["huge-encyclopedia.org"], log.labels["tiny-bulletin.co.uk"], log.rows > 1000
(False, True, True)
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist

import numpy as np

from scrapy_echo.model.temporal_sites import accumulated_interest

START = 1_704_067_200  # Monday 1 January 2024, 00:00 UTC: day k is weekday k % 7
WEEKDAY = np.array([1.0, 1.0, 1.0, 1.0, 0.95, 0.7, 0.75])  # Monday first
_SUFFIXES = ("com", "co.uk", "de", "com.au", "org", "fr")
_BATCH = 20_000  # pages whose day grid is built at once


@dataclass(frozen=True)
class SiteSpec:
    """One synthetic site: its registered domain, the hosts its pages are on, whether it is
    temporal, its page count, the share of its pages that are temporal, and the median of
    its pages' lifetime views."""

    site: str
    hosts: tuple[str, ...]
    temporal: bool
    pages: int
    share: float
    views: float
    born_within: tuple[float, float] = (-0.3, 1.0)  # birth range, in log lengths
    # Median e^µ of its temporal pages' interest, in days (None: the generator's default);
    # a weekly magazine's pages stay read for days, a wire's for hours.
    hot_median: float | None = None


@dataclass(frozen=True)
class GeneratedLog:
    labels: dict[str, bool]  # site -> temporal
    rows: int
    pages: int
    # page URL -> temporal: drawn temporal, or by the planted rule (pages with a view only)
    page_labels: dict[str, bool] = field(default_factory=dict)


def default_sites(
    *, scale: float = 1.0, temporal: int = 12, plain: int = 18, seed: int = 0
) -> list[SiteSpec]:
    """``temporal`` temporal and ``plain`` non-temporal sites of 150 to 600 pages times
    ``scale``, a huge non-temporal site (60 times that, three times the views per page) and
    a tiny temporal one (ten pages born inside the log, whatever the scale)."""
    rng = np.random.default_rng(seed)
    sites = []
    for i in range(temporal + plain):
        hot = i < temporal
        name = f"{'daily-wire' if hot else 'howto-guide'}{i:02d}.{_SUFFIXES[i % len(_SUFFIXES)]}"
        share = rng.uniform(0.65, 0.95) if hot else rng.uniform(0.0, 0.2)
        hosts = (f"www.{name}", f"{'news' if hot else 'docs'}.{name}")
        pages = max(1, round(scale * int(rng.integers(150, 600))))
        sites.append(SiteSpec(name, hosts, hot, pages, share, float(rng.uniform(40, 120))))
    huge = tuple(f"{lang}.huge-encyclopedia.org" for lang in ("en", "de", "fr"))
    sites.append(
        SiteSpec("huge-encyclopedia.org", huge, False, max(1, round(scale * 60 * 375)), 0.08, 240.0)
    )
    sites.append(
        SiteSpec(
            "tiny-bulletin.co.uk", ("www.tiny-bulletin.co.uk",), True, 10, 0.9, 30.0, (0.05, 0.85)
        )
    )
    return sites


def write_log(
    path: str | os.PathLike[str],
    sites: list[SiteSpec],
    *,
    days: int = 60,
    seed: int = 0,
    fmt: str | None = None,
    fragment_share: float = 0.02,
    planted: tuple[float, float] | None = None,
) -> GeneratedLog:
    """Write a page-view log of ``days`` daily bins (CSV, or JSON Lines for a ``.jsonl``
    path or ``fmt="jsonl"``), rows of days with views only; the sites' true labels and the
    pages'.

    A page's label is how it was drawn (temporal or evergreen), or with ``planted = (n, q)``
    the paper's rule ``Φ(n) > q`` on its true curve: then the temporal draws spread wider
    (``µ`` with a standard deviation of 0.6, not 0.35), so a band of pages lies between the
    planted rule and other thresholds, and tuning has a right answer to find."""
    path = Path(path)
    fmt = fmt or ("jsonl" if path.suffix.lower() in (".jsonl", ".ndjson", ".json") else "csv")
    if fmt not in ("csv", "jsonl"):
        raise ValueError(f"fmt ({fmt!r}) must be 'csv' or 'jsonl'")
    if days < 1:
        raise ValueError(f"days ({days!r}) must be >= 1")
    rng = np.random.default_rng(seed)
    weekday = WEEKDAY[np.arange(days) % 7]
    edges = np.arange(days + 1, dtype=np.float64)
    rows = pages = 0
    page_labels: dict[str, bool] = {}
    if planted is not None and not (planted[0] > 0 and 0 < planted[1] < 1):
        raise ValueError(f"planted ({planted!r}) must be (n > 0, 0 < q < 1)")
    with open(path, "w", encoding="utf-8", newline="") as out:
        if fmt == "csv":
            out.write("url,ts,clicks\n")
        for spec in sites:
            for first in range(0, spec.pages, _BATCH):
                n = min(_BATCH, spec.pages - first)
                hot = rng.random(n) < spec.share
                median = spec.hot_median or (0.3 if planted else 0.4)
                spread = (np.log(median), 0.6 if planted else 0.35)
                mu = np.where(hot, rng.normal(*spread, n), rng.normal(np.log(20), 0.5, n))
                sigma = np.where(hot, rng.uniform(0.5, 1.1, n), rng.uniform(0.7, 1.4, n))
                birth = rng.uniform(*spec.born_within, n) * days
                total = rng.lognormal(np.log(spec.views), 1.0, n)
                cdf = accumulated_interest(mu[:, None], sigma[:, None], edges - birth[:, None])
                views = rng.poisson(total[:, None] * np.diff(cdf, axis=1) * weekday)
                page, day = np.nonzero(views)
                urls = [
                    f"https://{spec.hosts[j % len(spec.hosts)]}/p/{j}.html"
                    for j in range(first, first + n)
                ]
                label = hot
                if planted is not None:
                    z = NormalDist().inv_cdf(planted[1])
                    label = mu + sigma * z < np.log(planted[0])
                seen = np.any(views > 0, axis=1)
                page_labels.update((urls[j], bool(label[j])) for j in np.flatnonzero(seen).tolist())
                tagged = rng.random(page.size) < fragment_share
                out.write(_lines(fmt, urls, page, day, views[page, day], tagged))
                rows += page.size
                pages += int(np.any(views > 0, axis=1).sum())
    return GeneratedLog({spec.site: spec.temporal for spec in sites}, rows, pages, page_labels)


def _lines(
    fmt: str,
    urls: list[str],
    page: np.ndarray,
    day: np.ndarray,
    views: np.ndarray,
    tagged: np.ndarray,
) -> str:
    names = [
        urls[p] + ("#comments" if t else "")
        for p, t in zip(page.tolist(), tagged.tolist(), strict=True)
    ]
    times = (START + 86_400 * day).tolist()
    if fmt == "csv":
        return "".join(
            f"{u},{t},{v}\n" for u, t, v in zip(names, times, views.tolist(), strict=True)
        )
    return "".join(
        f'{{"url": {json.dumps(u)}, "ts": {t}, "clicks": {v}}}\n'
        for u, t, v in zip(names, times, views.tolist(), strict=True)
    )


def write_labels(path: str | os.PathLike[str], labels: dict[str, bool]) -> None:
    """The labels as the command reads them: CSV ``site,temporal`` with 1 or 0."""
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["site", "temporal"])
        writer.writerows([site, int(hot)] for site, hot in sorted(labels.items()))


def write_page_labels(path: str | os.PathLike[str], labels: dict[str, bool]) -> None:
    """Page labels as :func:`scrapy_echo.inputs.page_labels.read_page_labels` reads them: CSV
    ``url,label`` with ``temporal`` or ``untemporal``."""
    with open(path, "w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["url", "label"])
        writer.writerows([url, "temporal" if hot else "untemporal"] for url, hot in labels.items())
