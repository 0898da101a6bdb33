"""A data-only codec for saved crawl state (JOBDIR and Redis): JSON with tagged values, never
pickle.

Whoever can write to Redis must not be able to run code on the workers, so the state is
encoded as JSON in which numpy arrays, tuples, sets and dicts with non-string keys are tagged.
Decoding builds only plain values and numpy arrays of a few numeric dtypes (from raw bytes, no
pickle); anything else is a :class:`CodecError`.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import numpy as np

_DTYPES = {"float64", "int64", "bool", "uint64"}


class CodecError(ValueError):
    """The bytes are not a state this codec wrote."""


# Arrays above this many bytes are stored in parts: one part's base64 is a short C call, so a
# thread encoding a snapshot of 10 M links lets the reactor run between parts (a multiple of
# 3, so the parts' base64 strings join into the whole array's).
PART_BYTES = 3 << 19


def dumps(value: Any) -> bytes:
    return json.dumps(_encode(value), separators=(",", ":")).encode()


def dump_chunks(value: Any) -> Iterator[str]:
    """The JSON of :func:`dumps` as a stream of short strings, by json's Python encoder: for
    a thread that must not hold the interpreter for long (no call runs for more than a part
    of an array)."""
    encoder = json.JSONEncoder(separators=(",", ":"))
    return encoder.iterencode(_encode(value))


# Base64 strings this long (the parts of large arrays) are cut out of a state before the JSON
# parser reads it: one ``json.loads`` of a whole state holds the interpreter while it parses
# (1.35 s for 10 M links), and a thread restoring a planner's state must let the reactor run.
# Cut out one at a time (each a short C call), they are put back where the arrays are built.
_LIFT = re.compile(rb'"([A-Za-z0-9+/=]{65536,})"')
_LIFTED = "\x00"  # a lifted string's stand-in: NUL and its number (no base64 has a NUL)


def loads(data: bytes) -> Any:
    skeleton: list[bytes] = []
    lifted: list[bytes] = []
    end = 0
    for match in _LIFT.finditer(data):
        skeleton += [data[end : match.start()], b'"\\u0000%d"' % len(lifted)]
        lifted.append(match.group(1))
        end = match.end()
    skeleton.append(data[end:])
    try:
        raw = json.loads(b"".join(skeleton) if lifted else data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CodecError(f"not JSON: {exc}") from None
    return _decode(raw, lifted)


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if isinstance(value, np.generic):
        return _encode(value.item())
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        dtype = "int64" if array.dtype == np.intp else str(array.dtype)
        if dtype not in _DTYPES:
            raise CodecError(f"cannot encode arrays of {dtype}")
        flat = array.astype(dtype, copy=False).reshape(-1).view(np.uint8)
        if flat.size <= PART_BYTES:
            data = base64.b64encode(flat.tobytes()).decode()
            return {"$": "nd", "dtype": dtype, "shape": list(array.shape), "data": data}
        parts = [
            base64.b64encode(flat[at : at + PART_BYTES].tobytes()).decode()
            for at in range(0, flat.size, PART_BYTES)
        ]
        return {"$": "nd", "dtype": dtype, "shape": list(array.shape), "parts": parts}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, tuple):
        return {"$": "tuple", "v": [_encode(v) for v in value]}
    if isinstance(value, set | frozenset):
        return {"$": "set", "v": [_encode(v) for v in value]}
    if isinstance(value, dict):
        tag = "odict" if isinstance(value, OrderedDict) else "dict"
        return {"$": tag, "v": [[_encode(k), _encode(v)] for k, v in value.items()]}
    raise CodecError(f"cannot encode {type(value).__name__}")


def _decode(raw: Any, lifted: list[bytes]) -> Any:
    if raw is None or isinstance(raw, bool | int | float | str):
        return raw
    if isinstance(raw, list):
        return [_decode(v, lifted) for v in raw]
    if not isinstance(raw, dict) or not isinstance(raw.get("$"), str):
        raise CodecError("an object without a tag")
    tag = raw["$"]
    if tag == "float":
        if raw.get("v") not in ("nan", "inf", "-inf"):
            raise CodecError(f"bad float {raw.get('v')!r:.40}")
        return float(raw["v"])
    if tag == "nd":
        return _array(raw, lifted)
    items = raw.get("v")
    if tag in ("tuple", "set"):
        if not isinstance(items, list):
            raise CodecError(f"{tag} without a list")
        decoded = [_decode(v, lifted) for v in items]
        try:
            return tuple(decoded) if tag == "tuple" else set(decoded)
        except TypeError:
            raise CodecError("unhashable set member") from None
    if tag in ("dict", "odict"):
        if not isinstance(items, list) or not all(
            isinstance(p, list) and len(p) == 2 for p in items
        ):
            raise CodecError(f"{tag} without [key, value] pairs")
        try:
            pairs = [(_decode(k, lifted), _decode(v, lifted)) for k, v in items]
            return OrderedDict(pairs) if tag == "odict" else dict(pairs)
        except TypeError:
            raise CodecError("unhashable dict key") from None
    raise CodecError(f"unknown tag {tag!r:.40}")


def _put_back(text: str, lifted: list[bytes]) -> bytes:
    """A base64 string of an array, the lifted one it stands for if it is a stand-in."""
    if text.startswith(_LIFTED):
        try:
            return lifted[int(text[1:])]
        except (ValueError, IndexError):
            raise CodecError("bad array part") from None
    try:
        return text.encode("ascii")
    except UnicodeEncodeError:
        raise CodecError("bad array: not base64") from None


def _array(raw: dict[str, Any], lifted: list[bytes]) -> np.ndarray[Any, Any]:
    dtype, shape, data, parts = (
        raw.get("dtype"),
        raw.get("shape"),
        raw.get("data"),
        raw.get("parts"),
    )
    if isinstance(parts, list) and data is None and all(isinstance(p, str) for p in parts):
        data = b"".join(_put_back(p, lifted) for p in parts)
    elif isinstance(data, str):
        data = _put_back(data, lifted)
    if dtype not in _DTYPES or not isinstance(data, bytes) or not isinstance(shape, list):
        raise CodecError("bad array")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise CodecError("bad array shape")
    try:
        flat = np.frombuffer(base64.b64decode(data, validate=True), dtype=dtype)
        return flat.reshape(shape).copy()  # a writable array of its own
    except ValueError as exc:
        raise CodecError(f"bad array: {exc}") from None
