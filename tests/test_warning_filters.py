"""The suite's warnings filters, and what a third party's warning or new exception does to a read.

w3lib 2.6.0 deprecated parameters Scrapy 2.19 passes through ``TextResponse.encoding``; with
every warning an error, ``response.urljoin()`` raised inside the link cleaning, which took it
for a bad URL and dropped every link of every feed. These tests hold the two halves of the
fix: only the project's own warnings are errors, and a library call failing in a way it is not
documented to is counted and logged, never taken as bad input.
"""

from __future__ import annotations

import logging
import warnings

import pytest
from scrapy.http import XmlResponse

from scrapy_echo.core.unexpected import unexpected_counts
from scrapy_echo.sources.outlinks import extract_outlinks

FEED = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>
  <link>http://example.com/</link>
  <item><title>a</title><link>http://example.com/a</link></item>
  <item><title>b</title><link>/b</link></item>
</channel></rss>"""


def _warn_from(module: str) -> None:
    warnings.warn_explicit(
        "a parameter is deprecated", DeprecationWarning, f"{module}.py", 1, module=module
    )


def test_the_projects_own_warnings_are_errors() -> None:
    for module in ("scrapy_echo.sources.outlinks", "test_outlinks", "conftest"):
        with pytest.raises(DeprecationWarning):
            _warn_from(module)


def test_a_third_partys_warnings_are_shown_not_raised() -> None:
    with warnings.catch_warnings(record=True) as shown:
        for module in ("w3lib.encoding", "scrapy.http.response.text", "twisted.internet"):
            _warn_from(module)
    assert [str(w.message) for w in shown] == ["a parameter is deprecated"] * 3


class _DeprecatingResponse(XmlResponse):
    """A response whose encoding warns as w3lib 2.6.0 made Scrapy 2.19's do, from w3lib."""

    @property
    def encoding(self) -> str:
        _warn_from("w3lib.encoding")
        return super().encoding


def test_a_feed_read_under_the_suites_filters_keeps_its_links() -> None:
    response = _DeprecatingResponse("http://example.com/feed.xml", body=FEED)
    with warnings.catch_warnings(record=True) as shown:
        links = extract_outlinks(response, None, same_site=True, limit=100)
    assert [link.url for link in links] == ["http://example.com/a", "http://example.com/b"]
    assert shown, "the third party's warning was swallowed, not shown"


class _FailingResponse(XmlResponse):
    """A response whose encoding raises what no bad input makes it raise (a library change,
    or a warning some filter turned into an exception)."""

    @property
    def encoding(self) -> str:
        raise RuntimeError("html_to_unicode() got an unexpected keyword argument")


def test_an_unexpected_library_failure_is_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = "outlinks/base_url/RuntimeError"
    before = unexpected_counts().get(key, 0)
    with caplog.at_level(logging.ERROR, logger="scrapy_echo.core.unexpected"):
        for _ in range(3):
            links = extract_outlinks(
                _FailingResponse("http://example.com/feed.xml", body=FEED),
                None,
                same_site=True,
                limit=100,
            )
            # The links are read against the response's own URL: nothing is taken as bad.
            assert [link.url for link in links] == [
                "http://example.com/a",
                "http://example.com/b",
            ]
    assert unexpected_counts()[key] == before + 3
    if before == 0:  # the first in this process is logged, with its traceback
        logged = [r for r in caplog.records if "outlinks/base_url" in r.getMessage()]
        assert len(logged) == 1
        assert logged[0].exc_info is not None
