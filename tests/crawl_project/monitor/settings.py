"""The test project's settings: ECHO on through the add-on; tests add the rest with -s."""

BOT_NAME = "monitor"
SPIDER_MODULES = ["monitor.spiders"]
ADDONS = {"scrapy_echo.Addon": 0}
# Off here, though the add-on would turn it on: some tests count every request the local site
# sees (a robots.txt fetch would be one more); test_politeness turns it on with -s.
ROBOTSTXT_OBEY = False
TELNETCONSOLE_ENABLED = False
LOG_LEVEL = "INFO"
CONCURRENT_REQUESTS = 8
RETRY_ENABLED = False
