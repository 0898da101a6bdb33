"""Requests and state as data: what goes into Redis comes back the same, and a hostile entry
is refused without running anything."""

from __future__ import annotations

import base64
import gc
import json
import pickle
from typing import Any

import numpy as np
import pytest
import scrapy
from hypothesis import given
from hypothesis import strategies as st

from scrapy_echo.core import codec
from scrapy_echo.core.state import fingerprint
from scrapy_echo.distributed.wire import (
    InvalidPayload,
    RequestRules,
    decode_request,
    encode_request,
)
from scrapy_echo.model.estimation.learning import SourceLearner
from scrapy_echo.sources.address_guard import AddressGuard


class Spider(scrapy.Spider):
    name = "wire"

    def parse(self, response: Any) -> Any:
        return []

    def parse_article(self, response: Any) -> Any:
        return []


def own_callback(response: Any) -> Any:
    return []


class AliasSpider(Spider):
    name = "alias"
    other_name = Spider.parse_article  # an alias: found by Scrapy's search of the members


SPIDER = Spider()


def test_request_round_trip_keeps_what_scrapy_needs() -> None:
    request = scrapy.Request(
        "http://a.test/x?q=1",
        callback=SPIDER.parse_article,
        method="POST",
        body=b"\x00\xffbinary",
        headers={"If-None-Match": '"v1"'},
        meta={"echo": {"kind": "page", "window": [1.0, 2.0]}},
        priority=3,
        dont_filter=True,
    )
    back = decode_request(encode_request(request, SPIDER, own_callback), SPIDER, own_callback)
    assert (back.url, back.method, back.body, back.priority) == (
        request.url,
        "POST",
        request.body,
        3,
    )
    assert back.callback == SPIDER.parse_article and back.dont_filter
    assert back.headers[b"If-None-Match"] == b'"v1"'
    assert back.meta["echo"] == {"kind": "page", "window": [1.0, 2.0]}
    source = scrapy.Request("http://a.test/", callback=own_callback)
    assert (
        decode_request(encode_request(source, SPIDER, own_callback), SPIDER, own_callback).callback
        is own_callback
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda s: scrapy.Request("http://a.test/", callback=s.parse, errback=s.parse_article),
        lambda s: scrapy.Request("http://a.test/", meta={"k": 1}, cb_kwargs={"a": 2}),
        lambda s: scrapy.FormRequest("http://a.test/", formdata={"q": "1"}, callback=s.parse),
        lambda s: scrapy.http.JsonRequest("http://a.test/", data={"q": 1}, errback=s.parse),
        lambda s: scrapy.http.JsonRequest("http://a.test/", dumps_kwargs={"indent": 1}),
        lambda s: scrapy.Request("http://a.test/", callback=s.other_name),
    ],
)
def test_a_request_is_stored_as_scrapys_own_dict_form(make: Any) -> None:
    """The callbacks' names found without Scrapy's search of the spider give ``to_dict``'s
    dict (a method with two names may go by either), and every request class comes back."""
    spider = AliasSpider()
    request = make(spider)
    stored = json.loads(encode_request(request, spider, own_callback))
    expected = request.to_dict(spider=spider)
    expected["body"] = base64.b64encode(expected["body"]).decode()
    expected["headers"] = {
        k.decode(): [v.decode() for v in vs] for k, vs in expected["headers"].items()
    }
    for name in ("callback", "errback"):  # the same method, perhaps by another name
        ours, theirs = stored.pop(name), expected.pop(name)
        assert (ours is None) == (theirs is None)
        assert ours is None or getattr(spider, ours) == getattr(spider, theirs)
    assert stored == json.loads(json.dumps(expected))
    back = decode_request(encode_request(request, spider, own_callback), spider, own_callback)
    assert type(back) is type(request) and back.callback == request.callback
    assert (back.body, back.errback) == (request.body, request.errback)


def test_a_json_request_may_not_pass_code_to_json_dumps() -> None:
    stored = json.loads(encode_request(scrapy.http.JsonRequest("http://a.test/"), SPIDER, None))
    stored["dumps_kwargs"] = {"default": "os.system"}
    with pytest.raises(InvalidPayload, match="dumps_kwargs"):
        decode_request(json.dumps(stored), SPIDER, own_callback)


