"""A project's own spider middleware, as users write them: it drops the requests for every
third article and tags the others (``meta["tag"]``)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import scrapy

_ARTICLE = re.compile(r"/(\d+)\.html$")


def refused(url: str) -> bool:
    """Whether :class:`DropSomeLinks` drops a request for ``url``."""
    match = _ARTICLE.search(url)
    return bool(match) and int(match.group(1)) % 3 == 0


class DropSomeLinks:
    def _treat(self, item: Any) -> Any:
        if isinstance(item, scrapy.Request):
            if refused(item.url):
                return None
            item.meta["tag"] = "kept"
        return item

    def process_spider_output(self, response: Any, result: Iterable[Any]) -> Iterator[Any]:
        for item in result:
            treated = self._treat(item)
            if treated is not None:
                yield treated

    async def process_spider_output_async(
        self, response: Any, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        async for item in result:
            treated = self._treat(item)
            if treated is not None:
                yield treated
