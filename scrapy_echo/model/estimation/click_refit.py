"""The click fit of ``P, μ`` as a value: made from a click table on any thread, installed by
the learner on its own (:meth:`~scrapy_echo.model.estimation.learning.SourceLearner.click_refit`;
at 100 k sources it takes seconds, which a live crawl's reactor must not wait for)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.model.estimation.clicks import ClickTable
from scrapy_echo.model.estimation.estimators import DecayFit, fit_profit_decay
from scrapy_echo.model.intervals.curves import FloatArray

T = TypeVar("T", bound=np.generic)


@dataclass(frozen=True)
class ClickRefit:
    """A click fit made apart from its learner."""

    at: float  # the time of its table
    rows: int  # the sources then
    batches: int  # the click batches the learner had folded in then
    table: ClickTable
    fit: DecayFit
    mean_clicks: FloatArray
    mean_known: NDArray[np.bool_]


def fit_click_table(
    table: ClickTable, at: float, rows: int, batches: int, decay: tuple[float, float]
) -> ClickRefit:
    """``P, μ`` per source for ``rows`` sources from ``table`` (the fit's ``μ`` searched in
    ``decay``), and ECHO-greedy's plain clicks per page."""
    # Cumulative means when every bin from age 0 is observed, else per-bin ones.
    whole = table.cumulative is not None
    means = table.cumulative if table.cumulative is not None else table.increments
    fit = fit_profit_decay(
        pad_rows(means, rows),
        pad_rows(table.pages, rows),
        bin_width=table.bin_width,
        cumulative=whole,
        decay_min=decay[0],
        decay_max=decay[1],
    )
    return ClickRefit(
        at=at,
        rows=rows,
        batches=batches,
        table=table,
        fit=fit,
        # ECHO-greedy's P: the plain average clicks per page, bin by bin over the pages old
        # enough for each bin (no fit, no decay).
        mean_clicks=pad_rows(table.increments.sum(axis=1), rows),
        mean_known=pad_rows(table.pages.max(axis=1, initial=0) > 0, rows),
    )


def pad_rows(array: NDArray[T], rows: int) -> NDArray[T]:
    """``array`` with zero rows added (or rows cut) to have exactly ``rows`` rows."""
    if array.shape[0] >= rows:
        return array[:rows]
    pad = np.zeros((rows - array.shape[0], *array.shape[1:]), dtype=array.dtype)
    return np.concatenate([array, pad])
