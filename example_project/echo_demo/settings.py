"""Settings of the demo project: ECHO on through its add-on, every ECHO_* setting shown.

The demo site runs on a compressed clock (a second stands for about a minute), so the
re-solve, click and back-off periods are scaled down alike. For a real site keep the defaults
(commented after each line) or tune them to how fast its pages come and fade.
"""

BOT_NAME = "echo_demo"
SPIDER_MODULES = ["echo_demo.spiders"]

ADDONS = {"scrapy_echo.Addon": 0}
# The same without the add-on:
# SCHEDULER = "scrapy_echo.scheduler.EchoScheduler"
# DUPEFILTER_CLASS = "scrapy_echo.dupefilter.EchoDupeFilter"
# DOWNLOADER_MIDDLEWARES = {"scrapy_echo.downloadermw.EchoDownloaderMiddleware": 60}
# SPIDER_MIDDLEWARES = {
#     "scrapy_echo.spidermw.EchoSpiderMiddleware": 950,
#     "scrapy_echo.spidermw.EchoLinkCollector": 10,
# }
# EXTENSIONS = {"scrapy_echo.extension.EchoExtension": 500}

ECHO_ENABLED = True
ECHO_POLICY = "echo-newpages"  # or echo-schedule, echo-greedy, bfs, fixed-quota, frequency
ECHO_CRAWL_RATE = 3.0  # pages/s for sources and new pages together (default: measured)
ECHO_SOURCES = []  # URLs or a file of URLs; the demo spider lists its site's hubs itself
ECHO_CLICK_FEED = None  # the demo runner points this at the site's click log (.jsonl/.csv)
ECHO_RESOLVE_INTERVAL = 2.0  # default 1800 s
ECHO_CLICK_PUSH_PERIOD = 1.0  # default 3600 s
ECHO_CLICK_BIN = 1.0  # default 1200 s
ECHO_CLICK_BINS = 60  # default 72
ECHO_HISTORY_SIZE = 7  # default 7 (the paper's)
ECHO_DEFAULT_PROFIT = 1.0  # default 1.0
ECHO_CHECKPOINT_INTERVAL = 10.0  # default 60 s; only with JOBDIR
ECHO_PLAIN_SHARE = 0.5  # default 0.5
ECHO_PLAIN_QUEUE_MAX = 100_000  # default 100,000 of the spider's own requests waiting
ECHO_DUPEFILTER_TTL = 7 * 86400.0  # default 7 days; the spider's own requests, both modes
ECHO_FAILURE_BACKOFF = 2.0  # default 60 s
ECHO_FAILURE_BACKOFF_MAX = 30.0  # default 6 h
ECHO_SAME_SITE = True  # default True
ECHO_MAX_LINKS_PER_SOURCE = 2000  # default 2000
ECHO_DEBUG = False  # default False

# Distributed mode: set REDIS_URL and run `scrapy crawl news` on as many workers as you like
# (docs/distributed.rst). The demo runs on one machine, so these stay at their defaults.
# REDIS_URL = "redis://localhost:6379/0"
ECHO_REDIS_KEY_PREFIX = "echo"  # default "echo"
ECHO_REDIS_LEASE_TIMEOUT = 60.0  # default 60 s
ECHO_REDIS_SOLVER_LEASE = 15.0  # default 15 s
ECHO_REDIS_SNAPSHOT_INTERVAL = 10.0  # default 10 s
ECHO_REDIS_PREFETCH = 4  # default 4
ECHO_REDIS_QUEUE_AHEAD = 2.0  # default 2 s
# ECHO_REDIS_DUPEFILTER_TTL: ECHO_DUPEFILTER_TTL's former name, still read in distributed mode
ECHO_REDIS_POLL_INTERVAL = 0.1  # default 0.1 s

# Metrics for Prometheus (pip install 'scrapy-echo[metrics]'; docs/metrics.rst): a port
# serves them at http://127.0.0.1:<port>/metrics while the crawl runs.
ECHO_METRICS_PORT = None  # default None: no endpoint; 0: any free port (logged)
ECHO_METRICS_ADDRESS = "127.0.0.1"  # default; "0.0.0.0" to be scraped from elsewhere
ECHO_METRICS_SOURCES = 20  # default 20 sources labelled by value; the rest summed
# Scrapy's project template sets this too (the ECHO add-on would turn it on anyway): here it
# holds for the baseline spider as well, which runs without the add-on, so both crawlers ask
# the embedded site for its robots.txt alike (it has none: a 404, which allows everything).
ROBOTSTXT_OBEY = True
CONCURRENT_REQUESTS = 8
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
