"""What a crawl's saved state says: a summary, five plots and a one-page HTML report.

Reads the state a crawl saved (``JOBDIR/echo-state.json``, or the planner's state in Redis),
re-solves the schedule from its estimates with the last budget it used, and draws:

- ``intervals.png``: each source's recrawl interval against its value (``λP``, clicks per
  second of new pages): the solver's answer at a glance;
- ``new_links.png``: new links found through time, in all and for the ten busiest sources;
- ``estimates.png``: ``λ``, ``P`` and ``μ`` per source, sorted;
- ``profit.png``: clicks caught (clicks of crawled pages) through time;
- ``budget.png``: the crawls of each re-solve period, split between sources and new pages.

It lists the sources that list the same pages (Pham et al.'s overlap; docs/how-it-works.rst,
"Overlapping sources"): pairs whose recent links overlap by Jaccard ≥ 0.7, the one worth less
(the follower) credited to the other. And the hubs whose rate is at risk of an underestimate
(docs/how-it-works.rst, "Hubs that show only their latest links"): their crawls found them
overflowed, their latest links all new, and undated, so that the counts are only floors.
Its rates are pooled by site as the crawl pools them, and it says how much of the spread of
the sources' rates their sites explain (docs/how-it-works.rst, "Rates pooled by site").
"""

from __future__ import annotations

import datetime as dt
import html
import math
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from scrapy_echo.core.hosts import SourceHosts
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.model.estimation.overlap import Overlap, OverlapBook
from scrapy_echo.model.estimation.scoreboard import estimator_scores, estimator_text
from scrapy_echo.model.intervals.plan import Estimates, Plan

PLOTS = ("intervals", "new_links", "estimates", "profit", "budget")


