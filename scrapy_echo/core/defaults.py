"""Every ``ECHO_*`` setting's default, in one place: the crawl's settings
(:mod:`scrapy_echo.crawler.settings` parses and checks them) and the simulator's
(:class:`~scrapy_echo.sim.engine.SimSettings`) both start from these. Plain data, so that
the core and the simulator need no Scrapy to read them."""

from __future__ import annotations

from typing import Any

from scrapy_echo.core.identity import DEFAULT_STRIP_PARAMS
from scrapy_echo.model.refetch.refresh import LONGEST_REFRESH, SHORTEST_REFRESH, VERY_STALE_BOUND

DEFAULTS: dict[str, Any] = {
    "ECHO_ENABLED": True,
    "ECHO_CRAWL_RATE": None,  # pages/s; None: the measured throughput
    "ECHO_POLICY": "echo-newpages",
    "ECHO_SOURCES": [],  # URLs, or a path to a file of URLs (one per line, # comments)
    "ECHO_CLICK_FEED": None,  # path to a JSON Lines or CSV click feed
    "ECHO_SIGNAL_FEED": None,  # path to a JSON Lines or CSV feed of change signals
    "ECHO_SIGNAL_POLL_INTERVAL": 5.0,  # s between reads of the signal feed (and Redis stream)
    "ECHO_RESOLVE_INTERVAL": 1800.0,  # s between re-solves of the intervals
    "ECHO_CLICK_PUSH_PERIOD": 3600.0,  # s between reads of the click feed
    "ECHO_CLICK_BIN": 1200.0,  # s per age bin of the click-decay fit
    "ECHO_CLICK_BINS": 72,  # age bins fitted
    "ECHO_HISTORY_SIZE": 7,  # crawls of a source behind its new-link rate
    "ECHO_DEFAULT_PROFIT": 1.0,  # expected clicks of a page from a source without click data
    "ECHO_DEFAULT_HALF_LIFE": 6 * 3600.0,  # s a page's value halves in, without click data
    "ECHO_SITE_WEIGHTS": {},  # site or host -> weight of its pages' value (1 if not named)
    "ECHO_SITE_SCORES": None,  # echo-rank-sites' CSV: each site's score scales its cold start
    "ECHO_CHECKPOINT_INTERVAL": 60.0,  # s between JOBDIR checkpoints
    "ECHO_JOURNAL_INTERVAL": 0.5,  # s between syncs of the JOBDIR journal (0: no journal)
    "ECHO_PLAIN_SHARE": 0.5,  # share of slots for the spider's own requests while ECHO has work
    "ECHO_PLAIN_QUEUE_MAX": 100_000,  # spider's own requests waiting; more are refused
    "ECHO_DUPEFILTER_TTL": 7 * 86400.0,  # s a request the spider yielded is remembered (dupefilter)
    "ECHO_REFRESH_SHARE": 0.05,  # most of the budget spent refetching pages that may have changed
    "ECHO_REFRESH_STALE_COST": 1.0,  # what a click on a stale copy loses (1: the whole click)
    "ECHO_REFRESH_PRIOR_PERIOD": 207_000.0,  # s between a page's changes before any refetch
    "ECHO_REFRESH_SHORTEST": SHORTEST_REFRESH,  # s between two fetches of a page, at least
    "ECHO_REFRESH_LONGEST": LONGEST_REFRESH,  # s between refetches of a page worth one, at most
    "ECHO_REFRESH_VERY_STALE": VERY_STALE_BOUND,  # share of refetches expected very stale, at most
    "ECHO_FAILURE_BACKOFF": 60.0,  # s a failing source waits, doubled per failure in a row
    "ECHO_FAILURE_BACKOFF_MAX": 6 * 3600.0,
    "ECHO_SOURCE_MAX_FAILURES": 10,  # failures in a row that retire a source
    "ECHO_PAGE_MAX_TRIES": 3,  # failed fetches of a new page before it is given up
    "ECHO_BACKLOG": "crawl",  # "crawl" or "skip": what a source lists at its first crawl
    "ECHO_MIN_INTERVAL": 0.0,  # s: no source is planned more often (echo-newpages)
    "ECHO_MAX_INTERVAL": None,  # s: every source is crawled at least this often (None: no bound)
    "ECHO_SEEN_TTL": 30 * 86400.0,  # s a link or fetched page is remembered unseen (0: ever)
    "ECHO_POLITENESS": True,  # hand the engine only requests whose download slot is free
    "ECHO_MAX_CRAWL_DELAY": 60.0,  # s: robots.txt's Crawl-delay is honoured up to this
    "ECHO_SAME_SITE": True,  # a source yields links of its own site (and ECHO_ALLOWED_HOSTS)
    "ECHO_ALLOWED_HOSTS": [],  # further hosts (or registered domains) any source may link to
    # Loopback and private addresses (or networks, or names such as localhost) that links,
    # sitemaps, redirects and requests from Redis may name; the sources' own hosts need not be
    # listed. Link-local and cloud metadata addresses are refused whatever this says.
    "ECHO_ALLOWED_PRIVATE_HOSTS": [],
    "ECHO_CROSS_SITE_SITEMAPS": False,  # robots.txt and sitemap indexes may add other sites' too
    "ECHO_STRIP_PARAMS": list(DEFAULT_STRIP_PARAMS),  # query parameters that name no page
    "ECHO_URL_NORMALIZER": None,  # dotted path to a function url -> url, the user's rule
    "ECHO_MAX_LINKS_PER_SOURCE": 2000,  # links read from one source response
    # Further sources (sitemaps) one response (a sitemap index, a robots.txt) may add.
    "ECHO_MAX_SOURCES_PER_SOURCE": 2000,
    # Levels of sources adding sources below one the operator gave (0): a sitemap index
    # listing indexes listing indexes adds nothing past this level.
    "ECHO_MAX_SOURCE_DEPTH": 3,
    # Sources the crawl may find (listed by a sitemap index or a robots.txt), per site and in
    # all: past them a site's sitemap tree adds no more (those given by the operator count
    # toward neither, and are never refused).
    "ECHO_MAX_SOURCES_PER_SITE": 10_000,
    "ECHO_MAX_FOUND_SOURCES": 1_000_000,
    "ECHO_MAX_NEXT_PAGES": 5,
    # Bytes of one source response read, its gzip body unpacked included: the sitemap
    # protocol's own cap is 50 MB; a larger one is a failed crawl, never parsed.
    "ECHO_MAX_SOURCE_BYTES": 50 * 1024 * 1024,
    "ECHO_PAGE_CALLBACK": "parse",  # spider method new pages go to (its echo_page_callback wins)
    "ECHO_DEBUG": False,  # log every decision and every new page
    "ECHO_LOG_INTERVAL": 60.0,  # s between ECHO's status lines (and stats)
    # Distributed mode (on when REDIS_URL is set; see docs/distributed.rst)
    "ECHO_REDIS_KEY_PREFIX": "echo",  # keys are {<prefix>:<spider name>}:<name>
    "ECHO_REDIS_LEASE_TIMEOUT": 60.0,  # s a leased request is held without renewal
    "ECHO_REDIS_SOLVER_LEASE": 15.0,  # s the planner's lease lasts without renewal
    "ECHO_REDIS_SNAPSHOT_INTERVAL": 10.0,  # s between saves of the planner's state
    "ECHO_REDIS_PREFETCH": 4,  # requests a worker holds ready for its engine
    "ECHO_REDIS_QUEUE_AHEAD": 2.0,  # s of budget the planner keeps queued
    # s a done page or request is remembered in Redis; None: ECHO_DUPEFILTER_TTL (this is its
    # former name, still read in distributed mode)
    "ECHO_REDIS_DUPEFILTER_TTL": None,
    "ECHO_REDIS_POLL_INTERVAL": 0.1,  # s between a worker's round trips to Redis
    "ECHO_REDIS_MAX_ATTEMPTS": 5,  # leases of a request before it is set aside as dead
    # Meta keys (or key* patterns) a request from Redis may carry though refused otherwise:
    # Scrapy's keys that steer a request, ECHO's own, those of plugins that fetch another way.
    "ECHO_REDIS_META_ALLOW": [],
    "ECHO_REDIS_META_REFUSE": [],  # further keys (or patterns) refused; ["*"]: known keys only
    # Metrics for Prometheus (docs/metrics.rst; needs scrapy-echo[metrics])
    "ECHO_METRICS_PORT": None,  # port of the /metrics endpoint; None: none served
    "ECHO_METRICS_ADDRESS": "127.0.0.1",  # address it listens on ("0.0.0.0": every one)
    "ECHO_METRICS_SOURCES": 20,  # sources with labels of their own, by value; the rest summed
}