def test_request_with_non_json_meta_cannot_be_stored() -> None:
    request = scrapy.Request("http://a.test/", meta={"page": 2, "when": object()})
    with pytest.raises(ValueError, match=r"not JSON \(meta key 'when'\)"):
        encode_request(request, SPIDER, own_callback)


class Boom:
    def __reduce__(self) -> Any:
        return (print, ("pickle ran",))


@pytest.mark.parametrize(
    ("payload", "kind"),
    [
        (pickle.dumps({"url": "http://a.test/"}), "pickle"),
        (pickle.dumps(Boom()), "pickle"),
        (b"not json", "not_json"),
        (b"[1, 2]", "not_object"),
        (b'{"url": "http://a.test/", "evil": 1}', "unknown_field"),
        (b'{"url": "file:///etc/passwd"}', "bad_field"),
        (b'{"url": "http://a.test/", "_class": "os.system"}', "bad_class"),
        (b'{"url": "http://a.test/", "callback": "__init__"}', "bad_callback"),
        (b'{"url": "http://a.test/", "callback": "no_such_method"}', "bad_callback"),
        (b'{"url": "http://a.test/", "errback": "_private"}', "bad_callback"),
        (b'{"url": "http://a.test/", "headers": {"a": "b"}}', "bad_field"),
        (b'{"url": "http://a.test/", "body": "%%%"}', "bad_field"),
        (b'{"url": "http://a.test/", "method": "GET /x"}', "bad_field"),
        (b'{"url": "http://a.test/", "priority": "high"}', "bad_field"),
        (b"{" + b" " * (1 << 20) + b"}", "too_large"),
        (
            b'{"url": "http://a.test/", "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "too_deep",
        ),  # RecursionError, not ValueError: once it escaped, never acked
        (b'{"url": "http://a.test/", "encoding": "no-such-codec"}', "bad_field"),  # LookupError
    ],
)
def test_hostile_or_malformed_payloads_are_refused(payload: bytes, kind: str, capsys) -> None:
    with pytest.raises(InvalidPayload) as refused:
        decode_request(payload, SPIDER, own_callback)
    assert refused.value.kind == kind
    assert "pickle ran" not in capsys.readouterr().out


def test_state_codec_round_trips_a_learner() -> None:
    learner = SourceLearner(3)
    learner.record_crawl(0, 0.0, 0)
    learner.record_crawl(0, 100.0, 3)
    learner.add_page("http://a/1", source=0, appeared=50.0, crawled=100.0)
    learner.add_clicks(["http://a/1", "http://a/2"], [120.0, 130.0], [2.0, 1.0])
    before = learner.estimates(5000.0)
    back = SourceLearner.from_data(codec.loads(codec.dumps(learner.to_data())))
    after = back.estimates(5000.0)
    assert back.clicks_caught == learner.clicks_caught == 2.0
    for field in ("link_rate", "profit", "decay"):
        np.testing.assert_array_equal(getattr(before, field), getattr(after, field))
    assert back.pending_clicks == learner.pending_clicks == 1  # the click of a/2 waits


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.integers() | st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(values)
def test_codec_round_trips_plain_values(value: Any) -> None:
    back = codec.loads(codec.dumps(value))
    assert repr(back) == repr(value)  # repr: nan == nan, and tuple stays tuple


@pytest.mark.parametrize(
    "data",
    [
        b"\x80\x04K\x01.",
        b'{"$": "obj", "cls": "Popen", "v": {"$": "dict", "v": []}}',
        b'{"$": "nd", "dtype": "object", "shape": [1], "data": ""}',
        b'{"$": "nd", "dtype": "float64", "shape": [3], "data": "AAAA"}',
        b'{"a": 1}',
        b'{"$": "float", "v": "1e999"}',
    ],
)
def test_codec_refuses_what_it_did_not_write(data: bytes) -> None:
    with pytest.raises(codec.CodecError):
        codec.loads(data)


