"""ECHO_* settings: defaults, parsing, and NotConfigured messages naming setting, value, rule."""

from __future__ import annotations

import math
import re

import pytest
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from scrapy_echo.crawler.settings import DEFAULTS, EchoConfig, read_sources


def config(**values: object) -> EchoConfig:
    return EchoConfig.from_settings(Settings(values))


def test_defaults_are_the_papers() -> None:
    cfg = config()
    assert cfg.crawl_rate is None
    assert cfg.policy == "echo-newpages"
    assert (cfg.resolve_interval, cfg.click_push_period, cfg.click_bin) == (1800, 3600, 1200)
    assert cfg.history_size == 7
    assert cfg.sources == ()
    assert cfg.click_feed is None


def test_every_default_is_parsed() -> None:
    # A setting added to DEFAULTS but not to EchoConfig would silently be ignored.
    names = {name.removeprefix("ECHO_").lower() for name in DEFAULTS} - {"enabled"}
    # Two settings make one field: the page identity (parameters stripped, the user's rule).
    names = names - {"strip_params", "url_normalizer"} | {"identity"}
    # ECHO_SOURCES gives the URLs, and the file to watch when it names one.
    names |= {"sources_file"}
    assert names == set(EchoConfig.__dataclass_fields__)


def test_identity_settings() -> None:
    cfg = EchoConfig.from_settings(
        Settings(
            {
                "ECHO_STRIP_PARAMS": ["ref", "utm_*"],
                "ECHO_URL_NORMALIZER": "tests.test_settings.drop_amp",
                "ECHO_ALLOWED_HOSTS": "cdn.example.net, example.org",
            }
        )
    )
    assert cfg.identity.clean("https://a.test/x/amp?ref=1&id=2&fbclid=3") == (
        "https://a.test/x?fbclid=3&id=2"
    )
    assert cfg.allowed_hosts == ("cdn.example.net", "example.org")
    rule = cfg.site_rule
    assert rule is not None and rule.allows("a.test", "https://www.example.org/1")
    assert not rule.allows("a.test", "https://b.test/1")


def drop_amp(url: str) -> str:
    return url.replace("/amp?", "?")


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ECHO_URL_NORMALIZER", "nosuchmodule.fn", "cannot load"),
        ("ECHO_URL_NORMALIZER", "os.sep", "not callable"),
        ("ECHO_URL_NORMALIZER", "nodots", "dotted path"),
        ("ECHO_STRIP_PARAMS", [1, 2], "list of strings"),
        ("ECHO_ALLOWED_HOSTS", 5, "list of strings"),
    ],
)
def test_bad_identity_settings(name: str, value: object, message: str) -> None:
    with pytest.raises(NotConfigured, match=message):
        EchoConfig.from_settings(Settings({name: value}))


