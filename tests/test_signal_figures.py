"""The ordering of Fig. 3 and Fig. 4 of Busa-Fekete et al., *A Scalable Crawling Algorithm
Utilizing Noisy Change-Indicating Signals*, on synthetic pages: GREEDY near the optimum
without signals, GREEDY-NCIS above GREEDY with them, and no policy above its optimum."""

from __future__ import annotations

import pytest

from scrapy_echo.sim.signal_figures import figure_rows
from scrapy_echo.sim.signal_population import signal_population

# Over simulation seeds 0-4 at these sizes, GREEDY, LDS and GREEDY-NCIS landed between 0.988
# and 1.005 of their optimum (run with this build): 2% allows four times the largest excess.
NOISE = 0.02


@pytest.mark.slow
def test_the_figures_keep_the_papers_ordering() -> None:
    pages = signal_population(60, seed=11)
    for row in figure_rows(pages, (6.0, 24.0), seed=5, slots=12_000):
        greedy = row.runs["GREEDY"].expected_accuracy
        ncis = row.runs["GREEDY-NCIS"].expected_accuracy
        assert greedy >= 0.97 * row.optimum_plain, row.budget
        assert row.runs["LDS"].expected_accuracy >= 0.95 * row.optimum_plain, row.budget
        assert ncis >= greedy, row.budget
        assert ncis >= 0.97 * row.optimum, row.budget
        for name in ("GREEDY", "LDS"):
            assert row.runs[name].expected_accuracy <= row.optimum_plain * (1 + NOISE), name
        for name in ("GREEDY-CIS", "GREEDY-NCIS"):
            assert row.runs[name].expected_accuracy <= row.optimum * (1 + NOISE), name
        # The request-count accuracy the paper plots agrees with the fresh-time share.
        assert row.runs["GREEDY"].accuracy == pytest.approx(greedy, abs=0.01)
