"""ECHO-newpages with some of its additions past the paper switched off: what
``python -m scrapy_echo.sim ablate`` measures each of them by.

Each addition is one class flag of :class:`EchoNewPages` (docs/how-it-works.rst, the section
each names). ``echo-newpages-without-<flag>`` switches one off,
``echo-newpages-without-<flag>+<flag>`` several, ``echo-newpages-without-all`` every one
(what is left past the paper is what has no flag: the host limits' bookkeeping and the
signals, which act only when a crawl has them).
"""

from __future__ import annotations

from scrapy_echo.model.decisions.echo_newpages import EchoNewPages

# The flags, in the order the ablation table lists them.
ADDITIONS = (
    "learned_priors",  # λ and P shrunk toward priors learned from all sources, P optimistic
    "pools_sites",  # a source's long-run λ borrows from its site's sources
    "censoring_aware",  # λ counts an overflowed hub's crawl for what it is
    "plans_full_hubs",  # a hub seen full is planned as one showing its latest K links
    "uses_overlaps",  # of two overlapping sources, the lesser's shared rate credited
    "uses_limits",  # the plan honours per-host capacity and interval bounds
    "refreshes",  # fetched pages that may have changed are fetched again
)
PREFIX = "echo-newpages-without-"


def without(names: str) -> type[EchoNewPages]:
    """ECHO-newpages without the additions ``names`` names (``a+b``, or ``all``);
    ``ValueError`` naming the known ones for any other."""
    flags = ADDITIONS if names == "all" else tuple(names.split("+"))
    unknown = [flag for flag in flags if flag not in ADDITIONS]
    if unknown or not flags:
        raise ValueError(
            f"unknown addition {unknown[0] if unknown else names!r}; known: "
            f"{', '.join(ADDITIONS)} (or all)"
        )
    attributes: dict[str, object] = dict.fromkeys(flags, False)
    attributes["name"] = PREFIX + names
    return type(f"EchoNewPagesWithout_{'_'.join(flags)}", (EchoNewPages,), attributes)


__all__ = ["ADDITIONS", "PREFIX", "without"]
