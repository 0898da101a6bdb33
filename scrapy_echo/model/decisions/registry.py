"""Every crawl policy by name: what ``ECHO_POLICY`` and the simulator's ``--policies``
choose from."""

from __future__ import annotations

from scrapy_echo.model.decisions.ablation import PREFIX, without
from scrapy_echo.model.decisions.adaptive_policy import AdaptiveInterval
from scrapy_echo.model.decisions.baselines import (
    BreadthFirst,
    EchoGreedy,
    EchoSchedule,
    FixedQuota,
    Frequency,
)
from scrapy_echo.model.decisions.censored_policy import EchoCensored
from scrapy_echo.model.decisions.cycle_policy import EchoCycles
from scrapy_echo.model.decisions.discovery_policies import OdWin, RoundRobin
from scrapy_echo.model.decisions.earned_policy import EchoEarned
from scrapy_echo.model.decisions.echo_newpages import (
    EchoHostPriced,
    EchoNewPages,
    EchoSignalProfit,
)
from scrapy_echo.model.decisions.explore_policy import EchoExplore
from scrapy_echo.model.decisions.policies import EchoPaper, Policy
from scrapy_echo.model.decisions.signal_policies import Greedy, GreedyCis, LowDiscrepancy

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (
        EchoNewPages,
        EchoCycles,
        EchoExplore,
        EchoCensored,
        EchoEarned,
        EchoSignalProfit,
        EchoHostPriced,
        EchoPaper,
        EchoSchedule,
        EchoGreedy,
        BreadthFirst,
        FixedQuota,
        Frequency,
        Greedy,
        GreedyCis,
        LowDiscrepancy,
        RoundRobin,
        OdWin,
        AdaptiveInterval,
    )
}


def make_policy(name: str, *, seed: int = 0) -> Policy:
    """The policy called ``name`` (see :data:`POLICIES`, and the ablation's
    ``echo-newpages-without-...``: :mod:`~scrapy_echo.model.decisions.ablation`)."""
    if name.startswith(PREFIX):
        return without(name[len(PREFIX) :])(seed=seed)
    try:
        cls = POLICIES[name]
    except KeyError:
        known = ", ".join(sorted(POLICIES))
        raise ValueError(f"unknown policy {name!r}; known policies: {known}") from None
    return cls(seed=seed)


__all__ = ["POLICIES", "make_policy"]
