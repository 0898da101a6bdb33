"""The policies only the simulator can run (they read the trace), beside every crawl policy."""

from __future__ import annotations

from scrapy_echo.model.decisions.policies import Policy
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.capacity_greedy import CapacityGreedy
from scrapy_echo.sim.oracle import GreedyOracle

SIM_ONLY: dict[str, type[Policy]] = {cls.name: cls for cls in (GreedyOracle, CapacityGreedy)}


def make_sim_policy(name: str, *, seed: int = 0) -> Policy:
    """The policy called ``name``: a crawl policy (:func:`make_policy`) or one of
    :data:`SIM_ONLY`."""
    cls = SIM_ONLY.get(name)
    return cls(seed=seed) if cls is not None else make_policy(name, seed=seed)


__all__ = ["SIM_ONLY", "make_sim_policy"]
