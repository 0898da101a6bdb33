"""Requests as data in Redis: JSON of Scrapy's dict form, checked field by field on the way out.

scrapy-redis pickles requests into Redis, so whoever can write to Redis can run code on every
worker. Here a request is stored as JSON, and a stored entry becomes a request only if every
field has the documented type, its class is one of Scrapy's own request classes, and its
callbacks name public methods of the running spider's class. Anything else is an
:class:`InvalidPayload` (with a ``kind`` for the stats); nothing in it is ever executed.

In distributed mode a stored request must also keep to :class:`RequestRules`: what it may ask
of a worker beyond "fetch this URL for that callback", and which URLs it may name at all
(docs/distributed.rst, "What a stored request may ask").
"""

from __future__ import annotations

import base64
import fnmatch
import functools
import json
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.utils.request import request_from_dict

from scrapy_echo.sources.address_guard import AddressGuard

if TYPE_CHECKING:
    from scrapy import Spider

# Marks the scheduler's own callback for source requests (not a spider method).
SOURCE_CALLBACK = "$echo_source"
_CLASSES = {
    "scrapy.http.request.Request",
    "scrapy.http.request.form.FormRequest",
    "scrapy.http.request.json_request.JsonRequest",
}
_FIELDS = {
    "url", "callback", "errback", "headers", "method", "body", "cookies", "meta", "encoding",
    "priority", "dont_filter", "flags", "cb_kwargs", "_class", "dumps_kwargs",
}  # fmt: skip
# What a JsonRequest's ``dumps_kwargs`` may pass to ``json.dumps``: nothing that takes code.
_DUMPS_KWARGS = {"sort_keys", "indent", "separators", "ensure_ascii", "allow_nan", "skipkeys"}
_MAX_PAYLOAD = 1 << 20


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _statuses(value: Any) -> bool:
    return isinstance(value, list) and all(_count(v) and 100 <= v <= 599 for v in value)


