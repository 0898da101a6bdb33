"""Requests as data in Redis: JSON of Scrapy's dict form, checked field by field on the way out.

scrapy-redis pickles requests into Redis, so whoever can write to Redis can run code on every
worker. Here a request is stored as JSON, and a stored entry becomes a request only if every
field has the documented type, its class is one of Scrapy's own request classes, and its
callbacks name public methods of the running spider's class. Anything else is an
:class:`InvalidPayload` (with a ``kind`` for the stats); nothing in it is ever executed.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scrapy.utils.request import request_from_dict

if TYPE_CHECKING:
    from scrapy import Request, Spider

# Marks the scheduler's own callback for source requests (not a spider method).
SOURCE_CALLBACK = "$echo_source"
_CLASSES = {
    "scrapy.http.request.Request",
    "scrapy.http.request.form.FormRequest",
    "scrapy.http.request.json_request.JsonRequest",
}
_FIELDS = {
    "url", "callback", "errback", "headers", "method", "body", "cookies", "meta", "encoding",
    "priority", "dont_filter", "flags", "cb_kwargs", "_class",
}  # fmt: skip
_MAX_PAYLOAD = 1 << 20


class InvalidPayload(ValueError):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def encode_request(request: Request, spider: Spider, source_callback: Any) -> str:
    """JSON for ``request``; ``ValueError`` if it cannot be stored as data (a callback that
    is not a spider method, meta that is not JSON)."""
    own = request.callback is source_callback
    if own:
        request = request.replace(callback=None)
    data = request.to_dict(spider=spider)
    if own:
        data["callback"] = SOURCE_CALLBACK
    data["body"] = base64.b64encode(data["body"]).decode()
    data["headers"] = {
        key.decode("latin-1"): [v.decode("latin-1") for v in values]
        for key, values in data["headers"].items()
    }
    try:
        return json.dumps(data, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"request {request.url} holds data that is not JSON: {exc}") from None


def decode_request(
    payload: bytes | str, spider: Spider, source_callback: Callable[..., Any]
) -> Request:
    """The request stored as ``payload``, or :class:`InvalidPayload`."""
    if len(payload) > _MAX_PAYLOAD:
        raise InvalidPayload("too_large", f"payload of {len(payload)} bytes")
    if isinstance(payload, bytes) and payload[:1] == b"\x80":
        raise InvalidPayload("pickle", "a pickle, refused")
    try:
        data = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        raise InvalidPayload("not_json", f"not JSON: {payload[:60]!r}") from None
    if not isinstance(data, dict):
        raise InvalidPayload("not_object", "not a JSON object")
    unknown = set(data) - _FIELDS
    if unknown:
        raise InvalidPayload("unknown_field", f"unknown fields {sorted(unknown)[:3]}")
    _check(data, spider)
    own = data.get("callback") == SOURCE_CALLBACK
    if own:
        data["callback"] = None
    try:
        data["body"] = base64.b64decode(data.get("body", ""), validate=True)
        data["headers"] = {
            k.encode("latin-1"): [v.encode("latin-1") for v in vs]
            for k, vs in data.get("headers", {}).items()
        }
        request = request_from_dict(data, spider=spider)
    except (ValueError, TypeError, KeyError) as exc:
        raise InvalidPayload("bad_field", f"not a request: {exc}") from None
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
    priority = data.get("priority", 0)
    if not isinstance(priority, int) or isinstance(priority, bool):
        raise bad("priority")
    if not isinstance(data.get("dont_filter", False), bool):
        raise bad("dont_filter")
    if not isinstance(data.get("encoding", "utf-8"), str):
        raise bad("encoding")
    if not isinstance(data.get("cookies", {}), dict | list):
        raise bad("cookies")
