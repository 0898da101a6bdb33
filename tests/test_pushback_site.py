"""The push-back site serves what test_pushback measures against: 429s with Retry-After and
the windows they announce, the outage's 503s and recovery, the paginated hub's rel="next"
pages and the control's hub (plain HTTP, a few seconds, no crawler)."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from tests.pushback_site import PushbackSite


def get(url: str) -> tuple[int, dict[str, str], str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read().decode()


def listed(body: str) -> list[int]:
    return [int(i) for i in re.findall(r'href="/a/(\d+)\.html"', body)]


@pytest.fixture
def site() -> Iterator[PushbackSite]:
    made = PushbackSite().start()
    yield made
    made.stop()


def test_the_rate_limited_host_refuses_with_retry_after_and_counts_requests_inside(site):
    hub = site.hub_url("rate_limited")
    assert get(hub)[0] == 200  # (starts the clock)
    status, headers, _ = get(hub)  # too soon after the one accepted
    assert (status, headers.get("Retry-After")) == (429, "5")
    assert get(hub)[0] == 429  # too soon still, and inside the window the last one announced
    time.sleep(1.05)
    # Far enough from the last request accepted: accepted, though inside an announced window.
    assert get(hub)[0] == 200
    assert site.inside_windows() == {"rate_limited": 2, "outage": 0, "paginated": 0, "control": 0}
    assert [hit.status for hit in site.hits("rate_limited")] == [200, 429, 429, 200]
    assert len(site.windows["127.0.0.51"]) == 2
    # An article every 6 s: three out 20 s in (about 21 s here), at 6, 12 and 18 s.
    site.advance(20.0 - site.elapsed())
    time.sleep(1.05)
    assert listed(get(hub)[2]) == [2, 1, 0]
    # Still within 5 s of the refusals by the wall clock, which the windows go by.
    assert site.inside_windows()["rate_limited"] == 3


def test_the_outage_host_answers_503_for_its_window_then_lists_what_it_published(site):
    hub = site.hub_url("outage")
    assert get(hub)[0] == 200
    site.advance(15.0)
    status, headers, _ = get(hub)
    assert status == 503 and "Retry-After" not in headers  # none unless asked for
    assert get(site.base("outage") + "/a/0.html")[0] == 503  # everything on the host
    assert site.inside_windows()["outage"] == 0  # no window announced, none counted
    site.advance(15.0)  # 30 s in: well again
    status, _, body = get(hub)
    assert status == 200
    # An article every 2 s: the 7 published during the outage (16 s to 28 s) are listed.
    during = [i for i in listed(body) if 15.0 <= 2.0 * (i + 1) < 30.0]
    assert during == [13, 12, 11, 10, 9, 8, 7]
    assert [hit.status for hit in site.hits("outage")] == [200, 503, 503, 200]


def test_an_outage_may_announce_retry_after() -> None:
    site = PushbackSite(outage_retry_after=4).start()
    try:
        assert get(site.hub_url("outage"))[0] == 200
        site.advance(16.0)
        status, headers, _ = get(site.hub_url("outage"))
        assert (status, headers.get("Retry-After")) == (503, "4")
        assert get(site.hub_url("outage"))[0] == 503
        assert site.inside_windows()["outage"] == 1
    finally:
        site.stop()


def test_the_paginated_hub_shows_five_links_a_page_and_rel_next_to_three_pages(site):
    hub = site.hub_url("paginated")
    status, _, body = get(hub)
    assert status == 200 and listed(body) == []  # the first burst comes 10 s in
    site.advance(10.5)
    pages = []
    for page in (1, 2, 3):
        status, _, body = get(hub if page == 1 else f"{hub}?page={page}")
        assert status == 200
        pages.append(listed(body))
        if page < 3:
            assert f'<link rel="next" href="?page={page + 1}">' in body
            assert f'<a rel="next" href="?page={page + 1}">' in body
        else:
            assert 'rel="next"' not in body
    # A burst of 12: the first page shows 5, the rest only on pages 2 and 3.
    assert pages == [[11, 10, 9, 8, 7], [6, 5, 4, 3, 2], [1, 0]]
    assert get(f"{hub}?page=4")[0] == 404
    site.advance(20.0)  # the second burst pushes the first off the first two pages
    assert listed(get(hub)[2]) == [23, 22, 21, 20, 19]
    assert listed(get(f"{hub}?page=3")[2]) == [13, 12, 11, 10, 9]


def test_coverage_counts_articles_published_before_the_cutoff_and_served(site):
    control = site.base("control")
    assert get(site.hub_url("control"))[0] == 200
    site.advance(16.0)  # an article every 5 s: three out
    assert listed(get(site.hub_url("control"))[2]) == [2, 1, 0]
    assert get(control + "/a/1.html")[0] == 200
    assert get(control + "/a/3.html")[0] == 404  # not yet: not counted as fetched
    coverage = site.coverage(16.0)
    assert (coverage["control"].published, coverage["control"].fetched) == ([0, 1, 2], [1])
    assert str(coverage["control"]) == "1/3"
    assert coverage["paginated"].published == list(range(12))
    assert coverage["rate_limited"].share == 0.0
    assert [(hit.path, hit.status) for hit in site.hits("control")][-2:] == [
        ("/a/1.html", 200),
        ("/a/3.html", 404),
    ]
