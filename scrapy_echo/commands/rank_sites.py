"""``scrapy echo-rank-sites``: sites ranked by how temporal their pages are, from a page-view
log (Wang et al. 2008; docs/how-it-works.rst, "Ranking sites by how temporal they are").

LOG is a page-view log in the click feed's formats: JSON Lines or CSV rows ``url, ts,
clicks``, ``clicks`` being the page's views in the bin starting at ``ts`` (bad rows are
skipped and counted). Each page's interest curve is fitted; a page that gathers more than
--quantile of its interest within --days days is temporal; pages with fewer than
--min-views views or seen for less than --days days are left out, and counted. A page
already viewed in the log's first bin was born before the log: it is fitted at every birth
up to --max-birth-lag days before (default: the log's length) and judged when its plausible
births agree, counted as birth_unknown when they do not (--drop-alive-at-start leaves all of
them out; --keep-alive-at-start takes them as born at the log's start). A site (--site-level:
host, as the paper, or registered domain, or folder = host and first path segment) scores
--alpha times its share of temporal pages plus --beta times its share of views on temporal
pages; sites with fewer than --min-pages classified pages are not ranked.

With --page-labels FILE (CSV or JSON Lines rows ``url,label``, label temporal/untemporal or
1/0), the thresholds and weights are tuned as the paper tunes them: (--days, --quantile) on a
grid to the most hits on the labelled pages (or the best Performance with --weights), then
--alpha:--beta on a grid to the best page-level F of the top --top sites (100 without
--top). The command prints the tuned triple and ranks with it.

OUT gets the chosen sites, best first: the --top K, or without --top those scoring at least
--min-score (0.5). Its columns: site, score, score1, score2, pages, temporal_pages, views,
temporal_views; ``scrapy echo-discover OUT`` takes it as its host list (host or domain level).

With --labels FILE (CSV ``site,temporal``, 1/0 or true/false; a site named at --site-level),
a site is predicted temporal when it is written to OUT. The command prints, over the
labelled sites, the paper's hits (right either way), misses, false alarms and Performance =
A hit - B miss - C false alarm (--weights A,B,C), precision, recall and F; and the paper's
page-level measure of the written sites: precision = their temporal pages / their pages,
recall = their temporal pages / all temporal pages.
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np
from scrapy.commands import ScrapyCommand
from scrapy.exceptions import UsageError

from scrapy_echo.core.identity import site_of, site_of_host
from scrapy_echo.inputs.page_labels import PageLabels, read_page_labels
from scrapy_echo.inputs.pageview_log import (
    SITE_LEVEL,
    SITE_LEVELS,
    folder_of,
    read_page_views,
    sites_of_pages,
)
from scrapy_echo.model import site_tuning
from scrapy_echo.model import temporal_sites as ts
from scrapy_echo.model.birth_lag import BirthLags, fit_birth_lags

# site first: echo-discover reads the file as its host list.
COLUMNS = (
    "site",
    "score",
    "score1",
    "score2",
    "pages",
    "temporal_pages",
    "views",
    "temporal_views",
)
_TRUE, _FALSE = ("1", "true", "yes", "t", "y"), ("0", "false", "no", "f", "n")


class Command(ScrapyCommand):
    requires_project = False
    requires_crawler_process = False
    default_settings: ClassVar[dict[str, Any]] = {"LOG_ENABLED": False}

    def syntax(self) -> str:
        return (
            "LOG -o OUT.csv [--top K] [--days N] [--quantile Q] [--site-level LEVEL] "
            "[--page-labels FILE] [--labels FILE]"
        )

    def short_desc(self) -> str:
        return "Rank sites by how temporal their pages are, from a page-view log"

    def long_desc(self) -> str:
        return (__doc__ or "").strip()

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        super().add_options(parser)
        add = parser.add_argument
        add("-o", "--output", required=True, help="CSV file to write the chosen sites to")
        add("--top", type=int, help="write the K best sites")
        add("--min-score", type=float, help="write sites scoring at least this (0.5 without --top)")
        add("--days", type=float, default=ts.N_DAYS, help="n: days of the rule Φ(n) > q (3)")
        add("--quantile", type=float, default=ts.QUANTILE, help="q: share of interest (0.7)")
        add("--alpha", type=float, help="weight of the share of temporal pages (0.6)")
        add("--beta", type=float, help="weight of the share of views on them (0.4)")
        add("--min-views", type=float, default=ts.MIN_VIEWS, help="views to classify a page (10)")
        add(
            "--min-pages",
            type=int,
            default=ts.MIN_SITE_PAGES,
            help="classified pages to rank a site (3)",
        )
        add("--bin-hours", type=float, default=24.0, help="hours per bin views are counted in (24)")
        alive = parser.add_mutually_exclusive_group()
        alive.add_argument(
            "--keep-alive-at-start",
            action="store_true",
            help="take pages viewed in the log's first bin as born at its start",
        )
        alive.add_argument(
            "--drop-alive-at-start",
            action="store_true",
            help="leave out pages viewed in the log's first bin (not fitted)",
        )
        add(
            "--max-birth-lag",
            type=float,
            help="days before the log a page alive at its start may be born (the log's length)",
        )
        add(
            "--site-level",
            choices=SITE_LEVELS,
            default=SITE_LEVEL,
            help="a site is a host (the paper's), a registered domain or a folder (host)",
        )
        add("--page-labels", help="CSV/JSON Lines url,label: tune n, q and alpha:beta on them")
        add("--format", choices=("csv", "jsonl"), help="LOG's format (default: its suffix)")
        add("--labels", help="CSV site,temporal: print the paper's measures against it")
        add(
            "--weights",
            help="A,B,C of Performance (1,1,1); with --page-labels, tune to it, not to hits",
        )

    def run(self, args: list[str], opts: argparse.Namespace) -> None:
        if len(args) != 1:
            raise UsageError("give one page-view log: scrapy echo-rank-sites LOG -o OUT.csv")
        alpha, beta, weights = _check(opts)
        labels = _read_labels(opts.labels, opts.site_level) if opts.labels else None
        try:
            log = read_page_views(args[0], fmt=opts.format)
            page_labels = read_page_labels(opts.page_labels) if opts.page_labels else None
        except (OSError, ValueError) as exc:
            raise UsageError(str(exc)) from None
        bad = ", ".join(f"{kind} {n}" for kind, n in sorted(log.invalid.items())) or "none"
        if not log.rows:
            raise UsageError(f"{args[0]}: no usable page-view rows (bad rows: {bad})")
        site, names = sites_of_pages(log.urls, level=opts.site_level)
        t, bin_days = log.ts / 86400.0, opts.bin_hours / 24
        curves = ts.fit_interest_curves(
            log.page, t, log.views, pages=len(log.urls), bin_days=bin_days
        )
        lags = None
        if not (opts.keep_alive_at_start or opts.drop_alive_at_start):
            lags = fit_birth_lags(
                log.page,
                t,
                log.views,
                curves,
                bin_days=bin_days,
                max_lag=opts.max_birth_lag,
                min_views=opts.min_views,
            )
        n, q = opts.days, opts.quantile
        print(f"read {log.rows} rows of {args[0]} (bad rows skipped: {bad})")
        if page_labels is not None:
            n, q, alpha, beta = _tune(
                opts, page_labels, log.urls, site, names, curves, lags, weights
            )
        if opts.keep_alive_at_start:
            classes = ts.classify_pages(
                curves, n=n, q=q, min_views=opts.min_views, keep_alive_at_start=True
            )
        else:
            classes = site_tuning.classify(curves, lags, n=n, q=q, min_views=opts.min_views)
        scores = ts.score_sites(
            site,
            curves,
            classes,
            sites=len(names),
            alpha=alpha,
            beta=beta,
            min_pages=opts.min_pages,
        )
        chosen = scores.order[: opts.top] if opts.top else scores.order
        floor = opts.min_score if opts.min_score is not None else (0.0 if opts.top else 0.5)
        chosen = chosen[scores.score[chosen] >= floor]
        _write(Path(opts.output), chosen, names, scores)
        left = ", ".join(f"{why} {k}" for why, k in classes.left_out.items())
        print(
            f"{len(log.urls)} pages on {len(names)} sites ({opts.site_level} level): "
            f"{int(classes.classified.sum())} classified, {int(classes.temporal.sum())} of "
            f"them temporal; left out: {left}"
        )
        print(
            f"{scores.order.size} sites ranked ({len(names) - scores.order.size} with fewer "
            f"than {opts.min_pages} classified pages not); wrote {chosen.size} to {opts.output}"
        )
        if labels is not None:
            _evaluate(labels, names, scores, chosen, weights)


def _tune(
    opts: argparse.Namespace,
    page_labels: PageLabels,
    urls: list[str],
    site: np.ndarray,
    names: list[str],
    curves: ts.InterestCurves,
    lags: BirthLags | None,
    weights: tuple[float, float, float],
) -> tuple[float, float, float, float]:
    """Tune (n, q) and alpha:beta on the labelled pages; print and return them."""
    pages, hot, missing = page_labels.match(urls)
    skipped = ", ".join(f"{k} {v}" for k, v in sorted(page_labels.invalid.items())) or "none"
    print(
        f"page labels: {pages.size} pages found in the log ({int(hot.sum())} temporal), "
        f"{missing} not in it; bad rows skipped: {skipped}"
    )
    if not pages.size:
        raise UsageError(f"--page-labels {opts.page_labels}: no labelled page is in the log")
    if opts.keep_alive_at_start:
        curves = ts.InterestCurves(
            curves.views,
            curves.birth,
            curves.mu,
            curves.sigma,
            curves.observed,
            np.zeros_like(curves.alive_at_start),
        )
    tuned = site_tuning.tune(
        site,
        curves,
        pages,
        hot,
        sites=len(names),
        birth_lags=lags,
        top=opts.top or site_tuning.TOP_SITES,
        min_views=opts.min_views,
        min_pages=opts.min_pages,
        # The paper tunes to the most hits; given --weights, to the best Performance.
        weights=site_tuning.HITS if opts.weights is None else weights,
    )
    fit = tuned.thresholds
    print(
        f"tuned: n {tuned.n:g} days, q {tuned.q:g} (hits {fit.hits}, misses {fit.misses}, "
        f"false alarms {fit.false_alarms}, not judged {fit.unjudged} of {pages.size}); "
        f"alpha:beta {tuned.alpha:g}:{tuned.beta:g} (top {opts.top or site_tuning.TOP_SITES} "
        f"sites' pages: precision {tuned.precision:.3f}, recall {tuned.recall:.3f}, "
        f"F {tuned.f:.3f})"
    )
    return tuned.n, tuned.q, tuned.alpha, tuned.beta


def _check(opts: argparse.Namespace) -> tuple[float, float, tuple[float, float, float]]:
    if opts.top is not None and opts.top < 1:
        raise UsageError(f"--top ({opts.top}) must be at least 1")
    if opts.min_score is not None and not 0 <= opts.min_score <= 1:
        raise UsageError(f"--min-score ({opts.min_score}) must lie in [0, 1]")
    if not 0 < opts.days < float("inf"):
        raise UsageError(f"--days ({opts.days}) must be a number of days > 0")
    if not 0 < opts.quantile < 1:
        raise UsageError(f"--quantile ({opts.quantile}) must lie strictly between 0 and 1")
    if not 0 < opts.bin_hours < float("inf"):
        raise UsageError(f"--bin-hours ({opts.bin_hours}) must be > 0")
    if not opts.min_views >= 0 or opts.min_pages < 1:
        raise UsageError("--min-views must be >= 0 and --min-pages >= 1")
    alpha, beta = opts.alpha, opts.beta
    if alpha is None and beta is None:
        alpha, beta = ts.ALPHA, ts.BETA
    alpha = 1.0 - beta if alpha is None else alpha
    beta = 1.0 - alpha if beta is None else beta
    if not (alpha >= 0 and beta >= 0 and abs(alpha + beta - 1) < 1e-9):
        raise UsageError(
            f"--alpha ({alpha:g}) and --beta ({beta:g}) must be >= 0 and sum to 1 "
            "(the paper's 3:2 is 0.6 and 0.4)"
        )
    if opts.max_birth_lag is not None and not 0 <= opts.max_birth_lag < float("inf"):
        raise UsageError(f"--max-birth-lag ({opts.max_birth_lag}) must be a number of days >= 0")
    try:
        a, b, c = (float(w) for w in (opts.weights or "1,1,1").split(","))
    except ValueError:
        raise UsageError(f"--weights ({opts.weights!r}) must be three numbers A,B,C") from None
    return alpha, beta, (a, b, c)


def _site_name(name: str, level: str) -> str:
    """A labelled site's name at ``level``: a URL or host taken to its host, registered
    domain or folder."""
    if level == "domain":
        return site_of(name) if "://" in name else site_of_host(name)
    if level == "folder":
        if "://" in name:
            return folder_of(name)
        # A folder name as the command writes it (``host/segment``, ``host/``) is one.
        host, _, rest = name.partition("/")
        segment = rest.strip("/").split("/")[0]
        return f"{host.lower()}/{segment}" if segment else f"{host.lower()}/"
    return urlsplit(name).hostname or name if "://" in name else name.rstrip(".")


def _read_labels(path: str, level: str = SITE_LEVEL) -> dict[str, bool]:
    """Site -> temporal from CSV ``site,temporal`` (a header line optional); a site may be
    given as a host or URL and is taken to its name at ``level``."""
    try:
        lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--labels {path}: {exc}") from None
    labels: dict[str, bool] = {}
    for number, cells in enumerate(csv.reader(lines), 1):
        if not cells or not cells[0].strip() or cells[0].lstrip().startswith("#"):
            continue
        name, value = cells[0].strip().lower(), (cells[1] if len(cells) > 1 else "").strip()
        if name == "site" and value.lower() == "temporal":  # the header
            continue
        if value.lower() not in _TRUE + _FALSE:
            raise UsageError(
                f"--labels {path}, line {number}: temporal is {value!r}, not 1/0 or true/false"
            )
        site = _site_name(name, level)
        hot = value.lower() in _TRUE
        if labels.setdefault(site, hot) != hot:
            raise UsageError(f"--labels {path}, line {number}: {site} labelled both ways")
    if not labels:
        raise UsageError(f"--labels {path}: no labelled sites")
    return labels


def _write(path: Path, chosen: np.ndarray, names: list[str], scores: ts.SiteScores) -> None:
    try:
        with open(path, "w", encoding="utf-8", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(COLUMNS)
            for i in chosen.tolist():
                writer.writerow(
                    [
                        names[i],
                        f"{scores.score[i]:.6f}",
                        f"{scores.score1[i]:.6f}",
                        f"{scores.score2[i]:.6f}",
                        scores.pages[i],
                        scores.temporal_pages[i],
                        f"{scores.views[i]:g}",
                        f"{scores.temporal_views[i]:g}",
                    ]
                )
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc}") from None


def _evaluate(
    labels: dict[str, bool],
    names: list[str],
    scores: ts.SiteScores,
    chosen: np.ndarray,
    weights: tuple[float, float, float],
) -> None:
    sites, written = sorted(labels), {names[i] for i in chosen.tolist()}
    counts = ts.confusion([s in written for s in sites], [labels[s] for s in sites])
    unseen = len(set(sites) - set(names))
    print(
        f"labels: {len(sites)} sites ({unseen} not in the log), "
        f"{len(written - set(sites))} written sites unlabelled"
    )
    a, b, c = weights
    print(
        f"sites: hits {counts.hits}, misses {counts.misses}, false alarms "
        f"{counts.false_alarms}; Performance {counts.performance(a, b, c):g} "
        f"(A={a:g}, B={b:g}, C={c:g})"
    )
    precision, recall, f = counts.prf()
    print(f"sites: precision {precision:.3f}, recall {recall:.3f}, F {f:.3f}")
    hot, pages = int(scores.temporal_pages[chosen].sum()), int(scores.pages[chosen].sum())
    precision, recall, f = ts.prf(hot, pages, int(scores.temporal_pages.sum()))
    print(
        f"pages of the written sites: {hot} temporal of {pages}; precision {precision:.3f}, "
        f"recall {recall:.3f}, F {f:.3f}"
    )