def test_a_large_state_is_read_a_frame_at_a_time_and_each_frame_is_checked() -> None:
    big = np.arange(codec.PART_BYTES // 8 * 2 + 5, dtype=np.uint64) * 7919
    rows = [[i, f"http://a.test/{i}"] for i in range(codec.LIST_ITEMS * 2 + 1)]
    value = {"seen": big, "rows": rows, "pairs": {i: i for i in range(codec.LIST_ITEMS + 1)}}
    data = codec.dumps(value)
    lines = data.split(b"\n")
    # the format's line, the skeleton, 3 frames of the array, 3 of rows, 2 of the dict's pairs
    assert len(lines) == 2 + 3 + 3 + 2
    assert max(len(line) for line in lines[2:]) < codec.PART_BYTES * 4 // 3 + 16
    assert len(lines[1]) < 1000  # the state's own line: the long parts are all in frames
    back = codec.loads(data)
    np.testing.assert_array_equal(back["seen"], big)
    assert back["seen"].dtype == np.uint64 and back["seen"].flags.writeable
    assert back["rows"] == rows and back["pairs"] == value["pairs"]

    for size in (1, 7, 4096):  # read in blocks cut anywhere: the same value, never joined
        blocks = [data[at : at + size * 997] for at in range(0, len(data), size * 997)]
        again = codec.loads(blocks)
        np.testing.assert_array_equal(again["seen"], big)
        assert again["rows"] == rows and again["pairs"] == value["pairs"]
    assert codec.loads([b"", b"[1,", b"2]"]) == [1, 2]  # (plain JSON in blocks too)

    head = codec.MAGIC
    skeleton = json.loads(lines[1])
    frame = b"[1,2]"
    for forged_skeleton, frames in [
        ({"$": "list", "frames": [0, 0]}, [frame]),  # one frame named twice
        ({"$": "list", "frames": [3]}, [frame]),  # a frame that is not there
        ({"$": "list", "frames": [True]}, [frame]),
        ({"$": "list", "frames": [0]}, [b'{"a":1}']),  # a frame that is not a list
        ({"$": "nd", "dtype": "uint64", "shape": [4], "frames": [0]}, [b"AAAA"]),  # too short
        ({"$": "nd", "dtype": "uint64", "shape": [10**15], "frames": [0]}, [b"AAAA"]),
        ({"$": "nd", "dtype": "uint64", "shape": [1], "frames": [0]}, [b"AA\x00AAAAAAAA"]),
    ]:
        forged = head + json.dumps(forged_skeleton).encode() + b"".join(b"\n" + f for f in frames)
        with pytest.raises(codec.CodecError):
            codec.loads(forged)
    assert skeleton["$"] == "dict"


def test_plain_json_states_of_the_build_before_frames_are_read() -> None:
    big = np.arange(1000, dtype=np.float64)
    encoded = base64.b64encode(big.tobytes()).decode()
    half = len(encoded) // 2 // 4 * 4
    old = {"$": "dict", "v": [["a", {"$": "nd", "dtype": "float64", "shape": [1000],
                                     "parts": [encoded[:half], encoded[half:]]}]]}  # fmt: skip
    np.testing.assert_array_equal(codec.loads(json.dumps(old).encode())["a"], big)


def test_planner_state_round_trips_through_a_snapshot() -> None:
    from scrapy.utils.test import get_crawler

    from scrapy_echo.core import NewPage, snapshot
    from scrapy_echo.crawler.runtime import EchoRuntime

    crawler = get_crawler(Spider, {"ECHO_SOURCES": ["http://a.test/", "http://b.test/"]})
    crawler.spider = SPIDER
    runtime = EchoRuntime.of(crawler)
    state = runtime.state
    for url in ("http://a.test/", "http://b.test/"):
        state.add_source(url)
    state.source_crawled(0, 100.0, ["http://a.test/old"])
    new = state.source_crawled(0, 200.0, ["http://a.test/old", "http://a.test/new"])
    assert new == ["http://a.test/new"]
    state.sources[0].etag = '"v1"'
    extras = '{"headers": {"Referer": ["http://a.test/"]}, "meta": {"depth": 1}}'
    found = NewPage("http://a.test/new", 0, "http://a.test/", 150.0, (100.0, 200.0), 200.0, extras)
    runtime.core.queue(found)
    state.page_crawled("http://a.test/seen", 0, 120.0, 130.0)

    def encode(request: scrapy.Request) -> str:
        return encode_request(request, SPIDER, own_callback)

    def decode(payload: str) -> scrapy.Request:
        return decode_request(payload, SPIDER, own_callback)

    data, skipped = snapshot.dump(runtime.core, runtime.clock(), encode)
    read = snapshot.read(data)
    assert len(read["frontier"]) == 1  # one waiting page, as a row (reports count them)
    back, plain, refused = snapshot.restore(runtime.config, read, decode)
    assert plain == []
    assert (skipped, refused) == (0, 0)
    assert [s.url for s in back.sources] == ["http://a.test/", "http://b.test/"]
    assert back.sources[0].etag == '"v1"' and back.sources[0].crawls == 2
    assert back.seen == state.seen
    np.testing.assert_array_equal(back.last_crawl, state.last_crawl)
    waiting = back.frontier.pop(0)
    assert waiting.page == found and waiting.appeared == 150.0  # (what it carries too)
    # The restored state goes on as the original would: the old link stays old.
    assert back.source_crawled(0, 300.0, ["http://a.test/old", "http://a.test/3"]) == [
        "http://a.test/3"
    ]


def test_large_arrays_are_stored_in_frames_and_streamed_as_the_same_bytes() -> None:
    big = np.arange(codec.PART_BYTES // 8 * 2 + 5, dtype=np.uint64) * 7919
    value = {"seen": big, "small": np.arange(3.0), "n": 1}
    streamed = "".join(codec.dump_chunks(value)).encode()
    assert streamed == codec.dumps(value)
    back = codec.loads(streamed)
    np.testing.assert_array_equal(back["seen"], big)
    np.testing.assert_array_equal(back["small"], np.arange(3.0))
    cut = streamed.rsplit(b"\n", 1)[0] + b"\n" + streamed.rsplit(b"\n", 1)[1][:-4]
    with pytest.raises(codec.CodecError):  # the last frame cut short: not the array
        codec.loads(cut)


def test_snapshot_is_what_the_state_was_when_captured() -> None:
    from scrapy.utils.test import get_crawler

    from scrapy_echo.core import snapshot
    from scrapy_echo.core.events import SourceFetched
    from scrapy_echo.crawler.runtime import EchoRuntime

    crawler = get_crawler(Spider, {"ECHO_SOURCES": ["http://a.test/", "http://b.test/"]})
    crawler.spider = SPIDER
    runtime = EchoRuntime.of(crawler)
    for url in ("http://a.test/", "http://b.test/"):
        runtime.state.add_source(url)
    core = runtime.core

    def crawl(t: float, *links: str, etag: str | None = None) -> None:
        shown = tuple((link, None) for link in links)
        core.apply(SourceFetched("http://a.test/", t, shown, etag=etag))

    def encode(request: scrapy.Request) -> str:
        return encode_request(request, SPIDER, own_callback)

    crawl(100.0, "http://a.test/1", etag='"v1"')
    first = snapshot.capture(core, runtime.clock(), encode)
    crawl(200.0, "http://a.test/1", "http://a.test/2", etag='"v2"')  # after the capture
    second = snapshot.capture(core, runtime.clock(), encode)
    crawl(300.0, "http://a.test/3")
    was = snapshot.read(first.to_bytes())
    assert was["sources"][0].etag == '"v1"' and was["sources"][0].crawls == 1
    assert was["sources"][0].new_links == 1
    assert {int(m) for m in was["seen"]} == {fingerprint("https://a.test/1")}
    now = snapshot.read(second.to_bytes())  # only the changed source is copied again
    # (ECHO_BACKLOG "crawl": the first crawl's link was new too.)
    assert now["sources"][0].etag == '"v2"' and now["sources"][0].new_links == 2
    assert now["sources"][1].crawls == 0
    assert len(now["seen"]) == 2 and len(now["seen_times"]) == 2


def test_the_collector_pause_nests_and_leaves_a_paused_collector_paused() -> None:
    from scrapy_echo.core.collector import collector_paused

    assert gc.isenabled()
    with collector_paused():
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # someone else paused it: theirs to resume
    finally:
        gc.enable()


RULES = RequestRules()
URL = '"url": "http://a.test/"'


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ('"method": "DELETE"', "method_refused"),
        ('"method": "PUT"', "method_refused"),
        ('"meta": {"proxy": "http://evil.test:8080"}', "meta_refused"),
        ('"meta": {"_auth_proxy": "http://evil.test:8080"}', "meta_refused"),
        ('"meta": {"http_user": "me", "http_pass": "secret"}', "meta_refused"),
        ('"meta": {"download_slot": "a.test"}', "meta_refused"),
        ('"meta": {"bindaddress": ["10.0.0.1", 0]}', "meta_refused"),
        ('"meta": {"dont_obey_robotstxt": true}', "meta_refused"),
        ('"meta": {"download_timeout": "never"}', "meta_refused"),
        ('"meta": {"handle_httpstatus_list": [200, "x"]}', "meta_refused"),
        ('"meta": {"depth": -1}', "meta_refused"),
        ('"meta": {"allow_offsite": true}', "meta_refused"),
        ('"meta": {"verbatim_url": true}', "meta_refused"),
        ('"meta": {"download_maxsize": 0}', "meta_refused"),
        ('"meta": {"download_latency": 0.1}', "meta_refused"),
        ('"meta": {"autothrottle_dont_adjust_delay": true}', "meta_refused"),
        ('"meta": {"ftp_local_filename": "/etc/cron.d/x"}', "meta_refused"),
        ('"meta": {"redirect_urls": ["http://a.test/"]}', "meta_refused"),
        ('"meta": {"retry_times": 9}', "meta_refused"),
        ('"meta": {"depth_reset": true}', "meta_refused"),
        ('"meta": {"echo_lease": "someone else\'s"}', "meta_refused"),
        ('"meta": {"echo_source": true}', "meta_refused"),
        ('"meta": {"_splash_processed": true}', "meta_refused"),
        # Plugins that fetch another way: a browser fetches what the page it renders asks.
        ('"meta": {"playwright": true}', "meta_refused"),
        ('"meta": {"playwright_context_kwargs": {"proxy": {"server": "x"}}}', "meta_refused"),
        ('"meta": {"splash": {"endpoint": "render.html"}}', "meta_refused"),
        ('"meta": {"zyte_api_automap": true}', "meta_refused"),
        ('"headers": {"Authorization": ["Basic c2VjcmV0"]}', "header_refused"),
        ('"headers": {"proxy-authorization": ["Basic c2VjcmV0"]}', "header_refused"),
        ('"headers": {"Cookie": ["session=stolen"]}', "header_refused"),
        ('"headers": {"X-A": ["1\\r\\nAuthorization: x"]}', "header_refused"),
        ('"headers": {"X A": ["1"]}', "header_refused"),
        ('"cookies": {"session": "planted"}', "cookies_refused"),
    ],
)
def test_a_stored_request_may_not_ask_more_than_the_rules_allow(fields: str, kind: str) -> None:
    payload = f"{{{URL}, {fields}}}".encode()
    with pytest.raises(InvalidPayload) as refused:
        decode_request(payload, SPIDER, own_callback, rules=RULES)
    assert refused.value.kind == kind


