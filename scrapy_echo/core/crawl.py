"""The crawl's one writer: typed observations in, decisions and plans out, no I/O.

:class:`CrawlCore` owns the crawl state (:class:`~scrapy_echo.core.state.CrawlState`: sources,
crawl times, seen links, the learner, the frontier) and the policy. Three drivers move it, and
only their fetcher and clock differ:

- the Scrapy glue (scheduler, middlewares, extension), with the reactor's clock;
- the Redis planner, with the events of every worker;
- the simulator, with a trace as the web and a simulated clock.

So a simulator score measures exactly the bookkeeping a live crawl runs
(docs/architecture.rst).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence

import numpy as np
from numpy.typing import NDArray

from scrapy_echo.core.events import (
    ClicksArrived,
    Event,
    PageFailed,
    PageFetched,
    SignalsArrived,
    SourceAdded,
    SourceBlocked,
    SourceFailed,
    SourceFetched,
    SourceNotModified,
    SourceRemoved,
)
from scrapy_echo.core.hosts import SourceHosts
from scrapy_echo.core.hub_paging import HubPaging
from scrapy_echo.core.identity import fold_scheme, site_of
from scrapy_echo.core.pages import Dispatch, NewPage
from scrapy_echo.core.seen import Housekeeping, run_inline
from scrapy_echo.core.source_crawls import route_signal, source_continued, source_fetched
from scrapy_echo.core.source_status import SourceStatus
from scrapy_echo.core.state import CrawlState, fingerprint
from scrapy_echo.core.state_config import StateConfig
from scrapy_echo.core.valuation import valued
from scrapy_echo.core.view import CrawlView
from scrapy_echo.model.decisions.frontier import WaitingPage
from scrapy_echo.model.decisions.policies import Decision, Policy, SolveJob, then
from scrapy_echo.model.estimation.cycles import fitted_rate_factor
from scrapy_echo.model.intervals.curves import FloatArray
from scrapy_echo.model.intervals.limits import ScheduleLimits
from scrapy_echo.model.intervals.plan import Plan

logger = logging.getLogger(__name__)

# Choices a driver may get for busy hosts in one call before it leaves the slot idle (each is
# put back and its source set aside for the rest of the call): the live scheduler's and the
# replay's alike, so that both choose the same.
BUSY_TRIES = 16


class CrawlCore:
    """The crawl state and policy, changed only through :meth:`apply` and friends."""

    def __init__(
        self, config: StateConfig, policy: Policy, *, state: CrawlState | None = None
    ) -> None:
        self.config = config
        self.policy = policy
        self.state = CrawlState(config) if state is None else state
        self.solves = 0
        self.hosts = SourceHosts()
        self.duplicates_skipped = 0  # waiting pages found fetched under another URL
        # Found sources not added past ECHO_MAX_SOURCES_PER_SITE / ECHO_MAX_FOUND_SOURCES,
        # the sites logged, and the found sources per site (counted on first need).
        self.sources_capped = 0
        self._capped_sites: set[str] = set()
        self._found_per_site: Counter[str] | None = None
        self._replayed_pages = 0  # pages fetched in a replay not yet ended (see replayed)
        # Per source, when the crawl before its last one was: the window of the pages its
        # hub's next pages list (not saved: a resumed crawl takes the last crawl's time).
        self._crawl_started: dict[int, float] = {}
        # Which hub crawls read on past their first page (the live spider middleware and the
        # replay ask it alike; not saved: a crawl under way is not resumed past its page).
        self.paging = HubPaging()
        # Runs the state's upkeep at each re-plan: inline here (the simulator); a live crawl
        # puts the O(n) part on a thread so the reactor never waits for it.
        self.run_housekeeping: Callable[[Housekeeping], None] = run_inline

    def reset(
        self,
        state: CrawlView | None,
        policy: Policy | None = None,
        hosts: SourceHosts | None = None,
    ) -> None:
        """Start over from ``state`` (one :func:`scrapy_echo.core.snapshot.restore` built;
        ``None``: empty), with ``policy`` if given (a planner taking over wants one with no
        plan of another state), as a resumed crawl or a planner taking over or stepping down
        does; ``hosts``, if given, holds ``state``'s sources' hosts already (looked up off
        the reactor: a second for 100 k sources)."""
        if state is not None and not isinstance(state, CrawlState):
            raise TypeError(f"not a restored crawl state: {type(state).__name__}")
        self.state = CrawlState(self.config) if state is None else state
        self._found_per_site = None  # (of this state: counted anew)
        self.hosts = hosts if hosts is not None else SourceHosts()  # (numbered per state)
        self._crawl_started = {}
        self.paging = HubPaging()
        if policy is not None:
            self.policy = policy
        self.policy.crawl_times_changed()  # its caches knew other crawl times

    # -- observations ----------------------------------------------------------------------
    def apply(self, event: Event) -> list[NewPage]:
        """Change the state by one observation; the new pages a source crawl revealed."""
        state = self.state
        if isinstance(event, SourceFetched) and event.continued:
            source = state.add_source(event.url)
            return source_continued(state, source, event, crawl_started=self._crawl_started)
        if isinstance(event, SourceFetched):  # the commonest, first
            source = state.add_source(event.url)
            first = state.sources[source].crawls == 0
            pages = source_fetched(
                state, source, event, backlog=self.config.backlog, crawl_started=self._crawl_started
            )
            self.policy.source_crawled(source, len(pages), first)
            if pages:
                self.policy.links_found(source, [p.appeared for p in pages], pages[0].discovered)
            return pages
        if isinstance(event, (ClicksArrived, SignalsArrived)):
            raise TypeError("feed rows are checked by the receiver, then given to the core")
        if isinstance(event, SourceAdded):
            known = self.status_of(event.url) is not None
            if event.depth and not known and self._over_found_limits(event.url):
                return []
            source = state.add_listed_source(event.url, event.depth)
            if not (event.configured and known):
                self._revive(source, event.url)
            return []
        if isinstance(event, PageFailed):
            self._page_failed(event)
            return []
        if isinstance(event, PageFetched):
            source = state.add_source(event.source)
            if not event.refresh:
                state.page_crawled(event.url, source, event.appeared, event.t, event.aliases)
            if self.refreshing:
                state.refresh.fetched(
                    state.page_key(event.url),
                    url=event.url,
                    group=self.hosts.indices(state.sources)[source],
                    source=source,
                    appeared=event.appeared,
                    t=event.t,
                    digest=event.digest,
                )
            return []
        source = state.add_source(event.url)
        if isinstance(event, SourceNotModified):
            state.source_not_modified(source, event.t)
            self.policy.source_crawled(source, 0, False)
        elif isinstance(event, SourceFailed):
            backoff = state.source_failed(
                source, event.t, interval=self._interval(source), retry_after=event.retry_after
            )
            failures = state.sources[source].failures
            if math.isinf(backoff):
                logger.warning(
                    "ECHO source %s retired after %d failures in a row (last: %s); add it "
                    "again to bring it back",
                    event.url,
                    failures,
                    event.why,
                )
            else:
                logger.info(
                    "ECHO source %s failed (%s, %d in a row); next try in %.0f s",
                    event.url,
                    event.why,
                    failures,
                    backoff,
                )
        elif isinstance(event, SourceRemoved):
            if state.remove(source):
                logger.info("ECHO source %s removed: no longer crawled", event.url)
        elif isinstance(event, SourceBlocked):
            # robots.txt changes rarely; ask again as a source backing off to the full would.
            state.source_blocked(source, event.t, self.config.failure_backoff_max)
        else:
            raise TypeError(f"not an event: {event!r:.80}")
        return []

    def _interval(self, source: int) -> float:
        """The plan's recrawl interval of ``source`` (``inf``: not planned, or not kept)."""
        intervals = self.policy.plan.intervals
        return float(intervals[source]) if source < intervals.size else math.inf

    def replay(self, event: Event) -> None:
        """Apply ``event`` again after a restart, from the journal of what the crawl observed
        since its last checkpoint (:mod:`scrapy_echo.crawler.journal`): as :meth:`apply`, the
        new pages queued as the crawl queued them. Dispatches are not journaled, so a source
        crawl counts as dispatched when it was fetched: a source crawled just before the crash
        is not due again at once. Call :meth:`replayed` after the last event."""
        for page in self.apply(event):
            self.queue(page)
        if isinstance(event, PageFetched):
            self._replayed_pages += not event.refresh
        elif isinstance(event, (SourceFetched, SourceNotModified)):
            source = self.state.add_source(event.url)
            last = float(self.state.last_crawl[source])
            # (A later time stands: a back-off or a retirement, set by an event after.)
            if math.isnan(last) or last < event.t:
                self.state.source_dispatched(source, event.t)

    def replayed(self) -> int:
        """End a :meth:`replay`: the waiting pages fetched since they were queued leave the
        frontier (a checkpoint saved them waiting, or a replayed source crawl queued them
        again, and the journal says they were fetched after), and the policy forgets the
        crawl times it cached. Returns how many pages left."""
        self.policy.crawl_times_changed()
        if not self._replayed_pages:
            return 0
        self._replayed_pages = 0
        state, frontier = self.state, self.state.frontier
        by_source: dict[int, list[WaitingPage]] = {}
        for waiting in frontier.pages():
            by_source.setdefault(waiting.source, []).append(waiting)
        gone = 0
        for source, pages in by_source.items():
            left = [w for w in pages if not state.already_fetched(getattr(w.page, "url", ""))]
            if len(left) == len(pages):
                continue
            gone += len(pages) - len(left)
            frontier.drop(source)
            for w in left:  # (in the order they leave: ties stay first in, first out)
                frontier.push(source, w.page, appeared=w.appeared, discovered=w.discovered)
        return gone

    def add_sources(self, urls: Sequence[str]) -> list[int]:
        """:class:`SourceAdded` for each of ``urls`` at once (the per-source tables grow once:
        the starting sources, a batch pushed to Redis); their ids. A retired or removed one
        comes back."""
        ids = self.state.add_sources(urls)
        for source, url in zip(ids, urls, strict=True):
            if self.state.sources[source].depth:  # found by listing first, given now
                self.state.add_listed_source(url, 0)
            self._revive(source, url)
        return ids

    def configure_sources(self, urls: Sequence[str]) -> tuple[list[str], list[str]]:
        """The sources the crawl starts with (``ECHO_SOURCES``, the sources file, the spider's
        own), against those it started with last time (saved with the state): one new there
        is added, and comes back if it was retired or removed (given again); one gone from
        them since is removed; one in both is added if the state lacks it, never revived (a
        restart must not undo what the crawl retired, nor what an operator removed while it
        ran). Returns those added and removed. With no list saved (a fresh state, or one saved
        before lists were), each is added as given, none revived."""
        state = self.state
        before = state.configured_sources
        key = self.config.identity.key
        given = {key(url): url for url in urls}
        previous = {key(url): url for url in before} if before is not None else given
        added = [url for k, url in given.items() if k not in previous]
        removed = [url for k, url in previous.items() if k not in given]
        for source, url in zip(
            state.add_sources(list(given.values())), given.values(), strict=True
        ):
            if state.sources[source].depth:  # found by listing first, given now
                state.add_listed_source(url, 0)
        for url in added:
            self._revive(state.add_source(url), url)
        for url in removed:
            self.apply(SourceRemoved(url))
        state.configured_sources = list(given.values())
        return added, removed

    def _over_found_limits(self, url: str) -> bool:
        """Whether a source found by listing (a sitemap index's, a robots.txt's) would take
        its site past ``ECHO_MAX_SOURCES_PER_SITE`` found sources, or the crawl past
        ``ECHO_MAX_FOUND_SOURCES``: then it is not added (counted in :attr:`sources_capped`;
        the first per site logged). A site's sitemap tree could otherwise add millions, each
        with state and a crawl of its own."""
        counts = self._found_per_site
        if counts is None:  # (counted once per state, then kept up as sources are found)
            counts = Counter(site_of(s.url) for s in self.state.sources if s.depth)
            self._found_per_site = counts
        site = site_of(url)
        config = self.config
        total = sum(counts.values())
        if counts[site] < config.max_sources_per_site and total < config.max_found_sources:
            counts[site] += 1
            return False
        self.sources_capped += 1
        if site not in self._capped_sites:
            self._capped_sites.add(site)
            logger.warning(
                "ECHO found source %s not added: %s has %d found sources (at most %d, "
                "ECHO_MAX_SOURCES_PER_SITE), the crawl %d (ECHO_MAX_FOUND_SOURCES %d); more "
                "are only counted (echo/sources/capped)",
                url, site, counts[site], config.max_sources_per_site, total,
                config.max_found_sources,
            )  # fmt: skip
        return True

    def _revive(self, source: int, url: str) -> None:
        if self.state.revive(source):
            self.policy.crawl_times_changed()  # due again: a crawl time went back
            logger.info("ECHO source %s added again: crawled again", url)

    def status_of(self, url: str) -> SourceStatus | None:
        """The status of source ``url`` (as given, or any URL with its key), if it is one."""
        state = self.state
        try:
            source = state.source_ids.get(self.config.identity.key(url))
        except ValueError:
            return None
        return None if source is None else state.sources[source]

    @property
    def refreshing(self) -> bool:
        """Whether the refresh lane runs: the policy refreshes and the lane has a share."""
        return self.policy.refreshes and self.state.refresh.enabled

    def next_refresh(self, now: float) -> str | None:
        """A fetched page (its key, a clean URL) to fetch again now, if one is due and the
        lane is within its share of the slots this is asked at; None otherwise. Ask at every
        slot (:meth:`choose` or not): the share counts the asks."""
        if not self.refreshing:
            return None
        page = self.state.refresh.take_slot(now)
        return None if page is None else str(page)

    def refresh_put_back(self, page: str, when: float) -> None:
        """A page :meth:`next_refresh` gave could not leave now: due again at ``when``."""
        self.state.refresh.give_back_slot(page, when)

    def stop_refreshing(self, pages: Sequence[Hashable]) -> None:
        """Take ``pages`` (keys) out of the refresh lane: never fetched again."""
        self.state.refresh.drop(pages)

    def signal(self, url: str, t: float) -> str:
        """A change-indicating signal naming ``url`` at ``t`` (docs/how-it-works.rst,
        "Change-indicating signals"): a source, or a page found on one (its source is
        signalled). What became of it: ``"source"``, ``"page"``, ``"stale"`` (from before
        the source's last crawl, which saw that change already: Busa-Fekete et al.'s guard against
        late signals), ``"inactive"`` (a retired or removed source) or ``"unmatched"``."""
        return route_signal(self.state, self.config.identity, url, t)

    def add_clicks(
        self,
        pages: Sequence[str],
        ts: Sequence[float],
        counts: Sequence[float],
        *,
        count_matched: bool = True,
    ) -> int:
        """Checked click rows (the page's clean URL, when, how many); returns how many name a
        fetched page, under its own URL or an alias (the rest wait for their page), or 0
        without ``count_matched`` (a replay, whose rows name fetched pages by design, skips
        hashing a million rows)."""
        state = self.state
        keys = [fold_scheme(url) for url in pages]
        if state.aliases:
            keys = [state.aliases.get(key, key) for key in keys]
        matched = sum(fingerprint(key) in state.fetched for key in keys) if count_matched else 0
        state.learner.add_clicks(keys, ts, counts)
        return matched

    def site_weights(self) -> FloatArray | None:
        """Per source, the weight ``ECHO_SITE_WEIGHTS`` gives its host, else its site, else 1;
        ``None`` when no weight is set (docs/how-it-works.rst, "Without a click feed")."""
        return self.hosts.weights(self.state.sources, self.config.site_weights)

    def site_scores(self) -> FloatArray | None:
        """Per source, its site's score from ``ECHO_SITE_SCORES`` over their mean (1 for a
        site not listed); ``None`` when there are none (docs/how-it-works.rst, "Ranking sites
        by how temporal they are")."""
        return self.hosts.scores(self.state.sources, self.config.site_scores)

    def limits(self, capacity: Callable[[str], float] | None = None) -> ScheduleLimits:
        """The plan's limits past the budget: each source's host and that host's
        ``capacity``, and the configured interval bounds."""
        return self.hosts.limits(
            self.state.sources, capacity, self.config.min_interval, self.config.max_interval
        )

    def next_page_boundary(
        self, source: int, page: int, urls: Sequence[str], known: Sequence[bool]
    ) -> int | None:
        """:meth:`.HubPaging.boundary` on this crawl's state."""
        return self.paging.boundary(self.state, source, page, urls, known)

    def reads_on(
        self,
        source: int,
        page: int,
        urls: Sequence[str],
        known: Sequence[bool],
        boundary: int | None,
        *,
        most: int,
    ) -> str:
        """:meth:`.HubPaging.reads_on` on this crawl's state: ``"next"``, ``"stop"`` or
        ``"cut"``."""
        return self.paging.reads_on(self.state, source, page, urls, known, boundary, most=most)

    # -- decisions ---------------------------------------------------------------------------
    def queue(self, page: NewPage) -> None:
        """Put a new page in the frontier (each driver builds its request when it leaves)."""
        self.state.frontier.push(
            page.source, page, appeared=page.appeared, discovered=page.discovered
        )

    def choose(self, now: float, blocked: NDArray[np.bool_] | None = None) -> Decision | None:
        """What the policy fetches next, not yet taken (:meth:`dispatch` takes it): a source,
        or a source's newest waiting page. Sources ``blocked`` (their host is busy) are left
        out: their pages are hidden and they look just crawled."""
        policy, frontier, last = self.policy, self.state.frontier, self.state.last_crawl
        if blocked is None or not blocked.any():
            return policy.choose(now, last, frontier)
        masked = last.copy()
        masked[np.flatnonzero(blocked[: last.size])] = now
        frontier.hide(blocked)
        try:
            return policy.choose(now, masked, frontier)
        finally:
            frontier.hide(None)
            policy.crawl_times_changed()  # its caches saw the masked crawl times

    def dispatch(self, now: float, blocked: NDArray[np.bool_] | None = None) -> Dispatch | None:
        """The next crawl, taken: a source (its crawl time is now, so it is not chosen again
        while under way) or its newest waiting page (off the frontier); ``None`` to leave the
        slot idle. A page fetched meanwhile under another URL (a redirect's target, its
        canonical link) is one page, fetched once: it is skipped. ``blocked`` as for
        :meth:`choose`; a dispatch that cannot leave after all goes back by :meth:`put_back`."""
        state = self.state
        self._pages_due_again(now)
        while True:
            decision = self.choose(now, blocked)
            if decision is None:
                return None
            source = decision.source
            if decision.kind == "page":
                waiting = state.frontier.pop(source)
                url = getattr(waiting.page, "url", None)
                if url is not None and state.already_fetched(url):
                    self.duplicates_skipped += 1
                    continue
                return Dispatch("page", source, waiting)
            previous = float(state.last_crawl[source])
            state.source_dispatched(source, now)
            return Dispatch("source", source, previous=previous)

    def _page_failed(self, event: PageFailed) -> None:
        """A new page's fetch failed: it waits for its back-off, then for its turn in the
        frontier again (:mod:`.page_retries`), unless its source is gone or it was tried
        enough; or it was fetched meanwhile under another URL."""
        state = self.state
        source = state.source_ids.get(self.config.identity.key(event.source))
        if source is None or state.already_fetched(event.url):
            return
        page = NewPage(
            event.url, source, event.source, event.appeared, event.window, event.discovered,
            event.extras,
        )  # fmt: skip
        status, next_try = state.sources[source], float(state.last_crawl[source])
        if status.retired or status.removed:
            state.page_retries.give_up(page)
            return
        # A source backing off after failures has its next try ahead: its site is down or
        # refusing, and its pages wait for it rather than spend the budget meanwhile.
        not_before = next_try if status.failures and next_try > event.t else None
        state.page_retries.failed(page, event.t, event.retry_after, not_before=not_before)

    def _pages_due_again(self, now: float) -> None:
        """The failed pages whose back-off ended: back in their sources' frontier."""
        state = self.state
        if not len(state.page_retries):
            return
        for page in state.page_retries.due(now):
            status = state.sources[page.source] if page.source < len(state.sources) else None
            if status is None or status.retired or status.removed:
                state.page_retries.give_up(page)  # (its source went while it waited)
            else:
                self.queue(page)

    def put_back(self, dispatched: Dispatch) -> None:
        """Undo :meth:`dispatch`: the page waits again, the source is as due as it was."""
        source, page = dispatched.source, dispatched.page
        if page is not None:
            self.state.frontier.push(
                source, page.page, appeared=page.appeared, discovered=page.discovered
            )
            return
        self.state.source_dispatched(source, dispatched.previous)
        self.policy.crawl_times_changed()  # a crawl time went back

    def refit_work(self, now: float) -> Callable[[], Callable[[], None]] | None:
        """The slow part of a re-solve at ``now`` that may be done apart first: the click
        fit, when one is due (``None`` when not). The function returned runs on any thread and
        returns the one that installs its result, to call on the core's own; the re-solve
        after that finds the fit done (seconds at 100 k sources: docs/monitor.rst)."""
        learner = self.state.learner
        if not learner.click_refit_due(now):
            return None
        fit = learner.click_refit(now)

        def work() -> Callable[[], None]:
            refit = fit()
            return lambda: learner.install_click_refit(refit)

        return work

    def replan(
        self, now: float, budget: float, capacity: Callable[[str], float] | None = None
    ) -> Plan:
        """Fresh estimates and a fresh schedule under ``budget`` (pages/s), and under
        ``capacity(host)`` requests/s per host if given; a history sample."""
        return self.replan_job(now, budget, capacity)()()

    def replan_job(
        self, now: float, budget: float, capacity: Callable[[str], float] | None = None
    ) -> SolveJob:
        """:meth:`replan` in the parts of :meth:`Policy.solve_job`: the estimates are taken
        now, the solve may run on any thread, the install (the plan, the refresh lane's share,
        the history sample) runs on the core's. The plan in force until then is the last."""
        self.policy.limits = self.limits(capacity)
        self.policy.signals = self.state.signals
        for job in self.state.housekeeping(now):
            self.run_housekeeping(job)
        policy = self.policy
        estimates = self.state.learner.estimates(
            now,
            learned_priors=policy.learned_priors,
            earned=policy.earns_estimators,
            censoring=policy.censoring_aware,
            floors=policy.counts_floors,
            sites=self.hosts.sites(self.state.sources) if policy.pools_sites else None,
        )
        scores = self.site_scores()
        estimates = valued(
            estimates,
            scores=scores,
            clicked=None if scores is None else self.state.learner.clicked_sources(),
            weights=self.site_weights(),
            off=self.state.off_schedule(),
        )
        self.state.profile.enabled = self.policy.uses_cycles
        if self.policy.uses_cycles:
            # (each source's λ over its window to its weekly average: "Daily and weekly cycles")
            crawls = self.state.learner.crawls
            self.policy.rate_factor = fitted_rate_factor(
                self.state.profile, now, *crawls.long_run(), *crawls.window_bounds()
            )
            self.policy.profile = self.state.profile
        if self.policy.uses_overlaps:
            value = estimates.link_rate * estimates.profit
            self.policy.overlaps = self.state.overlap.pairs(value)
        if self.refreshing:  # the plan spends what refetches leave
            budget *= 1.0 - self.state.refresh.slots_spent()

        def installed(plan: Plan) -> Plan:
            if self.refreshing:
                est = plan.estimates
                self.state.refresh.plan(
                    now, omega=plan.omega, budget=budget, profit=est.profit, decay=est.decay
                )
            self.solves += 1
            self.state.record(
                now,
                budget=budget,
                omega=plan.omega,
                kept=int(plan.kept.sum()),
                dropped=int(getattr(self.policy, "dropped_pages", 0)),
            )
            return plan

        return then(self.policy.solve_job(estimates, budget), installed)
