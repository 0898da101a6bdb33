"""A hub's next page: where a section page that shows only its latest links continues.

The rule, in order:

1. a ``<link>`` or ``<a>`` whose ``rel`` has ``next`` (HTML's own, what most sites and every
   CMS theme write);
2. else a link to the page's own URL with the next page number: the ``page`` query parameter
   one higher (``?page=2`` from a page without one), or the path's ``/page/N/`` one higher
   (``/page/2/`` appended to a path without one), as WordPress and most others number them.

Only on the hub's own host. Nothing else ("more", "older", numbered lists of pages) is
guessed: a wrong guess would be crawled as part of the source at every overflow.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

from scrapy.http import TextResponse

_REL_NEXT = (
    '//link[contains(concat(" ", normalize-space(@rel), " "), " next ")]/@href'
    ' | //a[contains(concat(" ", normalize-space(@rel), " "), " next ")]/@href'
)
_PAGE_PATH = re.compile(r"/page/(\d+)/?$")


def next_page(response: TextResponse) -> str | None:
    """The absolute URL of the page after ``response``'s hub page, by the module's rule, or
    ``None``."""
    here = urlsplit(response.url).hostname
    for href in response.xpath(_REL_NEXT).getall():
        url = _absolute(response.url, href)
        if url is not None and urlsplit(url).hostname == here and url != response.url:
            return url
    wanted = {_bare(url) for url in numbered_next(response.url)}
    for href in response.xpath("//a/@href").getall():
        url = _absolute(response.url, href)
        if url is not None and _bare(url) in wanted:
            return url
    return None


def _absolute(base: str, href: str) -> str | None:
    """``href`` made absolute against ``base``; ``None`` for one no URL parser takes (a
    hostile page's ``http://[::1``): it is no next page."""
    try:
        url = urljoin(base, href.strip())
        urlsplit(url).hostname  # noqa: B018  (what raises on a broken host part)
    except ValueError:
        return None
    return url


_MOST_DIGITS = 9  # a page number longer than this is no page number


def numbered_next(url: str) -> list[str]:
    """The URLs the page after ``url`` has by the common numberings (rule 2): by the one
    ``url`` uses, or either when it has none (it is the first page).

    >>> numbered_next("https://a.test/news/?page=2&x=1")
    ['https://a.test/news/?page=3&x=1']
    >>> numbered_next("https://a.test/news/page/4/")
    ['https://a.test/news/page/5/']
    >>> numbered_next("https://a.test/news/")
    ['https://a.test/news/?page=2', 'https://a.test/news/page/2/']
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    numbers = [value for key, value in query if key == "page"]
    if numbers:
        if not (numbers[0].isdigit() and len(numbers[0]) <= _MOST_DIGITS):
            return []  # (no page number: a 5,000-digit one would not even convert)
        after = str(int(numbers[0]) + 1)
        query = [(key, after if key == "page" else value) for key, value in query]
        return [urlunsplit(parts._replace(query=urlencode(query)))]
    match = _PAGE_PATH.search(parts.path)
    if match and len(match.group(1)) > _MOST_DIGITS:
        return []
    if match:
        path = parts.path[: match.start()] + f"/page/{int(match.group(1)) + 1}/"
        return [urlunsplit(parts._replace(path=path))]
    return [
        urlunsplit(parts._replace(query=urlencode([*query, ("page", "2")]))),
        urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/page/2/")),
    ]


def _bare(url: str) -> str:
    """``url`` without its fragment and a trailing slash, for comparing links."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(fragment="", path=parts.path.rstrip("/") or "/"))


__all__ = ["next_page", "numbered_next"]
