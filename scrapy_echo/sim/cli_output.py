"""What ``python -m scrapy_echo.sim`` shows besides its tables: the plots ``run`` writes, and
a progress bar on stderr."""

from __future__ import annotations

import sys
from pathlib import Path

from tqdm import tqdm

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
    """A replay's progress on stderr: a bar (tqdm's) on a terminal, once a run has taken a few
    seconds, and in any case one final line; a log or a pipe gets that line alone."""

    STEPS = 1000
    DELAY = 3.0  # s before a bar shows: a short replay shows only its final line

    def __init__(self, label: str) -> None:
        self.label = label
        self.bar = tqdm(
            total=self.STEPS,
            desc=label,
            disable=None,  # (off when stderr is not a terminal)
            delay=self.DELAY,
            leave=False,
            file=sys.stderr,
            bar_format="{desc:<28} |{bar:30}| {percentage:5.1f}% {elapsed}<{remaining}",
        )

    def __call__(self, fraction: float) -> None:
        step = min(self.STEPS, int(self.STEPS * fraction))
        if step > self.bar.n:
            self.bar.update(step - self.bar.n)

    def done(self, seconds: float) -> None:
        self.bar.close()
        sys.stderr.write(f"{self.label:<28} done in {seconds:.1f} s\n")
        sys.stderr.flush()


__all__ = ["Progress", "write_plots"]