def _seconds(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


# The meta keys of Scrapy and ECHO a request from Redis may carry, each with the values it may
# take: ECHO's own tags, and Scrapy's keys that change how a response is handled but never
# where a request goes, through what, or with whose credentials.
META_RULES: dict[str, Callable[[Any], bool]] = {
    "echo": lambda value: isinstance(value, dict),
    "echo_refresh": _flag,
    "dont_cache": _flag,
    "depth": _count,
    "is_start_request": _flag,
    "dont_redirect": _flag,
    "dont_retry": _flag,
    "max_retry_times": _count,
    "handle_httpstatus_all": _flag,
    "handle_httpstatus_list": _statuses,
    "dont_merge_cookies": _flag,
    "cookiejar": lambda value: isinstance(value, str) or _count(value),
    "download_timeout": _seconds,
    "referrer_policy": lambda value: isinstance(value, str),
}
# The meta keys (glob patterns) a request from Redis may not carry unless
# ECHO_REDIS_META_ALLOW names them; any other key is the spider's own data, and comes through
# with any JSON value. Refused: the rest of Scrapy's keys, which change where a request goes
# (proxy, bindaddress, allow_offsite, verbatim_url), with whose credentials (http_user,
# ftp_password), at what pace (download_slot, autothrottle_*), what it may skip
# (dont_obey_robotstxt) or fetch (download_maxsize), or which a middleware sets on a request
# under way (redirect_*, retry_times: a followup is finished where it started, cached_*);
# ECHO's other keys (echo_lease, echo_source); private ones (a leading underscore); and
# the keys of plugins that fetch another way (a browser, a rendering or scraping service),
# where whoever wrote the entry could reach what the address guard keeps them from.
REFUSED_META = (
    "_*", "echo*", "proxy*", "bindaddress", "allow_offsite", "verbatim_url", "http_*",
    "ftp_*", "download_*", "autothrottle_*", "dont_*", "redirect_*", "retry_*", "cache*",
    "depth_*", "priority_adjust", "rule",
    "playwright*", "pyppeteer*", "selenium*", "splash*", "zyte_api*", "zyte_smartproxy*",
    "crawlera*", "impersonate*", "scrapingbee*", "scraperapi*",
)  # fmt: skip
METHODS = ("GET", "HEAD", "POST")
# Credentials are added on the worker (HttpAuthMiddleware, the cookie jar), never read from
# Redis: whoever can write there could attach them to any URL, and anyone who can read it
# would see them.
REFUSED_HEADERS = ("authorization", "proxy-authorization", "cookie")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_UNSAFE = re.compile(r"[\r\n\x00]")


class InvalidPayload(ValueError):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class RequestRules:
    """What a request read from Redis may ask of a worker: a method of :data:`METHODS`; a
    URL whose host ``guard`` allows, and no ``Host`` header naming another host; meta keys
    of :data:`META_RULES` (with their values), or matching ``extra_meta``
    (``ECHO_REDIS_META_ALLOW``, any value), or else matching neither :data:`REFUSED_META`
    nor ``refused_meta`` (``ECHO_REDIS_META_REFUSE``); no header of
    :data:`REFUSED_HEADERS` and no cookies."""

    extra_meta: frozenset[str] = frozenset()
    refused_meta: tuple[str, ...] = ()
    # (By default nothing loopback or private: only the crawl knows its own sources' hosts.)
    guard: AddressGuard = field(default_factory=AddressGuard)

    @classmethod
    def allowing(
        cls,
        extra_meta: Iterable[str],
        *,
        refused_meta: Iterable[str] = (),
        guard: AddressGuard | None = None,
    ) -> RequestRules:
        return cls(frozenset(extra_meta), tuple(refused_meta), guard or AddressGuard())

    def check(self, data: dict[str, Any]) -> None:
        """``InvalidPayload`` if ``data`` (a request's dict form, headers as text) asks for
        more than these rules allow."""
        method = data.get("method", "GET")
        if method not in METHODS:
            raise InvalidPayload("method_refused", f"method {method!r:.40} refused")
        for key, value in data.get("meta", {}).items():
            self._check_meta(key, value)
        headers = data.get("headers", {})
        for name, values in headers.items():
            if name.lower() in REFUSED_HEADERS:
                raise InvalidPayload("header_refused", f"header {name!r:.60} refused")
            if not _TOKEN.match(name) or any(_UNSAFE.search(value) for value in values):
                raise InvalidPayload("header_refused", f"header {name!r:.60} is malformed")
        if data.get("cookies"):
            raise InvalidPayload("cookies_refused", "cookies refused (use the cookie jar)")
        self.check_target(data["url"], headers)

    def check_target(self, url: str, headers: dict[str, list[str]]) -> None:
        """``InvalidPayload`` if ``url`` names a host the guard refuses, or ``headers`` a
        ``Host`` that is not ``url``'s (a virtual host, or an internal service behind a
        shared front, that the URL does not name)."""
        refusal = self.guard.refusal(url)
        if refusal is not None:
            raise InvalidPayload("address_refused", f"URL {url:.100} refused: {refusal}")
        for name, values in headers.items():
            if name.lower() == "host" and not (len(values) == 1 and _names_host(values[0], url)):
                raise InvalidPayload(
                    "header_refused", f"header Host {values!r:.60} is not the host of {url:.100}"
                )

    def _check_meta(self, key: str, value: Any) -> None:
        if _any_matches(tuple(self.extra_meta)).match(key):
            return
        rule = META_RULES.get(key)
        if rule is not None:
            if not rule(value):
                raise InvalidPayload("meta_refused", f"meta {key} = {value!r:.60} refused")
            return
        if _any_matches(REFUSED_META + self.refused_meta).match(key):
            raise InvalidPayload(
                "meta_refused", f"meta key {key!r:.60} refused (see ECHO_REDIS_META_ALLOW)"
            )


@functools.lru_cache(maxsize=16)
def _any_matches(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """One expression for glob ``patterns`` (case-sensitive, as meta keys are); matches
    nothing when there are none."""
    return re.compile("|".join(fnmatch.translate(p) for p in patterns) or r"(?!)")


def _names_host(value: str, url: str) -> bool:
    """Whether a ``Host`` header's ``value`` names ``url``'s host and port."""
    try:
        want, got = urlsplit(url), urlsplit(f"//{value.strip()}")
        default = 443 if want.scheme == "https" else 80
        same_port = (got.port or default) == (want.port or default)
    except ValueError:  # a port that is not one
        return False
    plain = got.netloc == value.strip() and not got.path and "@" not in value
    return plain and same_port and got.hostname is not None and got.hostname == want.hostname


def encode_request(
    request: Request,
    spider: Spider,
    source_callback: Any,
    *,
    rules: RequestRules | None = None,
) -> str:
    """JSON for ``request``; ``ValueError`` if it cannot be stored as data (a callback that
    is not a spider method, meta that is not JSON), or (:class:`InvalidPayload`) if it
    breaks ``rules``: then a worker would refuse it, so it is never stored."""
    data = _as_dict(request, spider, source_callback)
    data["body"] = base64.b64encode(data["body"]).decode()
    data["headers"] = {
        key.decode("latin-1"): [v.decode("latin-1") for v in values]
        for key, values in data["headers"].items()
    }
    if rules is not None:
        try:
            rules.check(data)
        except InvalidPayload as exc:
            raise InvalidPayload(exc.kind, f"request {request.url}: {exc}") from None
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        key = _first_not_json(data.get("meta", {}))
        where = f" (meta key {key!r:.60})" if key is not None else ""
        raise ValueError(
            f"request {request.url} holds data that is not JSON{where}: {exc}"
        ) from None


def _as_dict(request: Request, spider: Spider, source_callback: Any) -> dict[str, Any]:
    """``request.to_dict(spider=spider)``, the scheduler's own callback named
    :data:`SOURCE_CALLBACK`. Scrapy finds a callback's name by listing every method of the
    spider (a sixth of a queued request's cost); a method found under its own name needs no
    search, and anything else (an alias, a decorated method) is left to Scrapy's."""
    own = request.callback is source_callback
    callback = SOURCE_CALLBACK if own else _own_name(request.callback, spider)
    errback = _own_name(request.errback, spider)
    if callback is _SEARCH or errback is _SEARCH:
        data = (request.replace(callback=None) if own else request).to_dict(spider=spider)
        if own:
            data["callback"] = SOURCE_CALLBACK
        return data
    data = {"url": request.url, "callback": callback, "errback": errback,
            "headers": dict(request.headers)}  # fmt: skip
    for attr in request.attributes:  # (Scrapy's list of what makes a request, for to_dict)
        data.setdefault(attr, getattr(request, attr))
    if type(request) is not Request:
        data["_class"] = f"{type(request).__module__}.{type(request).__name__}"
    return data


_SEARCH = object()  # a callback to find as Scrapy does


def _own_name(value: Any, spider: Spider) -> Any:
    """The name of the spider's method ``value`` under its own name, ``value`` itself if it
    is not callable (``None``), else :data:`_SEARCH`."""
    if not callable(value):
        return value
    function = getattr(value, "__func__", None)
    name = getattr(function, "__name__", "")
    found = getattr(spider, name, None) if name else None
    if function is None or getattr(found, "__func__", None) is not function:
        return _SEARCH
    return name


def _first_not_json(meta: dict[str, Any]) -> str | None:
    """The first meta key whose value is not JSON data, if one is: what to tell the user."""
    for key, value in meta.items():
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError, RecursionError):
            return str(key)
    return None


def decode_request(
    payload: bytes | str,
    spider: Spider,
    source_callback: Callable[..., Any],
    *,
    rules: RequestRules | None = None,
) -> Request:
    """The request stored as ``payload``, or :class:`InvalidPayload`. ``rules``: what it
    may ask of a worker (``None``: anything, for files this crawl wrote itself)."""
    if len(payload) > _MAX_PAYLOAD:
        raise InvalidPayload("too_large", f"payload of {len(payload)} bytes")
    if isinstance(payload, bytes) and payload[:1] == b"\x80":
        raise InvalidPayload("pickle", "a pickle, refused")
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise InvalidPayload("not_json", f"not JSON: {payload[:60]!r}") from None
    except RecursionError:  # nested deeper than the parser's stack
        raise InvalidPayload("too_deep", f"JSON nested too deep: {payload[:60]!r}") from None
    if not isinstance(data, dict):
        raise InvalidPayload("not_object", "not a JSON object")
    unknown = set(data) - _FIELDS
    if unknown:
        raise InvalidPayload("unknown_field", f"unknown fields {sorted(unknown)[:3]}")
    _check(data, spider)
    if rules is not None:
        rules.check(data)
    own = data.get("callback") == SOURCE_CALLBACK
    if own:
        data["callback"] = None
    headers = data.get("headers", {})
    try:
        data["body"] = base64.b64decode(data.get("body", ""), validate=True)
        data["headers"] = {
            k.encode("latin-1"): [v.encode("latin-1") for v in vs]
            for k, vs in data.get("headers", {}).items()
        }
        request = request_from_dict(data, spider=spider)
    except (ValueError, TypeError, LookupError, RecursionError) as exc:
        # (LookupError: a missing key, or an unknown encoding.)
        raise InvalidPayload("bad_field", f"not a request: {exc!r:.200}") from None
    if rules is not None:
        # Again as the worker will fetch it: Scrapy rewrites a URL it builds a request from
        # (a backslash before "@" ends the host, full-width digits are digits).
        rules.check_target(request.url, headers)
    if own:
        request = request.replace(callback=source_callback)
    return request


def _check(data: dict[str, Any], spider: Spider) -> None:
    def bad(field: str) -> InvalidPayload:
        return InvalidPayload("bad_field", f"bad {field}: {data.get(field)!r:.80}")

    url = data.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise bad("url")
    method = data.get("method", "GET")
    if not isinstance(method, str) or not method.isalpha() or len(method) > 16:
        raise bad("method")
    if data.get("_class", "scrapy.http.request.Request") not in _CLASSES:
        raise InvalidPayload("bad_class", f"request class {data.get('_class')!r:.80} refused")
    for name in ("callback", "errback"):
        value = data.get(name)
        if value is None or (name == "callback" and value == SOURCE_CALLBACK):
            continue
        if (
            not isinstance(value, str)
            or value.startswith("_")
            or not callable(getattr(type(spider), value, None))
        ):
            raise InvalidPayload("bad_callback", f"{name} {value!r:.80} is not a spider method")
    headers = data.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(vs, list) and all(isinstance(v, str) for v in vs)
        for k, vs in headers.items()
    ):
        raise bad("headers")
    if not isinstance(data.get("body", ""), str):
        raise bad("body")
    for name, kind in (("meta", dict), ("cb_kwargs", dict), ("flags", list)):
        if not isinstance(data.get(name, kind()), kind):
            raise bad(name)
    dumps_kwargs = data.get("dumps_kwargs", {})
    if not isinstance(dumps_kwargs, dict) or not set(dumps_kwargs) <= _DUMPS_KWARGS:
        raise bad("dumps_kwargs")
    priority = data.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise bad("priority")
    if not isinstance(data.get("dont_filter", False), bool):
        raise bad("dont_filter")
    if not isinstance(data.get("encoding", "utf-8"), str):
        raise bad("encoding")
    if not isinstance(data.get("cookies", {}), dict | list):
        raise bad("cookies")
