"""A data-only codec for saved crawl state (JOBDIR and Redis): JSON with tagged values, never
pickle.

Whoever can write to Redis must not be able to run code on the workers, so the state is
encoded as JSON in which numpy arrays, tuples, sets and dicts with non-string keys are tagged.
Decoding builds only plain values and numpy arrays of a few numeric dtypes (from raw bytes, no
pickle); anything else is a :class:`CodecError`.

A large state is written in frames, one per line after a first line naming the format: the
second line is the JSON of the state with each long list and each large array standing for
the frames that hold its parts (a part of a list is a JSON array; a part of an array, its
base64). A thread reading a state of 10 M links then parses it a frame at a time, each one a
short call: one ``json.loads`` of the whole would hold the interpreter, and stall the reactor,
for 1.3 s. Plain JSON (the format before frames) is still read.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

_DTYPES = {"float64", "int64", "bool", "uint64"}
MAGIC = b"echo-state-frames 1\n"


class CodecError(ValueError):
    """The bytes are not a state this codec wrote."""


# Arrays above this many bytes are stored in frames of this size: one frame's base64 is a
# short C call (a multiple of 3, so each frame's base64 stands alone).
PART_BYTES = 3 << 19
# Arrays up to this many bytes are written in place: larger ones would make the line of the
# state's JSON long (its per-source arrays would take 32 MB of it at 100 k sources).
INLINE_BYTES = 1 << 16
# Lists longer than this are stored in frames of this many items: a frame of the source
# table's columns or of waiting pages is parsed in a few milliseconds.
LIST_ITEMS = 1024


def dumps(value: Any) -> bytes:
    return "".join(dump_chunks(value)).encode()


def dump_chunks(value: Any) -> Iterator[str]:
    """The encoded ``value`` as a stream of short strings, by json's Python encoder: for a
    thread that must not hold the interpreter for long (no call runs for more than a frame)."""
    frames: list[Any] = []
    skeleton = _encode(value, frames)
    encoder = json.JSONEncoder(separators=(",", ":"))
    yield MAGIC.decode()
    yield from encoder.iterencode(skeleton)
    for frame in frames:
        yield "\n"
        if isinstance(frame, str):  # an array's part, in base64
            yield frame
        else:
            yield from encoder.iterencode(frame)


def loads(data: bytes | bytearray | list[bytes]) -> Any:
    """What :func:`dumps` encoded; ``data`` may come in blocks (as read from Redis), which
    are never joined whole."""
    blocks = [data] if isinstance(data, bytes | bytearray) else data
    if not _framed_format(blocks):
        return _decode(_json(b"".join(blocks)), _Frames([]))
    lines = _lines(blocks)  # the format's line, the state's, then its frames
    return _decode(_json(lines[1] if len(lines) > 1 else b""), _Frames(lines[2:]))


def _framed_format(blocks: Sequence[bytes | bytearray]) -> bool:
    head = b""
    for block in blocks:
        head += block[: len(MAGIC) - len(head)]
        if len(head) == len(MAGIC):
            break
    return head == MAGIC


def _lines(blocks: Sequence[bytes | bytearray]) -> list[bytes]:
    """The lines of ``blocks``, each joined from its pieces: no call longer than a line."""
    lines: list[bytes] = []
    pieces: list[bytes | bytearray] = []
    for block in blocks:
        at = 0
        while (end := block.find(b"\n", at)) >= 0:
            pieces.append(block[at:end])
            lines.append(b"".join(pieces))
            pieces.clear()
            at = end + 1
        pieces.append(block[at:])
    lines.append(b"".join(pieces))
    return lines


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CodecError(f"not JSON: {exc}") from None


class _Frames:
    """The frames of a state being read, each one taken once: a state that names a frame
    twice (to make a small input decode to a large value) is refused."""

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines
        self._taken = [False] * len(lines)

    def take(self, index: Any) -> bytes:
        if isinstance(index, bool) or not isinstance(index, int):
            raise CodecError(f"bad frame number {index!r:.20}")
        if not 0 <= index < len(self._lines) or self._taken[index]:
            raise CodecError(f"frame {index} missing or named twice")
        self._taken[index] = True
        line, self._lines[index] = self._lines[index], b""  # (read once: let it go)
        return line

    def indices(self, raw: dict[str, Any]) -> list[Any]:
        numbers = raw.get("frames")
        if not isinstance(numbers, list):
            raise CodecError("framed value without its frame numbers")
        return numbers


def _framed(items: list[Any], frames: list[Any]) -> Any:
    """``items`` (encoded) as they are, or as frames of :data:`LIST_ITEMS` if longer."""
    if len(items) <= LIST_ITEMS:
        return items
    numbers = []
    for at in range(0, len(items), LIST_ITEMS):
        numbers.append(len(frames))
        frames.append(items[at : at + LIST_ITEMS])
    return {"$": "list", "frames": numbers}


def _encode(value: Any, frames: list[Any]) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if isinstance(value, np.generic):
        return _encode(value.item(), frames)
    if isinstance(value, np.ndarray):
        return _encode_array(value, frames)
    if isinstance(value, list):
        return _framed([_encode(v, frames) for v in value], frames)
    if isinstance(value, tuple):
        return {"$": "tuple", "v": _framed([_encode(v, frames) for v in value], frames)}
    if isinstance(value, set | frozenset):
        return {"$": "set", "v": _framed([_encode(v, frames) for v in value], frames)}
    if isinstance(value, dict):
        tag = "odict" if isinstance(value, OrderedDict) else "dict"
        pairs = [[_encode(k, frames), _encode(v, frames)] for k, v in value.items()]
        return {"$": tag, "v": _framed(pairs, frames)}
    raise CodecError(f"cannot encode {type(value).__name__}")


def _encode_array(value: np.ndarray[Any, Any], frames: list[Any]) -> Any:
    array = np.ascontiguousarray(value)
    dtype = "int64" if array.dtype == np.intp else str(array.dtype)
    if dtype not in _DTYPES:
        raise CodecError(f"cannot encode arrays of {dtype}")
    flat = array.astype(dtype, copy=False).reshape(-1).view(np.uint8)
    head = {"$": "nd", "dtype": dtype, "shape": list(array.shape)}
    if flat.size <= INLINE_BYTES:
        return {**head, "data": base64.b64encode(flat.tobytes()).decode()}
    numbers = []
    for at in range(0, flat.size, PART_BYTES):
        numbers.append(len(frames))
        frames.append(base64.b64encode(flat[at : at + PART_BYTES].tobytes()).decode())
    return {**head, "frames": numbers}


def _decode(raw: Any, frames: _Frames) -> Any:
    if raw is None or isinstance(raw, bool | int | float | str):
        return raw
    if isinstance(raw, list):
        return [_decode(v, frames) for v in raw]
    if not isinstance(raw, dict) or not isinstance(raw.get("$"), str):
        raise CodecError("an object without a tag")
    tag = raw["$"]
    if tag == "float":
        if raw.get("v") not in ("nan", "inf", "-inf"):
            raise CodecError(f"bad float {raw.get('v')!r:.40}")
        return float(raw["v"])
    if tag == "nd":
        return _array(raw, frames)
    if tag == "list":
        return [_decode(v, frames) for v in _items(raw, frames)]
    items = _items(raw.get("v"), frames)
    if tag in ("tuple", "set"):
        decoded = [_decode(v, frames) for v in items]
        try:
            return tuple(decoded) if tag == "tuple" else set(decoded)
        except TypeError:
            raise CodecError("unhashable set member") from None
    if tag in ("dict", "odict"):
        if not all(isinstance(p, list) and len(p) == 2 for p in items):
            raise CodecError(f"{tag} without [key, value] pairs")
        try:
            pairs = [(_decode(k, frames), _decode(v, frames)) for k, v in items]
            return OrderedDict(pairs) if tag == "odict" else dict(pairs)
        except TypeError:
            raise CodecError("unhashable dict key") from None
    raise CodecError(f"unknown tag {tag!r:.40}")


def _items(raw: Any, frames: _Frames) -> list[Any]:
    """A list as stored: in place, or (``{"$": "list", ...}``) in frames, each parsed now."""
    if isinstance(raw, list):
        return raw
    if not isinstance(raw, dict) or raw.get("$") != "list":
        raise CodecError("expected a list")
    items: list[Any] = []
    for index in frames.indices(raw):
        part = _json(frames.take(index))
        if not isinstance(part, list):
            raise CodecError(f"frame {index} is not a list")
        items += part
    return items


def _array(raw: dict[str, Any], frames: _Frames) -> np.ndarray[Any, Any]:
    dtype, shape = raw.get("dtype"), raw.get("shape")
    if dtype not in _DTYPES or not isinstance(shape, list):
        raise CodecError("bad array")
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
        raise CodecError("bad array shape")
    if "frames" in raw:
        parts = [frames.take(index) for index in frames.indices(raw)]
    elif isinstance(raw.get("data"), str):
        parts = [raw["data"].encode("ascii", errors="replace")]
    elif isinstance(raw.get("parts"), list) and all(isinstance(p, str) for p in raw["parts"]):
        parts = [p.encode("ascii", errors="replace") for p in raw["parts"]]  # (before frames)
    else:
        raise CodecError("bad array: no data")
    size = math.prod(shape) * np.dtype(dtype).itemsize
    if size > sum(len(part) for part in parts) * 3 // 4:
        raise CodecError(f"bad array: too little data for a shape of {size} bytes")
    out = np.empty(size, dtype=np.uint8)  # filled a part at a time: each a short C call
    at = 0
    try:
        for part in parts:
            decoded = base64.b64decode(part, validate=True)
            if at + len(decoded) > size:
                raise CodecError("bad array: more data than its shape holds")
            out[at : at + len(decoded)] = np.frombuffer(decoded, dtype=np.uint8)
            at += len(decoded)
    except (binascii.Error, ValueError) as exc:
        raise CodecError(f"bad array: {exc}") from None
    if at != size:
        raise CodecError(f"bad array: {at} bytes for a shape of {size}")
    array: np.ndarray[Any, Any] = out.view(dtype).reshape(shape)
    return array