def test_what_the_rules_allow_comes_through() -> None:
    payload = (
        f'{{{URL}, "method": "HEAD", "headers": {{"If-None-Match": ["\\"v1\\""]}}, '
        '"meta": {"dont_redirect": true, "handle_httpstatus_list": [404], "depth": 2, '
        '"download_timeout": 7.5, "cookiejar": 3, "echo": {"kind": "page"}}}'
    ).encode()
    request = decode_request(payload, SPIDER, own_callback, rules=RULES)
    assert request.method == "HEAD" and request.meta["download_timeout"] == 7.5
    assert request.headers[b"If-None-Match"] == b'"v1"'
    widened = RequestRules.allowing(["proxy"])  # ECHO_REDIS_META_ALLOW = ["proxy"]
    proxied = f'{{{URL}, "meta": {{"proxy": "http://proxy.internal:3128"}}}}'.encode()
    assert decode_request(proxied, SPIDER, own_callback, rules=widened).meta["proxy"]


def test_every_request_the_project_queues_keeps_to_the_rules() -> None:
    from scrapy.http import FormRequest
    from scrapy.utils.test import get_crawler

    from scrapy_echo.core import NewPage
    from scrapy_echo.core.source_status import SourceStatus
    from scrapy_echo.crawler.echo_requests import page_request, refresh_request, source_request
    from scrapy_echo.crawler.runtime import EchoRuntime
    from scrapy_echo.model.refetch.refresh_lane import Tracked

    crawler = get_crawler(Spider, {"ECHO_SOURCES": ["http://a.test/"]})
    crawler.spider = SPIDER
    runtime = EchoRuntime.of(crawler)
    status = SourceStatus("http://a.test/")
    status.etag, status.last_modified = '"v1"', "Mon, 01 Jan 2024 00:00:00 GMT"
    extras = '{"headers": {"Referer": ["http://a.test/"]}, "meta": {"depth": 1}}'
    found = NewPage("http://a.test/new", 0, "http://a.test/", 150.0, (100.0, 200.0), 200.0, extras)
    start = scrapy.Request("http://a.test/start", meta={"is_start_request": True, "depth": 0})
    requests = [
        source_request(status, 0, own_callback),
        page_request(found, runtime.page_callback()),
        refresh_request(
            Tracked("http://a.test/new", 0, 0, 150.0, 200.0, None), "http://a.test/", SPIDER.parse
        ),
        start,
        FormRequest("http://a.test/search", formdata={"q": "x"}, meta={"depth": 1}),
    ]
    for request in requests:
        payload = encode_request(request, SPIDER, own_callback, rules=RULES)
        back = decode_request(payload, SPIDER, own_callback, rules=RULES)
        assert (back.url, back.method, back.meta) == (request.url, request.method, request.meta)


