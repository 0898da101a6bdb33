"""One set of defaults: the simulator replays what a crawl with default settings runs."""

from __future__ import annotations

import dataclasses

from scrapy.settings import Settings

from scrapy_echo.core.state_config import StateConfig
from scrapy_echo.crawler.settings import EchoConfig
from scrapy_echo.sim.engine import PAPER_SETUP, SimSettings

# The simulator's own knobs: what the replayed world gives the crawler, not how it crawls.
_SIM_ONLY = {
    "crawl_rate",
    "rate_changes",
    "clicks",
    "signals",
    "clicks_before_crawl",
    "identity",
    "hosts",  # (whether the replay honours the trace's hosts: the web's, not the crawl's)
    "download_time",
}


def test_the_simulators_defaults_are_the_crawls() -> None:
    crawl = EchoConfig.from_settings(Settings())
    sim = SimSettings(crawl_rate=1.0)
    names = {f.name for f in dataclasses.fields(SimSettings)} - _SIM_ONLY
    assert {"refresh_share", "backlog", "resolve_interval", "seen_ttl"} <= names
    differ = {
        name: (getattr(sim, name), getattr(crawl, name))
        for name in names
        if getattr(sim, name) != getattr(crawl, name)
    }
    assert differ == {}


def test_every_setting_the_core_reads_has_a_simulator_default() -> None:
    # StateConfig is what the core reads of its settings: a field the simulator lacks would
    # let a replay run on something the crawl does not.
    read = {name for name in dir(StateConfig) if not name.startswith("_")}
    assert read <= {f.name for f in dataclasses.fields(SimSettings)}


def test_the_papers_set_up_is_named_not_hidden() -> None:
    paper = SimSettings(crawl_rate=1.0, **PAPER_SETUP)
    default = SimSettings(crawl_rate=1.0)
    assert (paper.refresh_share, paper.backlog) == (0.0, "skip")
    assert (default.refresh_share, default.backlog) != (paper.refresh_share, paper.backlog)
