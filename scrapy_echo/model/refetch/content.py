"""Whether a page changed between two fetches, comparing like with like.

A fetch's content digest (``scrapy_echo.crawler.spidermw.content_digest``) is a hash of its
body, and the server's ``ETag`` when it sent one: ``"<body hash>"`` or
``"<body hash> etag:<ETag>"``. Two fetches are compared by their ETags when both have one (the
server's word, which a page embedding the time or rotating ads would otherwise contradict),
else by their bodies: a server that starts or stops sending an ETag does not read as a
change. (Digests saved before the body
hash was kept beside the ETag are ``"etag:<ETag>"``: nothing but the ETag is known of them.)
"""

from __future__ import annotations

_ETAG = " etag:"
_LEGACY_ETAG = "etag:"


def digest(body_hash: str, etag: str | None) -> str:
    """A fetch's content digest, from its body's hash (no spaces) and its ``ETag``."""
    if not body_hash or " " in body_hash:
        raise ValueError(f"body_hash must be a non-empty word, got {body_hash!r}")
    return body_hash if etag is None else f"{body_hash}{_ETAG}{etag}"


def _parts(content: str) -> tuple[str | None, str | None]:
    """A digest's body hash and ETag (None where unknown)."""
    if content.startswith(_LEGACY_ETAG):
        return None, content[len(_LEGACY_ETAG) :]
    body, found, etag = content.partition(_ETAG)
    return (body or None), (etag if found else None)


def changed(before: str, after: str) -> bool | None:
    """Whether the content changed from the fetch digested ``before`` to ``after``: by ETag
    when both have one, else by body; None when they share neither (nothing to compare).

    >>> changed("a1b2", "a1b2"), changed("a1b2", "c3d4")
    (False, True)
    >>> changed('a1b2 etag:"v1"', 'c3d4 etag:"v1"')  # the server says it is the same
    False
    >>> changed('a1b2 etag:"v1"', "a1b2")  # the ETag was dropped: the bodies match
    False
    >>> changed('etag:"v1"', "a1b2") is None  # saved with its ETag alone
    True
    """
    body_before, etag_before = _parts(before)
    body_after, etag_after = _parts(after)
    if etag_before is not None and etag_after is not None:
        return etag_before != etag_after
    if body_before is not None and body_after is not None:
        return body_before != body_after
    return None


__all__ = ["changed", "digest"]
