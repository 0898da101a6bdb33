"""Just enough PromQL to draw the Grafana dashboard's panels from scraped samples, offline.

The dashboard (``docs/grafana/scrapy-echo-dashboard.json``) uses only: a metric name,
``rate(m[w])``, ``sum``/``max`` with an optional ``by (labels)``, ``histogram_quantile(q, e)``
and ``a / b``. Anything else is a ``ValueError``: this is not a Prometheus.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

Labels = tuple[tuple[str, str], ...]
Sample = dict[tuple[str, Labels], float]  # one scrape: (metric, labels) -> value
Vector = dict[Labels, float]
Scrapes = list[tuple[float, Sample]]  # (time, samples), in time order

_TOKEN = re.compile(r"\s*(\d+(?:\.\d+)?[smhd]?|[A-Za-z_][A-Za-z0-9_]*|[()\[\],/])")


def evaluate(expr: str, scrapes: Scrapes, at: int, window: float) -> Vector:
    """``expr`` at scrape ``at``; every ``rate`` over ``window`` seconds whatever the
    expression says (the demo's clock runs about sixty times too fast for the dashboard's)."""
    tokens = _TOKEN.findall(expr)
    if "".join(tokens) != re.sub(r"\s+", "", expr):
        raise ValueError(f"not understood: {expr!r}")
    parser = _Parser(tokens)
    run = parser.expression()
    if parser.peek() is not None:
        raise ValueError(f"left over in {expr!r}: {parser.peek()!r}")
    return run(scrapes, at, window)


Run = Callable[[Scrapes, int, float], Vector]


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.at = tokens, 0

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ValueError(f"expected {expected!r}, found {token!r}")
        self.at += 1
        return token

    def expression(self) -> Run:
        left = self.term()
        if self.peek() == "/":
            self.take("/")
            right = self.term()
            return lambda s, i, w: _divide(left(s, i, w), right(s, i, w))
        return left

    def term(self) -> Run:
        word = self.take()
        if word in ("sum", "max"):
            by: tuple[str, ...] = ()
            if self.peek() == "by":
                self.take("by")
                self.take("(")
                names = [self.take()]
                while self.peek() == ",":
                    self.take(",")
                    names.append(self.take())
                self.take(")")
                by = tuple(names)
            self.take("(")
            inner = self.expression()
            self.take(")")
            combine = sum if word == "sum" else max
            return lambda s, i, w: _aggregate(inner(s, i, w), by, combine)
        if word == "rate":
            self.take("(")
            name = self.take()
            self.take("[")
            self.take()  # the window as written: the caller's is used
            self.take("]")
            self.take(")")
            return lambda s, i, w: _rate(name, s, i, w)
        if word == "histogram_quantile":
            self.take("(")
            q = float(self.take())
            self.take(",")
            inner = self.expression()
            self.take(")")
            return lambda s, i, w: _quantile(q, inner(s, i, w))
        return lambda s, i, w: _select(word, s[i][1])


def _select(name: str, sample: Sample) -> Vector:
    return {labels: value for (metric, labels), value in sample.items() if metric == name}


def _rate(name: str, scrapes: Scrapes, at: int, window: float) -> Vector:
    now, latest = scrapes[at][0], _select(name, scrapes[at][1])
    start = at
    while start > 0 and scrapes[start - 1][0] >= now - window:
        start -= 1
    if start == at:
        return {}
    then, earlier = scrapes[start][0], _select(name, scrapes[start][1])
    return {
        labels: max(0.0, value - earlier[labels]) / (now - then)
        for labels, value in latest.items()
        if labels in earlier
    }


def _aggregate(vector: Vector, by: tuple[str, ...], combine: Callable[..., float]) -> Vector:
    groups: dict[Labels, list[float]] = {}
    for labels, value in vector.items():
        key = tuple((k, v) for k, v in labels if k in by)
        groups.setdefault(key, []).append(value)
    return {key: combine(values) for key, values in groups.items()}


def _divide(a: Vector, b: Vector) -> Vector:
    return {labels: a[labels] / b[labels] for labels in a if labels in b and b[labels] > 0}


def _quantile(q: float, buckets: Vector) -> Vector:
    """Prometheus's ``histogram_quantile``: linear within the bucket the rank falls in."""
    bounds = sorted((math.inf if dict(k)["le"] == "+Inf" else float(dict(k)["le"]), v)
                    for k, v in buckets.items())  # fmt: skip
    if not bounds or bounds[-1][1] <= 0:
        return {}
    rank, below, previous = q * bounds[-1][1], 0.0, 0.0
    for bound, count in bounds:
        if count >= rank:
            if math.isinf(bound):
                return {(): previous}
            share = (rank - below) / (count - below) if count > below else 1.0
            return {(): previous + (bound - previous) * share}
        below, previous = count, bound
    return {(): previous}