def test_disabled_is_bare_not_configured() -> None:
    with pytest.raises(NotConfigured) as caught:
        config(ECHO_ENABLED=False)
    assert caught.value.args == ()


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ECHO_CRAWL_RATE", "-1", "ECHO_CRAWL_RATE ('-1') must be a finite number > 0"),
        ("ECHO_CRAWL_RATE", "fast", "ECHO_CRAWL_RATE ('fast') must be a number > 0"),
        ("ECHO_CRAWL_RATE", "inf", "ECHO_CRAWL_RATE ('inf') must be a finite number > 0"),
        ("ECHO_RESOLVE_INTERVAL", 0, "ECHO_RESOLVE_INTERVAL (0) must be a finite number > 0"),
        ("ECHO_HISTORY_SIZE", 0, "ECHO_HISTORY_SIZE (0) must be an integer >= 1"),
        ("ECHO_HISTORY_SIZE", "7.5", "ECHO_HISTORY_SIZE ('7.5') must be an integer >= 1"),
        (
            "ECHO_POLICY",
            "fastest",
            "ECHO_POLICY ('fastest') must be one of: adaptive, bfs, echo-censored, echo-cycles",
        ),
        ("ECHO_PLAIN_SHARE", 1.5, "ECHO_PLAIN_SHARE (1.5) must be a finite number >= 0 and <= 1"),
        ("ECHO_PLAIN_QUEUE_MAX", 0, "ECHO_PLAIN_QUEUE_MAX (0) must be an integer >= 1"),
        ("ECHO_DUPEFILTER_TTL", -1, "ECHO_DUPEFILTER_TTL (-1) must be a finite number > 0"),
        (
            "ECHO_REDIS_DUPEFILTER_TTL",
            0,
            "ECHO_REDIS_DUPEFILTER_TTL (0) must be a finite number > 0",
        ),
        ("ECHO_CLICK_FEED", "clicks.txt", "ECHO_CLICK_FEED ('clicks.txt') must end in .jsonl"),
        ("ECHO_SAME_SITE", "maybe", "ECHO_SAME_SITE ('maybe') must be true or false"),
        ("ECHO_SEEN_TTL", -1, "ECHO_SEEN_TTL (-1) must be a finite number >= 0"),
        ("ECHO_DEFAULT_HALF_LIFE", 0, "ECHO_DEFAULT_HALF_LIFE (0) must be a finite number > 0"),
        ("ECHO_SITE_WEIGHTS", ["a.com"], "ECHO_SITE_WEIGHTS (['a.com']) must map host or site"),
        ("ECHO_SITE_WEIGHTS", {"a.com": -1}, "ECHO_SITE_WEIGHTS ({'a.com': -1}) must map host"),
        ("ECHO_SITE_WEIGHTS", {"a.com": "x"}, "ECHO_SITE_WEIGHTS ({'a.com': 'x'}) must map"),
        ("ECHO_SITE_WEIGHTS", {"a.com": True}, "ECHO_SITE_WEIGHTS ({'a.com': True}) must map"),
        ("ECHO_SITE_WEIGHTS", "{a.com", "ECHO_SITE_WEIGHTS ('{a.com') must be a dict or its JSON"),
        (
            "ECHO_SOURCES",
            ["ftp://x/"],
            "ECHO_SOURCES: source 'ftp://x/' must be an absolute http(s) URL",
        ),
    ],
)
def test_bad_values_name_setting_value_and_rule(name, value, message) -> None:
    with pytest.raises(NotConfigured, match="^" + re.escape(message)):
        config(**{name: value})


def test_sources_from_a_list_a_string_and_a_file(tmp_path) -> None:
    assert read_sources(["http://a/", "http://b/", "http://a/"]) == ("http://a/", "http://b/")
    assert read_sources("http://a/, http://b/") == ("http://a/", "http://b/")
    listing = tmp_path / "sources.txt"
    listing.write_text("# hubs\nhttp://a/\n\n  https://b/x  \n")
    assert read_sources(str(listing)) == ("http://a/", "https://b/x")


def test_a_bad_line_in_a_sources_file_is_named(tmp_path) -> None:
    listing = tmp_path / "sources.txt"
    listing.write_text("http://a/\nnot a url\n")
    with pytest.raises(NotConfigured, match=r"sources.txt, line 2: source 'not a url'"):
        read_sources(str(listing))


def test_a_missing_sources_file_is_named(tmp_path) -> None:
    with pytest.raises(NotConfigured, match="cannot be read"):
        read_sources(str(tmp_path / "nope.txt"))


def test_addon_enables_every_component_unless_disabled() -> None:
    from scrapy.utils.test import get_crawler

    crawler = get_crawler(settings_dict={"ADDONS": {"scrapy_echo.Addon": 0}})
    assert crawler.settings["SCHEDULER"] == "scrapy_echo.scheduler.EchoScheduler"
    names = [getattr(k, "__name__", k) for k in crawler.settings.getdict("SPIDER_MIDDLEWARES")]
    assert "EchoSpiderMiddleware" in names
    off = get_crawler(settings_dict={"ADDONS": {"scrapy_echo.Addon": 0}, "ECHO_ENABLED": False})
    assert off.settings["SCHEDULER"] == "scrapy.core.scheduler.Scheduler"
    assert not any("Echo" in str(k) for k in off.settings.getdict("SPIDER_MIDDLEWARES"))


