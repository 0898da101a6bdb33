"""A page's content digest, and whether two fetches differ (compared like with like)."""

from __future__ import annotations

import pytest
from scrapy.http import HtmlResponse

from scrapy_echo.crawler.spidermw import content_digest
from scrapy_echo.model.refetch.content import changed, digest


def response(body: bytes, etag: bytes | None = None) -> HtmlResponse:
    headers = {b"ETag": etag} if etag is not None else {}
    return HtmlResponse("https://a.test/p", body=body, headers=headers)


def test_a_digest_keeps_the_body_hash_beside_the_etag() -> None:
    plain, tagged = (
        content_digest(response(b"<p>x</p>")),
        content_digest(response(b"<p>x</p>", b'W/"v1"')),
    )
    assert " " not in plain and tagged == f'{plain} etag:W/"v1"'
    assert changed(plain, tagged) is False  # the ETag came: the body is the same
    assert changed(tagged, content_digest(response(b"<p>ad 2</p>", b'W/"v1"'))) is False
    assert changed(tagged, content_digest(response(b"<p>x</p>", b'W/"v2"'))) is True
    assert changed(plain, content_digest(response(b"<p>y</p>"))) is True
    # An empty ETag header is no ETag.
    assert content_digest(response(b"<p>x</p>", b"")) == plain


def test_an_etag_with_spaces_or_the_separator_survives() -> None:
    odd = digest("abcd", '"a etag:b"')
    assert changed(odd, digest("ffff", '"a etag:b"')) is False
    assert changed(odd, digest("abcd", '"a etag:c"')) is True


def test_digests_saved_with_their_etag_alone_compare_by_etag_or_not_at_all() -> None:
    assert changed('etag:"v1"', 'abcd etag:"v1"') is False
    assert changed('etag:"v1"', 'etag:"v2"') is True
    assert changed('etag:"v1"', "abcd") is None


@pytest.mark.parametrize("body_hash", ["", "ab cd"])
def test_a_body_hash_is_one_word(body_hash: str) -> None:
    with pytest.raises(ValueError, match="body_hash must be a non-empty word"):
        digest(body_hash, None)
