"""Typed events: their JSON form round-trips, and hostile JSON is refused with a kind."""

from __future__ import annotations

import json
from typing import Any

import pytest

from scrapy_echo.core.events import (
    ClicksArrived,
    InvalidEvent,
    PageFailed,
    PageFetched,
    SignalsArrived,
    SourceAdded,
    SourceFailed,
    SourceFetched,
    SourceNotModified,
    from_json,
    to_json,
)

EVENTS = [
    SourceFetched(
        "http://a.test/",
        10.0,
        (("http://a.test/1", None), ("http://a.test/2", 9.0)),
        '"e1"',
        "Mon, 23 Nov 2026 10:00:00 GMT",
    ),
    # Links that passed the spider middlewares: what they added, nothing, or dropped.
    SourceFetched(
        "http://a.test/",
        10.0,
        (("http://a.test/1", None), ("http://a.test/2", None), ("http://a.test/3", None)),
        treated=('{"meta": {"depth": 1}}', "", None),
    ),
    # A fleet worker's hub page, its next page left for the planner to decide.
    SourceFetched(
        "http://a.test/",
        10.0,
        (("http://a.test/1", None),),
        continued=True,
        next_page="http://a.test/?page=3",
        hub_page=2,
    ),
    SourceNotModified("http://a.test/", 11.0),
    SourceFailed("http://a.test/", 12.0, "HTTP 503"),
    PageFetched("http://a.test/1", "http://a.test/", 9.5, 13.0),
    PageFetched("http://a.test/1", "http://a.test/", 9.5, 13.0, ("https://a.test/2026/one",)),
    PageFailed("http://a.test/1", "http://a.test/", 9.5, 13.0, "TimeoutError", (9.0, 10.0), 10.0),
    PageFailed(
        "http://a.test/1",
        "http://a.test/",
        9.5,
        13.0,
        "HTTP 503",
        (9.0, 10.0),
        10.0,
        '{"meta": {"k": 1}}',
        30.0,
    ),
    SourceAdded("http://b.test/"),
    SourceAdded("http://b.test/sitemap-2.xml", 2),  # listed by an index listed by a source
    SourceAdded("http://b.test/", configured=True),  # a fleet worker's settings at its start
    ClicksArrived((["http://a.test/1", 14.0, 2],)),
    SignalsArrived((["http://a.test/", 15.0],)),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_json_round_trip(event: Any) -> None:
    assert from_json(json.loads(json.dumps(to_json(event)))) == event


PAGE = {"e": "page", "url": "http://a/1", "source": "http://a/", "appeared": 1, "t": 2}
FAILED = {"e": "pagefail", "url": "http://a/1", "source": "http://a/", "appeared": 1, "t": 2,
          "why": "HTTP 503", "win": [0, 1], "disc": 1}  # fmt: skip
CRAWL = {"e": "crawl", "url": "http://a/", "t": 1, "links": [["http://a/1", None]] * 2}


@pytest.mark.parametrize(
    ("raw", "kind"),
    [
        ([], "not_object"),
        ({"e": "nope"}, "unknown_event"),
        ({"e": "crawl", "url": "ftp://a/", "t": 1, "links": []}, "bad_url"),
        ({"e": "crawl", "url": "http://a/", "t": 1e400, "links": []}, "bad_time"),
        ({"e": "crawl", "url": "http://a/", "t": True, "links": []}, "bad_time"),
        ({"e": "crawl", "url": "http://a/", "t": 1, "links": [["http://a/1"]]}, "bad_field"),
        ({"e": "crawl", "url": "http://a/", "t": 1, "links": [], "etag": 5}, "bad_field"),
        ({"e": "page", "url": "http://a/1", "source": None, "appeared": 1, "t": 2}, "bad_url"),
        ({"e": "clicks", "rows": "x"}, "bad_field"),
        ({"e": "signals", "rows": {"url": "http://a/"}}, "bad_field"),
        ({**PAGE, "aliases": "http://a/2"}, "bad_field"),
        ({**PAGE, "aliases": ["http://a/2"] * 9}, "bad_field"),
        ({**PAGE, "aliases": ["javascript:x"]}, "bad_url"),
        ({"e": "source", "url": "http://" + "a" * 9000}, "bad_url"),
        ({"e": "source", "url": "http://a/", "depth": -1}, "bad_field"),
        ({"e": "source", "url": "http://a/", "depth": True}, "bad_field"),
        ({"e": "source", "url": "http://a/", "depth": 2.0}, "bad_field"),
        ({"e": "source", "url": "http://a/", "depth": 10**9}, "bad_field"),
        ({**CRAWL, "xs": ["{}"], "xi": [0]}, "bad_field"),  # an index per link
        ({**CRAWL, "xs": ["{}"], "xi": [0, 1]}, "bad_field"),  # into xs
        ({**CRAWL, "xs": ["[1]"], "xi": [0, 0]}, "bad_field"),  # objects only
        ({**CRAWL, "xs": ["{" * 9000], "xi": [0, 0]}, "bad_field"),
        ({**CRAWL, "xi": [-1, -1]}, "bad_field"),  # with xs
        ({**FAILED, "win": [1]}, "bad_field"),
        ({**FAILED, "disc": None}, "bad_time"),
        ({**FAILED, "x": "[1]"}, "bad_field"),
        ({**FAILED, "ra": -1}, "bad_time"),
        ({**CRAWL, "next": "javascript:x", "page": 1}, "bad_url"),
        ({**CRAWL, "next": "http://a/?page=2", "page": 0}, "bad_field"),
        ({**CRAWL, "next": "http://a/?page=2", "page": True}, "bad_field"),
        ({**CRAWL, "next": "http://a/?page=2", "page": 10**9}, "bad_field"),
    ],
)
def test_hostile_json_is_refused_with_its_kind(raw: Any, kind: str) -> None:
    with pytest.raises(InvalidEvent) as caught:
        from_json(raw)
    assert caught.value.kind == kind