def test_addon_obeys_robots_txt_unless_the_project_says_otherwise(caplog) -> None:
    from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
    from scrapy.settings import SETTINGS_PRIORITIES
    from scrapy.utils.test import get_crawler

    addon = {"ADDONS": {"scrapy_echo.Addon": 0}}
    with caplog.at_level("INFO", logger="scrapy_echo.crawler.addon"):
        crawler = get_crawler(settings_dict=addon)
    assert crawler.settings.getbool("ROBOTSTXT_OBEY") is True
    assert crawler.settings.getpriority("ROBOTSTXT_OBEY") == SETTINGS_PRIORITIES["addon"]
    RobotsTxtMiddleware.from_crawler(crawler)  # on (off, it raises NotConfigured)
    assert "ECHO crawl obeys robots.txt (the ECHO add-on's default" in caplog.text

    for said in (False, True):
        caplog.clear()
        with caplog.at_level("INFO", logger="scrapy_echo.crawler.addon"):
            crawler = get_crawler(settings_dict={**addon, "ROBOTSTXT_OBEY": said})
        assert crawler.settings.getbool("ROBOTSTXT_OBEY") is said
        way = "obeys" if said else "ignores"
        assert f"ECHO crawl {way} robots.txt (ROBOTSTXT_OBEY = {said} in" in caplog.text

    # ECHO off: the add-on changes nothing, Scrapy's own default stands.
    off = get_crawler(settings_dict={**addon, "ECHO_ENABLED": False})
    assert off.settings.getbool("ROBOTSTXT_OBEY") is False


def test_bounded_state_and_no_click_settings() -> None:
    assert config().seen_ttl == 30 * 86400.0
    assert config(ECHO_SEEN_TTL=0).seen_ttl == math.inf
    assert config(ECHO_DEFAULT_HALF_LIFE="3600").default_half_life == 3600.0
    assert config().site_weights == {}
    weights = config(ECHO_SITE_WEIGHTS='{"News.Example.": 3, "b.org": 0.5}').site_weights
    assert weights == {"news.example": 3.0, "b.org": 0.5}  # (from -s: JSON; names folded)
    assert config(ECHO_SITE_WEIGHTS={"a.com": 2}).site_weights == {"a.com": 2.0}


def test_one_dupefilter_time_to_live_for_both_modes_and_the_former_name_for_redis() -> None:
    week = 7 * 86400.0
    assert (config().dupefilter_ttl, config().redis_dupefilter_ttl) == (week, week)
    both = config(ECHO_DUPEFILTER_TTL="3600")
    assert (both.dupefilter_ttl, both.redis_dupefilter_ttl) == (3600.0, 3600.0)
    former = config(ECHO_DUPEFILTER_TTL=3600, ECHO_REDIS_DUPEFILTER_TTL=60)
    assert (former.dupefilter_ttl, former.redis_dupefilter_ttl) == (3600.0, 60.0)
    assert config().plain_queue_max == 100_000


def test_redis_attempts_and_meta_allowlist() -> None:
    assert (config().redis_max_attempts, config().redis_meta_allow) == (5, ())
    cfg = config(ECHO_REDIS_MAX_ATTEMPTS="3", ECHO_REDIS_META_ALLOW="proxy, my_tag")
    assert (cfg.redis_max_attempts, cfg.redis_meta_allow) == (3, ("proxy", "my_tag"))
    with pytest.raises(NotConfigured, match=r"ECHO_REDIS_MAX_ATTEMPTS \(0\) must be an integer"):
        config(ECHO_REDIS_MAX_ATTEMPTS=0)
    with pytest.raises(NotConfigured, match=r"ECHO_REDIS_META_ALLOW \(5\) must be a list"):
        config(ECHO_REDIS_META_ALLOW=5)
    cfg = config(ECHO_REDIS_META_ALLOW="playwright*", ECHO_REDIS_META_REFUSE="*")
    assert (cfg.redis_meta_allow, cfg.redis_meta_refuse) == (("playwright*",), ("*",))


def test_private_hosts_and_cross_site_sitemaps() -> None:
    cfg = config()
    assert (cfg.allowed_private_hosts, cfg.cross_site_sitemaps) == ((), False)
    cfg = config(
        ECHO_ALLOWED_PRIVATE_HOSTS="10.0.0.0/8, localhost, fd00::1", ECHO_CROSS_SITE_SITEMAPS="1"
    )
    assert cfg.allowed_private_hosts == ("10.0.0.0/8", "localhost", "fd00::1")
    assert cfg.cross_site_sitemaps
    # The metadata service is refused whatever the settings say: asking is a mistake.
    rule = r"ECHO_ALLOWED_PRIVATE_HOSTS \(\['169.254.169.254'\]\): .* is refused always"
    with pytest.raises(NotConfigured, match=rule):
        config(ECHO_ALLOWED_PRIVATE_HOSTS=["169.254.169.254"])
    with pytest.raises(NotConfigured, match="is not a network"):
        config(ECHO_ALLOWED_PRIVATE_HOSTS=["10.0.0.0/33"])