def test_a_request_the_rules_refuse_is_never_stored() -> None:
    request = scrapy.Request("http://a.test/", meta={"proxy": "http://proxy.internal:3128"})
    with pytest.raises(InvalidPayload, match=r"http://a.test/: meta key 'proxy' refused"):
        encode_request(request, SPIDER, own_callback, rules=RULES)
    # Without rules (a JOBDIR: files this crawl wrote itself) it is stored and read back.
    back = decode_request(encode_request(request, SPIDER, own_callback), SPIDER, own_callback)
    assert back.meta["proxy"] == "http://proxy.internal:3128"


def test_the_spiders_own_meta_is_stored_and_read_back() -> None:
    # Data for the spider's callbacks: lost in Redis mode when only listed keys came through.
    meta = {"item": {"title": "x", "tags": ["a"]}, "page_number": 2, "category": None}
    request = scrapy.Request("http://a.test/?page=2", callback=SPIDER.parse_article, meta=meta)
    back = decode_request(
        encode_request(request, SPIDER, own_callback, rules=RULES),
        SPIDER,
        own_callback,
        rules=RULES,
    )
    assert back.meta == meta


def test_meta_allow_and_refuse_take_patterns() -> None:
    def meta_of(rules: RequestRules, meta: str) -> dict[str, Any]:
        payload = f'{{{URL}, "meta": {meta}}}'.encode()
        return decode_request(payload, SPIDER, own_callback, rules=rules).meta

    browser = '{"playwright": true, "playwright_context": "js"}'
    with pytest.raises(InvalidPayload, match="ECHO_REDIS_META_ALLOW"):
        meta_of(RULES, browser)
    assert meta_of(RequestRules.allowing(["playwright*"]), browser)["playwright"] is True
    # ECHO_REDIS_META_REFUSE: a project's own steering keys; "*": known keys only.
    own_route = RequestRules.allowing([], refused_meta=["route_*"])
    assert meta_of(own_route, '{"item": 1}') == {"item": 1}
    with pytest.raises(InvalidPayload):
        meta_of(own_route, '{"route_via": "vpn"}')
    strict = RequestRules.allowing([], refused_meta=["*"])
    assert meta_of(strict, '{"depth": 2}') == {"depth": 2}
    with pytest.raises(InvalidPayload):
        meta_of(strict, '{"item": 1}')
    assert meta_of(RequestRules.allowing(["item"], refused_meta=["*"]), '{"item": 1}') == {
        "item": 1
    }


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ('"url": "http://169.254.169.254/latest/meta-data/iam/"', "address_refused"),
        ('"url": "http://2852039166/latest/meta-data/"', "address_refused"),
        ('"url": "http://[::ffff:a9fe:a9fe]/"', "address_refused"),
        ('"url": "http://metadata.google.internal/computeMetadata/v1/"', "address_refused"),
        ('"url": "http://10.0.0.5/admin"', "address_refused"),
        ('"url": "http://127.0.0.1:6379/"', "address_refused"),
        ('"url": "http://localhost:9200/_cat"', "address_refused"),
        # a.test's to urllib; 10.0.0.5's once Scrapy built the request ("\\" ends the host).
        ('"url": "http://10.0.0.5\\\\@a.test/"', "address_refused"),
        (f'{URL}, "headers": {{"Host": ["169.254.169.254"]}}', "header_refused"),
        (f'{URL}, "headers": {{"host": ["admin.a.test"]}}', "header_refused"),
        (f'{URL}, "headers": {{"Host": ["a.test:8080"]}}', "header_refused"),
        (f'{URL}, "headers": {{"Host": ["a.test", "b.test"]}}', "header_refused"),
        (f'{URL}, "headers": {{"Host": ["x@a.test"]}}', "header_refused"),
    ],
)
def test_a_stored_request_may_not_name_a_refused_host(fields: str, kind: str) -> None:
    with pytest.raises(InvalidPayload) as refused:
        decode_request(f"{{{fields}}}".encode(), SPIDER, own_callback, rules=RULES)
    assert refused.value.kind == kind


