"""URL canonicalisation and site matching, one definition for links, sources and clicks."""

from __future__ import annotations

from urllib.parse import urlsplit

from w3lib.url import canonicalize_url


def canonical_url(url: str) -> str:
    """The form every URL is compared in: w3lib's canonical URL (sorted query, no fragment),
    so a click row and a crawled link name a page the same way."""
    return canonicalize_url(url)


def site_of(url: str) -> str:
    """The site a URL belongs to: its host's last two labels (``news.example.com`` ->
    ``example.com``), or three under a two-letter country code with a short second level
    (``www.bbc.co.uk`` -> ``bbc.co.uk``). A heuristic without a public-suffix list; a spider
    that needs better passes its own link extractor. IP addresses are their own site."""
    host = (urlsplit(url).hostname or "").lower().rstrip(".")
    labels = host.split(".")
    if len(labels) <= 2 or host.replace(".", "").isdigit() or ":" in host:
        return host
    keep = 3 if len(labels[-1]) == 2 and len(labels[-2]) <= 3 else 2
    return ".".join(labels[-keep:])
