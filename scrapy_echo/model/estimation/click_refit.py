"""The click fit of ``P, μ`` as a value: made from a click table on any thread, installed by
the learner on its own (:meth:`~scrapy_echo.model.estimation.learning.SourceLearner.click_refit`;
at 100 k sources it takes seconds, which a live crawl's reactor must not wait for)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeVar

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


# -- persistence ------------------------------------------------------------------------
_FIT_FIELDS = ("profit", "decay", "pages", "residual", "fitted")


def fit_data(
    fit: DecayFit | None,
    mean_clicks: FloatArray,
    mean_known: NDArray[np.bool_] | None,
    dispersion: float,
) -> dict[str, Any] | None:
    """The last click fit as plain data (arrays copied: a later fit replaces, never changes,
    them; copied anyway, as every part of a capture is)."""
    if fit is None:
        return None
    arrays = {name: getattr(fit, name).copy() for name in _FIT_FIELDS}
    known = None if mean_known is None else mean_known.copy()
    return {
        **arrays, "mean_clicks": mean_clicks.copy(), "mean_known": known, "dispersion": dispersion,
    }  # fmt: skip


def _dispersion_from(data: dict[str, Any]) -> float:
    """The saved fit's dispersion (1 in a state saved before it was measured); ``ValueError``
    if it is not a number >= 1."""
    value = data.get("dispersion", 1.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 1:
        raise ValueError(f"click dispersion {value!r} is not a number >= 1")
    if not math.isfinite(value):
        raise ValueError(f"click dispersion {value!r} is not finite")
    return float(value)


def fit_from_data(
    data: dict[str, Any],
) -> tuple[DecayFit, FloatArray, NDArray[np.bool_] | None, float]:
    """The fit, mean clicks, their mask and the dispersion :func:`fit_data` saved;
    ``ValueError``/``KeyError`` if ``data`` is not such a fit."""
    arrays = {name: np.asarray(data[name]) for name in _FIT_FIELDS}
    sizes = {array.shape for array in arrays.values()}
    if len(sizes) != 1 or len(next(iter(sizes))) != 1:
        raise ValueError("click fit arrays of different shapes")
    fit = DecayFit(
        profit=arrays["profit"].astype(np.float64),
        decay=arrays["decay"].astype(np.float64),
        pages=arrays["pages"].astype(np.float64),
        residual=arrays["residual"].astype(np.float64),
        fitted=arrays["fitted"].astype(bool),
    )
    known = data["mean_known"]
    return (
        fit,
        np.asarray(data["mean_clicks"], dtype=np.float64),
        None if known is None else np.asarray(known, dtype=bool),
        _dispersion_from(data),
    )
