"""The sources a crawl starts with, against those it started with last time: a restart
revives no source the crawl retired or an operator removed, a source taken out of the
settings (or the sources file) while the crawl was down is removed, and one put back in them
comes back (scrapy_echo.core.crawl.CrawlCore.configure_sources). Reproduced on the build of
2026-11-29: every start re-added ECHO_SOURCES and revived retired and removed sources; a line
removed from the sources file while the crawl was down was never applied; in a fleet, every
worker's start re-added them."""

from __future__ import annotations

from scrapy_echo.core import CrawlCore, snapshot
from scrapy_echo.core.events import SourceAdded, SourceFailed, SourceRemoved
from scrapy_echo.model.decisions.registry import make_policy
from scrapy_echo.sim.engine import SimSettings

A, B, C = "http://a.test/", "http://b.test/", "http://c.test/"
SETTINGS = SimSettings(crawl_rate=1.0, source_max_failures=2)


def _restarted(core: CrawlCore) -> CrawlCore:
    """The crawl stopped and started again from its saved state."""
    saved = snapshot.capture(core, 500.0, str).to_bytes()
    state, _, _ = snapshot.restore(core.config, snapshot.read(saved), str)
    return CrawlCore(core.config, make_policy("echo-newpages"), state=state)


def _status(core: CrawlCore, url: str) -> tuple[bool, bool]:
    status = core.status_of(url)
    assert status is not None
    return status.retired, status.removed


def test_a_restart_revives_no_retired_or_removed_source_and_applies_what_changed() -> None:
    core = CrawlCore(SETTINGS, make_policy("echo-newpages"))
    assert core.configure_sources([A, B, C]) == ([], [])  # a fresh crawl: all added
    for t in (10.0, 20.0):
        core.apply(SourceFailed(A, t, "HTTP 404"))  # retired after two in a row
    core.apply(SourceRemoved(B))  # by an operator, while it ran
    assert _status(core, A) == (True, False) and _status(core, B) == (False, True)
    again = _restarted(core)
    assert again.configure_sources([A, B, C]) == ([], [])
    assert _status(again, A) == (True, False) and _status(again, B) == (False, True)
    # C taken out of the settings while the crawl was down: removed at the start.
    later = _restarted(again)
    assert later.configure_sources([A, B]) == ([], [C])
    assert _status(later, C) == (False, True)
    # Put back in the settings: given again, it comes back.
    last = _restarted(later)
    assert last.configure_sources([A, B, C]) == ([C], [])
    assert _status(last, C) == (False, False)


def test_a_fleet_workers_start_revives_nothing_an_operator_add_does() -> None:
    core = CrawlCore(SETTINGS, make_policy("echo-newpages"))
    core.configure_sources([A])
    core.apply(SourceRemoved(A))
    core.apply(SourceAdded(A, configured=True))  # a worker started with ECHO_SOURCES = A
    assert _status(core, A) == (False, True)
    core.apply(SourceAdded(B, configured=True))  # new to the crawl: added
    assert _status(core, B) == (False, False)
    core.apply(SourceAdded(A))  # an operator adds it again (echo-sources, the file)
    assert _status(core, A) == (False, False)
