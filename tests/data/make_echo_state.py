"""Writes ``echo-state-v<VERSION>.json``: the checkpoint ``tests/test_jobdir.py`` loads to check
that this build reads its own format version. Run from the repository root when the format version
changes: ``python tests/data/make_echo_state.py``."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from scrapy import Request  # noqa: E402
from test_jobdir import open_scheduler  # noqa: E402

from scrapy_echo.core.events import PageFetched, SourceFetched  # noqa: E402
from scrapy_echo.core.snapshot import VERSION  # noqa: E402
from scrapy_echo.crawler.jobdir import FILE_NAME  # noqa: E402


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        feed = Path(tmp) / "clicks.jsonl"
        feed.write_text('{"url": "http://a.test/x", "ts": 970, "clicks": 3}\n')
        scheduler = open_scheduler(str(Path(tmp) / "job"), str(feed))
        runtime, state = scheduler.runtime, scheduler.state
        runtime.observe(SourceFetched("http://a.test/", 900.0, ()))
        shown = (("http://a.test/x", None), ("http://a.test/y", None))
        # What the spider middlewares added to the links' requests goes with their pages.
        added = '{"headers": {"Referer": ["http://a.test/"]}, "meta": {"depth": 1}}'
        runtime.observe(SourceFetched("http://a.test/", 950.0, shown, None, None, (added,) * 2))
        state.frontier.pop(0)  # x is under way, then fetched
        runtime.observe(PageFetched("http://a.test/x", "http://a.test/", 925.0, 960.0))
        state.sources[1].etag = '"v7"'
        state.changed_sources.add(1)
        state.source_dispatched(0, 940.0)
        state.source_dispatched(1, 990.0)
        scheduler.enqueue_request(Request("http://a.test/plain"))
        assert runtime.click_intake.add(runtime.click_intake.readers[0].read()) == 1
        scheduler.close("shutdown")
        shutil.copy(Path(tmp) / "job" / FILE_NAME, HERE / f"echo-state-v{VERSION}.json")


if __name__ == "__main__":
    main()