@dataclass
class Report:
    snapshot: dict[str, Any]
    estimates: Estimates
    plan: Plan
    budget: float
    # Of the spread of the sources' rates, the share their sites explain, as this re-solve
    # measured it (None: the policy does not pool rates by site).
    site_share: float | None = None

    @classmethod
    def from_snapshot(
        cls, snapshot: dict[str, Any], *, policy: str, budget: float | None
    ) -> Report:
        """Re-solve the saved state: with ``budget``, else the last one the crawl used."""
        history = snapshot.get("history") or []
        if budget is None:
            budget = float(history[-1]["budget"]) if history else 1.0
        planner = make_policy(policy)
        estimates = snapshot["learner"].estimates(
            float(snapshot["saved_at"]),
            learned_priors=planner.learned_priors,
            earned=planner.earns_estimators,
            censoring=planner.censoring_aware,
            floors=planner.counts_floors,
            sites=SourceHosts().sites(snapshot["sources"]) if planner.pools_sites else None,
        )
        off = [i for i, s in enumerate(snapshot["sources"]) if s.retired or s.removed]
        if off:  # never crawled again: no share of the budget (as the crawl plans)
            link_rate = estimates.link_rate.copy()
            link_rate[off] = 0.0
            estimates = replace(estimates, link_rate=link_rate)
        plan = planner.replan(estimates, budget)
        return cls(snapshot, estimates, plan, budget, snapshot["learner"].site_share)

    # -- figures ---------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        sources = self.snapshot["sources"]
        kept = int(self.plan.kept.sum())
        return {
            "sources": len(sources),
            "scheduled": kept,
            "idle": len(sources) - kept,
            "retired": sum(s.retired for s in sources),
            "removed": sum(s.removed for s in sources),
            "budget": self.budget,
            "omega": float(self.plan.omega),
            "source_crawls": sum(s.crawls for s in sources),
            "page_crawls": int(self.snapshot["crawled_pages"]),
            "new_links": sum(s.new_links for s in sources),
            "waiting": len(self.snapshot["frontier"]),
            "clicks_caught": float(getattr(self.snapshot["learner"], "clicks_caught", 0.0)),
            "saved_at": float(self.snapshot["saved_at"]),
            "samples": len(self.snapshot.get("history") or []),
            "overlapping_pairs": len(self.overlaps()),
            "overflowed_crawls": int(sum(self.overflows)),
            "rates_at_risk": int((self.floor_share > 0).sum()),
            "site_share": self.site_share,
            **estimator_scores(self.snapshot["learner"]),
        }

    @cached_property
    def overflows(self) -> list[int]:
        """Per source, its crawls that found it overflowed."""
        n = len(self.snapshot["sources"])
        counts = [int(x) for x in self.snapshot["overflow"]["overflows"]]
        return (counts + [0] * n)[:n]

    @cached_property
    def floor_share(self) -> np.ndarray[Any, Any]:
        """Per source, the share of the crawls behind its ``λ`` whose count is only a floor:
        above 0, its rate may be underestimated."""
        crawls = self.snapshot["learner"].crawls
        n = len(self.snapshot["sources"])
        floors = crawls.floors
        if not floors.size:
            return np.zeros(n)
        filled = np.array(crawls.filled, dtype=np.int64)
        oldest = np.where(filled == crawls.history + 1, np.array(crawls.next, np.int64), 0)
        in_window = floors.sum(axis=1) - floors[np.arange(filled.size), oldest]
        share = in_window / np.maximum(filled - 1, 1)  # (the oldest crawl only opens it)
        return np.concatenate([share, np.zeros(max(0, n - share.size))])[:n]

    @cached_property
    def overlap_book(self) -> OverlapBook:
        """The sources' recent links."""
        return OverlapBook.from_data(self.snapshot["overlap"])

    def overlaps(self) -> list[Overlap]:
        """Pairs of sources listing the same pages."""
        return self.overlap_book.pairs(self.estimates.link_rate * self.estimates.profit)

    def overlap_rows(self) -> list[dict[str, Any]]:
        """Per overlapping pair: both URLs, the Jaccard overlap, the follower's links the
        leader also showed, and the follower's links any other source showed first."""
        sources = self.snapshot["sources"]
        echoed = self.overlap_book.echoed_share()
        return [
            {
                "leader": sources[o.leader].url,
                "follower": sources[o.follower].url,
                "jaccard": o.jaccard,
                "shared": o.shared,
                "first_elsewhere": float(echoed[o.follower]),
            }
            for o in self.overlaps()
        ]

    def summary_text(self) -> str:
        s = self.summary()
        saved = dt.datetime.fromtimestamp(s["saved_at"], dt.timezone.utc)
        return (
            f"ECHO report: {s['sources']} sources ({s['scheduled']} scheduled, {s['idle']} "
            f"idle; {s['retired']} retired, {s['removed']} removed), "
            f"budget {s['budget']:g} requests/s, omega {s['omega']:.4g}\n"
            f"crawls: {s['source_crawls']} of sources, {s['page_crawls']} of new pages; "
            f"{s['new_links']} new links; {s['waiting']} pages waiting; "
            f"{s['clicks_caught']:.1f} clicks caught\n"
            f"state saved {saved:%Y-%m-%d %H:%M:%S} UTC, {s['samples']} history samples"
            + self._site_text(s["site_share"])
            + estimator_text(s)
            + self._overlap_text()
            + self._risk_text()
        )

    @staticmethod
    def _site_text(share: float | None) -> str:
        if share is None:
            return ""
        lent = "each source's rate borrows from its site's" if share > 0 else "none is pooled"
        return f"\nsites explain {share:.0%} of the spread of the sources' rates: {lent}"

    def _risk_text(self) -> str:
        share = self.floor_share
        risky = np.flatnonzero(share > 0)
        if not risky.size:
            return ""
        value = self.estimates.link_rate * self.estimates.profit
        risky = risky[np.argsort(-value[risky], kind="stable")]
        sources = self.snapshot["sources"]
        lines = [
            f"\n{risky.size} sources may have their rate underestimated: crawls found them "
            "overflowed (every link new, none dated), so their counts are only floors:"
        ]
        counted = self.snapshot["learner"].crawls.link_rate()  # the count as found: a floor
        for i in risky[:10]:
            lines.append(
                f"  {sources[i].url}: {share[i]:.0%} of its last crawls overflowed; "
                f"{counted[i] * 3600:.3g} links/h counted, "
                f"{self.estimates.link_rate[i] * 3600:.3g} estimated"
            )
        if risky.size > 10:
            lines.append(f"  ... and {risky.size - 10} more")
        return "\n".join(lines)

    def _overlap_text(self) -> str:
        rows = self.overlap_rows()
        if not rows:
            return ""
        lines = [
            f"\n{len(rows)} pairs of sources list the same pages (Jaccard >= 0.7); the "
            "follower's rate is credited to the leader:"
        ]
        for r in rows[:10]:
            lines.append(
                f"  {r['follower']} follows {r['leader']}: Jaccard {r['jaccard']:.2f}, "
                f"{r['first_elsewhere']:.0%} of its links shown first elsewhere"
            )
        if len(rows) > 10:
            lines.append(f"  ... and {len(rows) - 10} more (report.html lists them all)")
        return "\n".join(lines)

    def source_rows(self) -> list[dict[str, Any]]:
        """Per source: URL, estimates, interval (``inf``: not scheduled), counters."""
        est, plan = self.estimates, self.plan
        return [
            {
                "url": status.url,
                "status": status.summary()["status"],
                "link_rate": float(est.link_rate[i]),
                "profit": float(est.profit[i]),
                "decay": float(est.decay[i]),
                "value": float(est.link_rate[i] * est.profit[i]),
                "interval": float(plan.intervals[i]) if plan.kept[i] else math.inf,
                "crawls": status.crawls,
                "new_links": status.new_links,
                "overflows": self.overflows[i],
                "floor_share": float(self.floor_share[i]),
            }
            for i, status in enumerate(self.snapshot["sources"])
        ]

    # -- output ----------------------------------------------------------------------------
    def write(self, out: Path) -> list[Path]:
        """The plots and ``report.html`` in ``out``; returns the files written."""
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib import pyplot as plt

        out.mkdir(parents=True, exist_ok=True)
        written = []
        for name in PLOTS:
            figure = plt.figure(figsize=(7, 4.2) if name != "estimates" else (11, 3.6))
            getattr(self, f"_plot_{name}")(figure)
            figure.tight_layout()
            path = out / f"{name}.png"
            figure.savefig(path, dpi=90)
            plt.close(figure)
            written.append(path)
        page = out / "report.html"
        page.write_text(self._html(), encoding="utf-8")
        return [*written, page]

    def _plot_intervals(self, figure: Any) -> None:
        ax = figure.add_subplot()
        rows = self.source_rows()
        value = np.array([r["value"] for r in rows])
        interval = np.array([r["interval"] for r in rows])
        kept = np.isfinite(interval) & (value > 0)
        ax.loglog(value[kept], interval[kept], "o", ms=4, label="scheduled")
        idle = ~np.isfinite(interval) & (value > 0)
        if idle.any():
            top = interval[kept].max() * 2 if kept.any() else 1.0
            ax.loglog(value[idle], np.full(idle.sum(), top), "x", label="idle (not scheduled)")
        ax.set(xlabel="source value λP (clicks/s of new pages)", ylabel="interval (s)",
               title="Recrawl interval vs source value")  # fmt: skip
        ax.legend()

    def _history(self, key: str) -> tuple[np.ndarray[Any, Any], list[Any]]:
        history = self.snapshot.get("history") or []
        t0 = history[0]["t"] if history else 0.0
        return np.array([h["t"] - t0 for h in history]), [h[key] for h in history]

    def _plot_new_links(self, figure: Any) -> None:
        ax = figure.add_subplot()
        t, per_source = self._history("new_links")
        if per_source:
            n = len(per_source[-1])
            table = np.array([np.pad(np.asarray(row), (0, n - len(row))) for row in per_source])
            ax.plot(t, table.sum(axis=1), "k-", lw=2, label="all sources")
            sources = self.snapshot["sources"]
            for i in np.argsort(table[-1])[::-1][:10]:
                if table[-1, i] > 0:
                    ax.plot(t, table[:, i], lw=1, label=sources[i].url[-40:])
            ax.legend(fontsize=6)
        ax.set(xlabel="seconds since the first sample", ylabel="new links (cumulative)",
               title="New links per source through time")  # fmt: skip

    def _plot_estimates(self, figure: Any) -> None:
        est = self.estimates
        labels = ("λ: new links/s", "P: clicks per page", "μ: click decay (1/s)")
        columns = (est.link_rate, est.profit, est.decay)
        for k, (values, label) in enumerate(zip(columns, labels, strict=True)):
            ax = figure.add_subplot(1, 3, k + 1)
            shown = np.sort(values[np.isfinite(values) & (values > 0)])[::-1]
            ax.semilogy(np.arange(shown.size), shown, ".")
            ax.set(xlabel="sources, sorted", title=label)

    def _plot_profit(self, figure: Any) -> None:
        ax = figure.add_subplot()
        t, clicks = self._history("clicks_caught")
        ax.plot(t, clicks, "-")
        ax.set(xlabel="seconds since the first sample", ylabel="clicks caught (cumulative)",
               title="Profit caught through time")  # fmt: skip

    def _plot_budget(self, figure: Any) -> None:
        ax = figure.add_subplot()
        t, sources = self._history("source_crawls")
        _, pages = self._history("page_crawls")
        if len(t) > 1:
            ax.stackplot(t[1:], np.diff(sources), np.diff(pages), labels=["sources", "new pages"])
            ax.legend()
        ax.set(xlabel="seconds since the first sample", ylabel="crawls per re-solve period",
               title="Budget split: sources vs new pages")  # fmt: skip

    def _html(self) -> str:
        s = self.summary()
        facts = "".join(
            f"<tr><th>{html.escape(k)}</th><td>{html.escape(_fmt(v))}</td></tr>"
            for k, v in s.items()
        )
        rows = sorted(self.source_rows(), key=lambda r: -r["value"])[:25]
        head = "".join(f"<th>{k}</th>" for k in rows[0]) if rows else ""
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in r.values()) + "</tr>"
            for r in rows
        )
        images = "".join(f'<p><img src="{name}.png" alt="{name}"></p>' for name in PLOTS)
        pairs = self.overlap_rows()
        overlap = ""
        if pairs:
            cells = "".join(
                "<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in r.values()) + "</tr>"
                for r in pairs
            )
            heads = "".join(f"<th>{k}</th>" for k in pairs[0])
            overlap = f"<h2>Overlapping sources</h2><table><tr>{heads}</tr>{cells}</table>"
        text = html.escape(self.summary_text())
        return (
            "<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>ECHO report</title>"
            "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
            "td,th{padding:2px 8px;text-align:left;font-size:13px}</style></head><body>"
            f"<h1>ECHO report</h1><pre>{text}</pre><table>{facts}</table>{images}"
            f"<h2>Most valuable sources</h2><table><tr>{head}</tr>{body}</table>{overlap}"
            "</body></html>\n"
        )


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "never" if math.isinf(value) else f"{value:.4g}"
    return str(value)
