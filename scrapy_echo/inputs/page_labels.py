"""Hand-labelled pages, for tuning the thresholds of Wang et al. (2008)'s temporal test
(:mod:`scrapy_echo.model.site_tuning`; docs/how-it-works.rst, "Ranking sites by how temporal
they are").

A labels file holds rows ``url, label``: CSV with a header naming the two columns (others are
ignored), or JSON Lines objects with those keys. ``label`` is ``temporal``/``untemporal`` or
``1``/``0`` (also ``true``/``false``; JSON ``true``/``false``/``1``/``0``). URLs are
canonicalised as the page-view log's are, so a label finds its page. The rows' rules are the
click feed's reader's (:mod:`scrapy_echo.inputs.clickfeed`): a bad row (not a URL, no label,
a label not in the list, bad JSON, a CSV line of the wrong width) is skipped, counted by kind
in :attr:`PageLabels.invalid`, and the first of each kind is logged with its line. A URL
labelled both ways is an error (``ValueError`` naming both lines): which label is right cannot
be guessed. A missing file is ``FileNotFoundError``.

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "labels.csv"
>>> _ = path.write_text("url,label\\nhttps://News.example/a#top,temporal\\nhttps://news.example/b,0\\n")
>>> labels = read_page_labels(path)
>>> labels.urls, labels.temporal.tolist(), dict(labels.invalid)
(['https://news.example/a', 'https://news.example/b'], [True, False], {})
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.inputs.clickfeed import check_url
from scrapy_echo.inputs.feed_reader import FeedReader, InvalidClickRow

_TEMPORAL = frozenset({"temporal", "1", "true", "yes"})
_UNTEMPORAL = frozenset({"untemporal", "0", "false", "no"})


@dataclass(frozen=True)
class PageLabels:
    """The labelled pages (canonical URLs, in order of first sight) and the rows skipped."""

    urls: list[str]
    temporal: NDArray[np.bool_]
    invalid: Counter[str]

    def match(self, urls: Sequence[str]) -> tuple[NDArray[np.intp], NDArray[np.bool_], int]:
        """The labelled pages found among a log's ``urls``: their page indices, their labels,
        and how many labelled URLs the log lacks."""
        index = {url: i for i, url in enumerate(urls)}
        found = [
            (index[u], bool(t))
            for u, t in zip(self.urls, self.temporal.tolist(), strict=True)
            if u in index
        ]
        pages = np.array([p for p, _ in found], np.intp)
        hot = np.array([t for _, t in found], bool)
        return pages, hot, len(self.urls) - len(found)


def parse_label(value: object) -> bool:
    """``True`` for temporal, ``False`` for untemporal; :class:`InvalidClickRow` (kind
    ``bad_label``) for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower() if isinstance(value, (str, float, int)) else None
    if text in _TEMPORAL:
        return True
    if text in _UNTEMPORAL:
        return False
    raise InvalidClickRow("bad_label", f"label {value!r} is not temporal/untemporal or 1/0")


class _LabelReader(FeedReader[tuple[str, bool]]):
    what = "page-label"
    columns = ("url", "label")

    def parse(self, values: Mapping[str, object]) -> tuple[str, bool]:
        url, label = values.get("url"), values.get("label")
        if url is None or label is None:
            raise InvalidClickRow("missing_field", "needs a url and a label")
        return check_url(url), parse_label(label)

    def read_all(self) -> PageLabels:
        labels: dict[str, bool] = {}
        line_of: dict[str, int] = {}
        with open(self.path, "rb") as handle:
            data = handle.read()
        if data and not data.endswith(b"\n"):
            data += b"\n"  # a finished file: its last line counts without a newline
        for raw in data.split(b"\n")[:-1]:
            self._line += 1
            row = self._row(raw)
            if row is None:
                continue
            url, hot = row
            if labels.setdefault(url, hot) != hot:
                raise ValueError(
                    f"page labels {str(self.path)!r}: {url} is labelled "
                    f"{'temporal' if labels[url] else 'untemporal'} on line {line_of[url]} "
                    f"and {'temporal' if hot else 'untemporal'} on line {self._line}"
                )
            line_of.setdefault(url, self._line)
        self.rows_read = len(line_of)
        return PageLabels(list(labels), np.array(list(labels.values()), bool), self.invalid)


def read_page_labels(path: str | os.PathLike[str], *, fmt: str | None = None) -> PageLabels:
    """Every usable row of a page-labels file; ``fmt`` ``"csv"`` or ``"jsonl"`` (default: from
    the suffix). ``FileNotFoundError`` for a missing file, ``ValueError`` for an unknown
    format or a page labelled both ways."""
    reader = _LabelReader(path, fmt=fmt)
    if not reader.path.is_file():
        raise FileNotFoundError(f"page labels {str(reader.path)!r} is not a file")
    return reader.read_all()
