"""One identity per page: which URLs name the same page, and which site a URL belongs to.

A page is fetched under its *clean* URL: tracking parameters (``utm_*``, ``fbclid``, ...)
removed, the user's normaliser applied, then w3lib's canonical form (sorted query, no fragment).
Pages and sources are compared by their *key*: the clean URL with ``http`` and ``https`` folded
together, since one article served under both is one page. Redirects and ``rel=canonical``
make further URLs *aliases* of a page (:class:`scrapy_echo.core.state.CrawlState` keeps them), so a
click row or a link under any of them counts for that page (docs/tutorial.rst, "Real sites").

Sites come from the public suffix list (tldextract's bundled copy, never fetched): the site of
``news.orf.at`` is ``orf.at``, of ``www.bbc.co.uk`` ``bbc.co.uk``; an IP address is its own site.
"""

from __future__ import annotations

import fnmatch
import importlib
import logging
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import tldextract
from w3lib.url import canonicalize_url

from scrapy_echo.core.unexpected import note_unexpected

logger = logging.getLogger(__name__)

# Parameters that say how a reader arrived, never which page they read. Glob patterns,
# matched case-insensitively against each query parameter's name.
DEFAULT_STRIP_PARAMS = (
    "utm_*",
    "fbclid",
    "gclid",
    "dclid",
    "gbraid",
    "wbraid",
    "msclkid",
    "yclid",
    "twclid",
    "igshid",
    "mc_cid",
    "mc_eid",
    "at_*",
    "_ga",
    "_gl",
    "_hsenc",
    "_hsmi",
    "mkt_tok",
    "oly_anon_id",
    "oly_enc_id",
    "vero_id",
    "wt_mc",
    "cmpid",
    "ocid",
    "ns_campaign",
    "ns_mchannel",
    "ns_source",
    "ns_linkname",
    "ns_fee",
    "sr_share",
    "spm",
    "share",
)

# Offline: the public suffix list snapshot that ships with tldextract (no network at start);
# private suffixes too, so two blogs on one hosting domain are two sites.
_EXTRACT = tldextract.TLDExtract(
    suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True
)


class NormalizerError(ValueError):
    """The user's URL normaliser failed or returned something that is not a URL."""


class PageIdentity:
    """Clean URLs and page keys under one configuration.

    Parameters
    ----------
    strip_params : iterable of str
        Glob patterns of query parameters to drop (case-insensitive).
    normalizer : callable, optional
        ``url -> url``, the user's own rule (``ECHO_URL_NORMALIZER``), applied after the
        parameters are stripped. If it raises or returns a non-URL the built-in form is used
        and :attr:`normalizer_failures` counts it.

    Examples
    --------
    >>> ids = PageIdentity()
    >>> ids.clean("https://ex.com/a?utm_source=x&id=3&fbclid=y#top")
    'https://ex.com/a?id=3'
    >>> ids.key("http://ex.com/a?id=3") == ids.key("https://ex.com/a?id=3&utm_medium=rss")
    True
    """

    def __init__(
        self,
        strip_params: Iterable[str] = DEFAULT_STRIP_PARAMS,
        normalizer: Callable[[str], str] | None = None,
    ) -> None:
        patterns = [p.strip().lower() for p in strip_params if p.strip()]
        self.strip_params = tuple(patterns)
        self._strip = (
            re.compile("|".join(fnmatch.translate(p) for p in patterns)) if patterns else None
        )
        self.normalizer = normalizer
        self.normalizer_failures = 0

    def clean(self, url: str) -> str:
        """The URL a page is fetched under; ``ValueError`` for what is not an http(s) URL."""
        stripped = self._strip_params(url)
        if self.normalizer is not None:
            try:
                normalised = self.normalizer(stripped)
                if not isinstance(normalised, str) or not normalised.startswith(
                    ("http://", "https://")
                ):
                    raise NormalizerError(f"returned {normalised!r:.80}, not an http(s) URL")
                stripped = normalised
            except Exception as exc:  # the user's code: any failure falls back, counted
                self.normalizer_failures += 1
                if self.normalizer_failures <= 3:
                    logger.warning("ECHO URL normaliser failed on %s: %s", url, exc)
        try:
            return canonicalize_url(stripped)
        except ValueError as exc:  # UnicodeError and idna's errors included
            raise ValueError(f"not a URL: {url!r:.80} ({exc})") from None
        except Exception as exc:  # a change in w3lib, not a bad URL: counted, logged once
            note_unexpected("identity/canonicalize_url", exc)
            raise ValueError(f"not cleaned: {url!r:.80} ({exc!r})") from None

    def key(self, url: str) -> str:
        """What pages and sources are compared by: the clean URL, scheme folded."""
        return fold_scheme(self.clean(url))

    def _strip_params(self, url: str) -> str:
        try:
            parts = urlsplit(url)
        except ValueError:
            return url  # canonicalize_url refuses it next, with the reason
        if self._strip is None or not parts.query:
            return url
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        kept = [(k, v) for k, v in pairs if not self._strip.match(k.lower())]
        if len(kept) == len(pairs):
            return url
        return urlunsplit(parts._replace(query=urlencode(kept)))


def fold_scheme(clean_url: str) -> str:
    """A clean URL's key: ``http`` and ``https`` name one page."""
    if clean_url.startswith("http://"):
        return "https://" + clean_url[7:]
    return clean_url


def load_normalizer(path: str) -> Callable[[str], str]:
    """The function a dotted path (``package.module.function``) names; ``ValueError`` with
    what is wrong if it names none."""
    module_name, _, name = path.rpartition(".")
    if not module_name:
        raise ValueError(f"ECHO_URL_NORMALIZER: {path!r} is not a dotted path to a function")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"ECHO_URL_NORMALIZER: cannot load {path!r}: {exc}") from None
    if not callable(function):
        raise ValueError(f"ECHO_URL_NORMALIZER: {path!r} is not callable")
    return function  # type: ignore[no-any-return]


@lru_cache(maxsize=65536)
def site_of_host(host: str) -> str:
    """The registered domain of a host name (``news.orf.at`` -> ``orf.at``); the host itself
    for IP addresses, ``localhost`` and names under no public suffix."""
    host = host.lower().rstrip(".")
    parts = _EXTRACT(host)
    if parts.domain and parts.suffix:
        return f"{parts.domain}.{parts.suffix}"
    return host


def site_of(url: str) -> str:
    """The site a URL belongs to (:func:`site_of_host` of its host)."""
    return site_of_host(urlsplit(url).hostname or "")


class SameSite:
    """Which links a source may yield: those of its own site, and those on the allowed hosts
    (``ECHO_ALLOWED_HOSTS``: a host name, or a registered domain that covers its
    subdomains), for a site whose feed or CDN lives on another host."""

    def __init__(self, allowed_hosts: Iterable[str] = ()) -> None:
        self.allowed = frozenset(h.strip().lower().rstrip(".") for h in allowed_hosts if h.strip())

    def allows(self, source_site: str, link_url: str) -> bool:
        host = (urlsplit(link_url).hostname or "").lower().rstrip(".")
        site = site_of_host(host)
        return site == source_site or host in self.allowed or site in self.allowed
