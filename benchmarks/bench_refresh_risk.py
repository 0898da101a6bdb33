"""The refresh lane's risk controls against the rule they replace, at equal budget.

Ford, Grimes and Tassone, *Keeping a search engine index fresh: risk and optimality in
estimating refresh rates for web pages*, Sec. 5.3 and 6: a page scheduled from an estimated
change rate can stay stale far longer than the known-rate schedule ever leaves it ("very
stale": stale at least the known-rate interval ``r*Δ``), and a more conservative ratio bounds
that. The lane now plans each group at its estimate ``Δ̂``, its interval shrunk until the
expected very stale share is at most ``--very-stale`` (and at least ``shortest`` long); the
previous rule planned at the rate's posterior mean plus one standard deviation, unshrunk.

Pages of ``--groups`` sites, each site's pages changing as a Poisson process with its own
period (log-uniform over 2 to 100 hours), are fetched at the start and then refetched only by
the lane, at most ``--cap`` refetches per second, for ``--days``. The same change times are
replayed under both rules. Printed per rule: refetches spent, the share of refetch intervals
that were very stale, the share of page-time stale; then the ratios, new over old.

Run: python benchmarks/bench_refresh_risk.py [--groups 40] [--pages 25] [--days 20]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.refetch.change_rates import RateEstimate
from scrapy_echo.model.refetch.refresh import optimal_ratio
from scrapy_echo.model.refetch.refresh_lane import RefreshLane

H = 3600.0
PROFIT, DECAY = 100.0, 1e-9  # per second: clicks do not fade over the run, C_s = P·μ = 1e-7
BURST = 10.0  # refetches the cap lets through at once
OMEGA = 2e-4  # ECHO's value of a crawl: C_c/C_s = 2000 s, r* ≈ 0.3 at Δ = 6 h


class MeanPlusOneSD(RefreshLane):
    """The previous rule: each group's rate at its posterior mean plus one standard deviation
    (``λ/λ̂ ~ Gamma(I + 1, rate I)``), no shrink, and no floor on the interval."""

    def group_schedule(
        self, estimate: RateEstimate, groups: np.ndarray, crawl_cost: float, stale: FloatArray
    ) -> tuple[FloatArray, FloatArray]:
        shape = estimate.information + 1.0
        rate = estimate.rate * (shape + np.sqrt(shape)) / np.maximum(estimate.information, 0.5)
        return rate, np.ones(rate.size)


def known_intervals(period: FloatArray, pages: int, cap: float) -> FloatArray:
    """Each group's interval ``r*Δ`` with its true period, at ECHO's price or, if those would
    take more than ``cap`` refetches per second, at the crawl cost that makes them fit (as the
    lane raises its own): the longest a page can be stale when ``Δ`` is known."""

    def intervals(cost: float) -> FloatArray:
        out: FloatArray = optimal_ratio(period, cost, PROFIT * DECAY) * period
        return out

    low = high = math.log(OMEGA)
    while pages * np.sum(1.0 / intervals(math.exp(high))) > cap:
        high += math.log(4.0)
    for _ in range(60):
        mid = 0.5 * (low + high)
        over = pages * np.sum(1.0 / intervals(math.exp(mid))) > cap
        low, high = (mid, high) if over else (low, mid)
    return intervals(math.exp(high))


def run(lane: RefreshLane, changes: list[FloatArray], period: FloatArray, args: argparse.Namespace,
        seed: int) -> dict[str, float]:  # fmt: skip
    """Replays ``changes`` (per page, sorted times) under ``lane``; the very stale threshold
    of a page is its known-rate interval (:func:`known_intervals`)."""
    rng = np.random.default_rng(seed)
    pages, horizon = len(changes), args.days * 86400.0
    known = known_intervals(period, args.pages, args.cap)
    profit, decay = np.array([PROFIT]), np.array([DECAY])
    last = rng.uniform(0.0, H, pages)  # first fetches spread over the first hour
    for k in range(pages):
        lane.fetched(k, url=f"u{k}", group=k // args.pages, source=0, appeared=0.0,
                     t=float(last[k]), digest="v0")  # fmt: skip
    intervals = very = 0
    late, late_very = 0, 0  # in the last quarter of the run, the estimates settled
    stale_time = 0.0
    # Event by event: a page is refetched when it comes due, if the cap has a refetch left
    # (a bucket of BURST, refilled at the cap), else as soon as it has.
    tokens, now, next_plan = BURST, H, H
    while now < horizon:
        if now >= next_plan:
            lane.plan(now, omega=OMEGA, budget=args.cap / lane.share, profit=profit,
                      decay=decay)  # fmt: skip
            next_plan += 1800.0
        page = lane.due(now) if tokens >= 1.0 else None
        if page is not None:
            k = int(page)  # type: ignore[call-overload]
            c = changes[k]
            first = np.searchsorted(c, last[k], side="right")
            if first < c.size and c[first] <= now:
                stale = now - c[first]
                stale_time += stale
                very += stale >= known[k // args.pages]
                late_very += now > 0.75 * horizon and stale >= known[k // args.pages]
            intervals += 1
            late += now > 0.75 * horizon
            version = int(np.searchsorted(c, now, side="right"))
            lane.fetched(k, url=f"u{k}", group=k // args.pages, source=0, appeared=0.0, t=now,
                         digest=f"v{version}")  # fmt: skip
            last[k] = now
            tokens -= 1.0
            continue
        wake = (
            lane.next_due()
            if tokens >= 1.0
            else max(lane.next_due(), now + (1.0 - tokens) / args.cap)
        )
        wake = min(max(wake, now + 1e-6), next_plan, horizon)
        tokens = min(tokens + args.cap * (wake - now), BURST)
        now = wake
    # Pages not refetched since their last fetch are stale from their first change since.
    for k in range(pages):
        c = changes[k]
        first = np.searchsorted(c, last[k], side="right")
        if first < c.size and c[first] <= horizon:
            stale_time += horizon - c[first]
    return {
        "refetches": float(intervals),
        "very": very / max(intervals, 1),
        "late": late_very / max(late, 1),
        "stale": stale_time / (pages * horizon),
        "predicted": lane.very_stale_share,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--pages", type=int, default=25, help="pages per group")
    parser.add_argument("--days", type=float, default=20.0)
    parser.add_argument("--cap", type=float, default=0.05, help="refetches/s at most")
    parser.add_argument("--very-stale", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    period = np.exp(rng.uniform(math.log(2 * H), math.log(100 * H), args.groups))
    horizon = args.days * 86400.0
    changes = []
    for k in range(args.groups * args.pages):
        n = rng.poisson(horizon / period[k // args.pages])
        changes.append(np.sort(rng.uniform(0.0, horizon, n)))
    share = 0.5  # the cap is share × budget: the budget is set to make it --cap
    rules = {
        "risk controls": RefreshLane(share=share, very_stale=args.very_stale),
        "mean + 1 SD": MeanPlusOneSD(share=share, shortest=1e-6, longest=1e12),
    }
    out = {}
    for name, lane in rules.items():
        start = time.perf_counter()
        out[name] = run(lane, changes, period, args, args.seed + 1)
        r = out[name]
        print(f"{name:>13}: {r['refetches']:,.0f} refetches, very stale {r['very']:.2%} of "
              f"intervals, {r['late']:.2%} in the last quarter (the lane's last plan predicted "
              f"{r['predicted']:.2%}), page-time stale "
              f"{r['stale']:.2%} ({time.perf_counter() - start:.0f} s)")  # fmt: skip
    new, old = out["risk controls"], out["mean + 1 SD"]
    print(f"at a cap of {args.cap:g} refetches/s, {args.groups} sites x {args.pages} pages, "
          f"{args.days:g} days: very stale share {new['very'] / old['very']:.2f}x, refetches "
          f"{new['refetches'] / old['refetches']:.2f}x, stale page-time "
          f"{new['stale'] / old['stale']:.2f}x the previous rule's")  # fmt: skip


if __name__ == "__main__":
    main()