def test_the_hosts_the_crawl_allows_come_through_and_its_own_requests_are_checked() -> None:
    rules = RequestRules.allowing([], guard=AddressGuard.for_crawl(["http://127.0.0.2:8000/"]))
    for fields in (
        '"url": "http://127.0.0.2:8000/page"',
        '"url": "http://a.test:8080/", "headers": {"Host": ["A.test:8080"]}',
        '"url": "https://a.test/", "headers": {"Host": ["a.test:443"]}',
        '"url": "http://a.test/", "headers": {"Host": ["a.test"]}',
    ):
        decode_request(f"{{{fields}}}".encode(), SPIDER, own_callback, rules=rules)
    # The spider's own request is held to the same rules before it is stored.
    inside = scrapy.Request("http://10.0.0.5/")
    with pytest.raises(InvalidPayload, match="ECHO_ALLOWED_PRIVATE_HOSTS") as refused:
        encode_request(inside, SPIDER, own_callback, rules=rules)
    assert refused.value.kind == "address_refused"


def test_a_crawls_rules_know_its_sources_hosts_and_its_settings() -> None:
    from scrapy.utils.test import get_crawler

    from scrapy_echo.crawler.runtime import EchoRuntime
    from scrapy_echo.crawler.scheduler import EchoScheduler

    class Local(Spider):
        echo_sources = ("http://127.0.0.3/feed.xml",)

    settings = {"ECHO_SOURCES": ["http://127.0.0.2:8000/"], "ECHO_REDIS_META_REFUSE": "route_*"}
    crawler = get_crawler(Local, settings)
    crawler.spider = spider = Local()
    scheduler = EchoScheduler(crawler, EchoRuntime.of(crawler))
    scheduler.request_rules = RequestRules.allowing(["proxy"])  # (as in Redis mode)
    scheduler.attach(spider)

    def decode(fields: str) -> scrapy.Request:
        return scheduler.decode(f"{{{fields}}}".encode())

    assert decode('"url": "http://127.0.0.2:8000/a"').url == "http://127.0.0.2:8000/a"
    assert decode('"url": "http://127.0.0.3/b"').url == "http://127.0.0.3/b"
    assert decode('"url": "http://a.test/", "meta": {"proxy": "http://p.test:3128"}').meta
    for refused in ('"url": "http://127.0.0.4/"', f'{URL}, "meta": {{"route_via": "vpn"}}'):
        with pytest.raises(InvalidPayload):
            decode(refused)
