"""What ``python -m scrapy_echo.sim`` shows besides its tables: the plots ``run`` writes, and
a progress bar on stderr."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from scrapy_echo.sim.results import Score


def write_plots(scores: list[Score], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plots (pip install scrapy-echo[plots])")
        return
    rates = sorted({s.rate for s in scores})
    policies = list(dict.fromkeys(s.policy for s in scores))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in policies:
        mine = sorted((s for s in scores if s.policy == name), key=lambda s: s.rate)
        ax.plot([s.rate for s in mine], [s.fraction_of_upper_bound for s in mine], "o-", label=name)
    ax.set_xscale("log")
    ax.set_xlabel("crawl rate (crawls/s)")
    ax.set_ylabel("fraction of the upper bound")
    ax.legend()
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "fraction_vs_rate.png", dpi=120)
    plt.close(fig)
    for rate in rates:
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for s in scores:
            if s.rate == rate:
                ax.plot(s.dynamic_times / 86400, s.dynamic_profit, label=s.policy)
        bound = next(s.upper_bound_per_second for s in scores)
        ax.axhline(bound, color="black", linestyle=":", label="upper bound (average)")
        ax.set_xlabel("day")
        ax.set_ylabel("profit per second, trailing day")
        ax.set_title(f"dynamic profit at {rate:g} crawls/s")
        ax.legend(fontsize="small")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / f"dynamic_profit_{rate:g}.png", dpi=120)
        plt.close(fig)


class Progress:
    """A one-line progress bar on stderr, shown only once a run has taken a few seconds."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.started = time.monotonic()
        self.shown = False

    def __call__(self, fraction: float) -> None:
        if time.monotonic() - self.started < 3.0:
            return
        self.shown = True
        bar = "#" * int(30 * fraction)
        sys.stderr.write(f"\r{self.label:<28} [{bar:<30}] {fraction:6.1%}")
        sys.stderr.flush()

    def done(self, seconds: float) -> None:
        if self.shown:
            sys.stderr.write(f"\r{self.label:<28} done in {seconds:.1f} s{' ' * 30}\n")
            sys.stderr.flush()


__all__ = ["Progress", "write_plots"]
