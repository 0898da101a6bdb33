"""w3lib's canonical URL form (the page identity built on it: :mod:`scrapy_echo.core.identity`)."""

from __future__ import annotations

from w3lib.url import canonicalize_url


def canonical_url(url: str) -> str:
    """The form every URL is compared in: w3lib's canonical URL (sorted query, no fragment),
    so a click row and a crawled link name a page the same way."""
    return canonicalize_url(url)
