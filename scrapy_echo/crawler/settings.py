"""Every ``ECHO_*`` setting, its default, and the one place they are parsed and checked.

Components never read ``ECHO_*`` settings themselves: they get an :class:`EchoConfig`, parsed
once per crawler. A bad value raises ``NotConfigured`` naming the setting, the value and the
rule, so a typo stops the crawl at start instead of skewing it for hours.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import NotConfigured

from scrapy_echo.core.defaults import DEFAULTS
from scrapy_echo.core.identity import PageIdentity, SameSite, load_normalizer
from scrapy_echo.model.decisions.registry import POLICIES
from scrapy_echo.sources.address_guard import AddressGuard

if TYPE_CHECKING:
    from scrapy.settings import BaseSettings


@dataclass(frozen=True)
class EchoConfig:
    """The parsed ``ECHO_*`` settings (see :data:`DEFAULTS` for what each means)."""

    crawl_rate: float | None
    policy: str
    sources: tuple[str, ...]
    sources_file: Path | None  # ECHO_SOURCES given as a file: re-read when it changes
    click_feed: Path | None
    signal_feed: Path | None
    signal_poll_interval: float
    resolve_interval: float
    click_push_period: float
    click_bin: float
    click_bins: int
    history_size: int
    default_profit: float
    default_half_life: float
    site_weights: dict[str, float]
    site_scores: dict[str, float]  # site -> its score over the mean score (cold-start P)
    checkpoint_interval: float
    journal_interval: float  # 0: no journal
    plain_share: float
    plain_queue_max: int
    dupefilter_ttl: float
    refresh_share: float
    refresh_stale_cost: float
    refresh_prior_period: float
    refresh_shortest: float
    refresh_longest: float
    refresh_very_stale: float
    failure_backoff: float
    failure_backoff_max: float
    source_max_failures: int
    page_max_tries: int
    backlog: str
    min_interval: float
    max_interval: float
    seen_ttl: float
    politeness: bool
    max_crawl_delay: float
    same_site: bool
    allowed_hosts: tuple[str, ...]
    allowed_private_hosts: tuple[str, ...]
    cross_site_sitemaps: bool
    identity: PageIdentity
    max_links_per_source: int
    max_sources_per_source: int
    max_source_depth: int
    max_sources_per_site: int
    max_found_sources: int
    max_next_pages: int
    max_source_bytes: int
    page_callback: str
    debug: bool
    log_interval: float
    redis_key_prefix: str
    redis_lease_timeout: float
    redis_solver_lease: float
    redis_snapshot_interval: float
    redis_prefetch: int
    redis_queue_ahead: float
    redis_dupefilter_ttl: float  # ECHO_REDIS_DUPEFILTER_TTL if set, else dupefilter_ttl
    redis_poll_interval: float
    redis_max_attempts: int
    redis_meta_allow: tuple[str, ...]
    redis_meta_refuse: tuple[str, ...]
    metrics_port: int | None
    metrics_address: str
    metrics_sources: int

    @classmethod
    def from_settings(cls, settings: BaseSettings) -> EchoConfig:
        """Parse and check; ``NotConfigured`` (bare) when ``ECHO_ENABLED`` is false."""
        if not settings.getbool("ECHO_ENABLED", True):
            raise NotConfigured
        get = _Getter(settings)
        policy = get.text("ECHO_POLICY")
        if policy not in POLICIES:
            known = ", ".join(sorted(POLICIES))
            raise NotConfigured(f"ECHO_POLICY ({policy!r}) must be one of: {known}")
        backoff = get.number("ECHO_FAILURE_BACKOFF", at_least=0.0)
        min_interval = get.number("ECHO_MIN_INTERVAL", at_least=0.0)
        max_interval = get.optional_number("ECHO_MAX_INTERVAL") or math.inf
        dupefilter_ttl = get.number("ECHO_DUPEFILTER_TTL")
        refresh_shortest = get.number("ECHO_REFRESH_SHORTEST")
        if max_interval < min_interval:
            raise NotConfigured(
                f"ECHO_MAX_INTERVAL ({max_interval:g}) must be >= ECHO_MIN_INTERVAL "
                f"({min_interval:g})"
            )
        return cls(
            crawl_rate=get.optional_number("ECHO_CRAWL_RATE"),
            policy=policy,
            sources=read_sources(settings.get("ECHO_SOURCES", DEFAULTS["ECHO_SOURCES"])),
            sources_file=_sources_file(settings.get("ECHO_SOURCES", DEFAULTS["ECHO_SOURCES"])),
            click_feed=get.optional_path("ECHO_CLICK_FEED"),
            signal_feed=get.optional_path("ECHO_SIGNAL_FEED"),
            signal_poll_interval=get.number("ECHO_SIGNAL_POLL_INTERVAL"),
            resolve_interval=get.number("ECHO_RESOLVE_INTERVAL"),
            click_push_period=get.number("ECHO_CLICK_PUSH_PERIOD"),
            click_bin=get.number("ECHO_CLICK_BIN"),
            click_bins=get.integer("ECHO_CLICK_BINS"),
            history_size=get.integer("ECHO_HISTORY_SIZE"),
            default_profit=get.number("ECHO_DEFAULT_PROFIT"),
            default_half_life=get.number("ECHO_DEFAULT_HALF_LIFE"),
            site_weights=get.weights("ECHO_SITE_WEIGHTS"),
            site_scores=read_site_scores(get.optional_path("ECHO_SITE_SCORES")),
            checkpoint_interval=get.number("ECHO_CHECKPOINT_INTERVAL"),
            journal_interval=get.number("ECHO_JOURNAL_INTERVAL", at_least=0.0),
            plain_share=get.number("ECHO_PLAIN_SHARE", at_least=0.0, at_most=1.0),
            plain_queue_max=get.integer("ECHO_PLAIN_QUEUE_MAX"),
            dupefilter_ttl=dupefilter_ttl,
            refresh_share=get.number("ECHO_REFRESH_SHARE", at_least=0.0, at_most=0.5),
            refresh_stale_cost=get.number("ECHO_REFRESH_STALE_COST"),
            refresh_prior_period=get.number("ECHO_REFRESH_PRIOR_PERIOD"),
            refresh_shortest=refresh_shortest,
            refresh_longest=get.number("ECHO_REFRESH_LONGEST", at_least=refresh_shortest),
            refresh_very_stale=get.number("ECHO_REFRESH_VERY_STALE", at_most=0.5),
            failure_backoff=backoff,
            failure_backoff_max=get.number("ECHO_FAILURE_BACKOFF_MAX", at_least=backoff),
            source_max_failures=get.integer("ECHO_SOURCE_MAX_FAILURES"),
            page_max_tries=get.integer("ECHO_PAGE_MAX_TRIES"),
            backlog=get.choice("ECHO_BACKLOG", ("crawl", "skip")),
            min_interval=min_interval,
            max_interval=max_interval,
            seen_ttl=get.number("ECHO_SEEN_TTL", at_least=0.0) or math.inf,
            politeness=get.flag("ECHO_POLITENESS"),
            max_crawl_delay=get.number("ECHO_MAX_CRAWL_DELAY", at_least=0.0),
            same_site=get.flag("ECHO_SAME_SITE"),
            allowed_hosts=get.names("ECHO_ALLOWED_HOSTS"),
            allowed_private_hosts=get.private_hosts("ECHO_ALLOWED_PRIVATE_HOSTS"),
            cross_site_sitemaps=get.flag("ECHO_CROSS_SITE_SITEMAPS"),
            identity=PageIdentity(get.names("ECHO_STRIP_PARAMS"), _normalizer(get)),
            max_links_per_source=get.integer("ECHO_MAX_LINKS_PER_SOURCE"),
            max_sources_per_source=get.integer("ECHO_MAX_SOURCES_PER_SOURCE", at_least=0),
            max_source_depth=get.integer("ECHO_MAX_SOURCE_DEPTH", at_least=0),
            max_sources_per_site=get.integer("ECHO_MAX_SOURCES_PER_SITE", at_least=0),
            max_found_sources=get.integer("ECHO_MAX_FOUND_SOURCES", at_least=0),
            max_next_pages=get.integer("ECHO_MAX_NEXT_PAGES", at_least=0),
            max_source_bytes=get.integer("ECHO_MAX_SOURCE_BYTES"),
            page_callback=get.text("ECHO_PAGE_CALLBACK"),
            debug=get.flag("ECHO_DEBUG"),
            log_interval=get.number("ECHO_LOG_INTERVAL"),
            redis_key_prefix=get.text("ECHO_REDIS_KEY_PREFIX"),
            redis_lease_timeout=get.number("ECHO_REDIS_LEASE_TIMEOUT"),
            redis_solver_lease=get.number("ECHO_REDIS_SOLVER_LEASE"),
            redis_snapshot_interval=get.number("ECHO_REDIS_SNAPSHOT_INTERVAL"),
            redis_prefetch=get.integer("ECHO_REDIS_PREFETCH"),
            redis_queue_ahead=get.number("ECHO_REDIS_QUEUE_AHEAD"),
            redis_dupefilter_ttl=get.optional_number("ECHO_REDIS_DUPEFILTER_TTL") or dupefilter_ttl,
            redis_poll_interval=get.number("ECHO_REDIS_POLL_INTERVAL"),
            redis_max_attempts=get.integer("ECHO_REDIS_MAX_ATTEMPTS"),
            redis_meta_allow=get.names("ECHO_REDIS_META_ALLOW"),
            redis_meta_refuse=get.names("ECHO_REDIS_META_REFUSE"),
            metrics_port=get.optional_port("ECHO_METRICS_PORT"),
            metrics_address=get.text("ECHO_METRICS_ADDRESS"),
            metrics_sources=get.integer("ECHO_METRICS_SOURCES", at_least=0),
        )

    @property
    def site_rule(self) -> SameSite | None:
        """Which links a source may yield; ``None``: any."""
        return SameSite(self.allowed_hosts) if self.same_site else None


def _normalizer(get: _Getter) -> Callable[[str], str] | None:
    path = get.raw("ECHO_URL_NORMALIZER")
    if path is None or path == "":
        return None
    if callable(path):  # a function given directly in Python settings
        return path  # type: ignore[no-any-return]
    if not isinstance(path, str):
        raise NotConfigured(f"ECHO_URL_NORMALIZER ({path!r}) must be a dotted path")
    try:
        return load_normalizer(path)
    except ValueError as exc:
        raise NotConfigured(str(exc)) from None


def read_site_scores(path: Path | None) -> dict[str, float]:
    """``scrapy echo-rank-sites``' output (columns ``site`` and ``score``) as each site's score
    over the mean score of the file's sites; ``NotConfigured`` naming the file and line of a
    row that is not one (docs/how-it-works.rst, "Ranking sites by how temporal they are")."""
    if path is None:
        return {}
    where = f"ECHO_SITE_SCORES ({str(path)!r})"
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            if not {"site", "score"} <= set(reader.fieldnames or ()):
                raise NotConfigured(f"{where} needs a header with 'site' and 'score' columns")
            scores = {}
            for row in reader:
                site = (row.get("site") or "").strip().lower().rstrip(".")
                try:
                    score = float(row.get("score") or "")
                except ValueError:
                    score = math.nan
                if not site or not (math.isfinite(score) and score >= 0):
                    raise NotConfigured(
                        f"{where} line {reader.line_num}: needs a site and a score >= 0"
                    )
                scores[site] = score
    except (OSError, UnicodeDecodeError) as exc:
        raise NotConfigured(f"{where} cannot be read: {exc}") from None
    mean = sum(scores.values()) / len(scores) if scores else 0.0
    return {site: score / mean for site, score in scores.items()} if mean > 0 else {}


def read_sources(value: object) -> tuple[str, ...]:
    """Source URLs from a list of URLs, a comma-separated string, or a path to a file of
    URLs (one per line; blank lines and ``#`` comments skipped). Raises ``NotConfigured``
    for anything that is not an absolute http(s) URL, naming it (and its line)."""
    where = "ECHO_SOURCES"
    if isinstance(value, (str, Path)) and _looks_like_path(str(value)):
        path = Path(value)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise NotConfigured(f"ECHO_SOURCES ({str(value)!r}) cannot be read: {exc}") from None
        items = [
            (f"{path}, line {number}", line.strip())
            for number, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
    elif isinstance(value, str):
        items = [(where, part.strip()) for part in value.split(",") if part.strip()]
    elif isinstance(value, (list, tuple)):
        items = [(where, item) for item in value]
    else:
        raise NotConfigured(f"ECHO_SOURCES ({value!r}) must be a list of URLs or a file path")
    urls = []
    for place, url in items:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise NotConfigured(f"{place}: source {url!r} must be an absolute http(s) URL")
        urls.append(url)
    return tuple(dict.fromkeys(urls))  # duplicates once, in order


def _sources_file(value: object) -> Path | None:
    if isinstance(value, (str, Path)) and _looks_like_path(str(value)):
        return Path(value)
    return None


def _looks_like_path(value: str) -> bool:
    return "://" not in value and "," not in value


class _Getter:
    """Typed reads of ``ECHO_*`` settings that fail with the setting, value and rule."""

    def __init__(self, settings: BaseSettings) -> None:
        self.settings = settings

    def raw(self, name: str) -> Any:
        return self.settings.get(name, DEFAULTS[name])

    def number(
        self, name: str, *, at_least: float | None = None, at_most: float = math.inf
    ) -> float:
        """A finite number, ``> 0`` unless ``at_least`` says otherwise."""
        value = self.raw(name)
        rule = "> 0" if at_least is None else f">= {at_least:g}"
        if at_most < math.inf:
            rule += f" and <= {at_most:g}"
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise NotConfigured(f"{name} ({value!r}) must be a number {rule}") from None
        low_ok = number > 0 if at_least is None else number >= at_least
        if not (math.isfinite(number) and low_ok and number <= at_most):
            raise NotConfigured(f"{name} ({value!r}) must be a finite number {rule}")
        return number

    def optional_number(self, name: str) -> float | None:
        value = self.raw(name)
        if value is None or value == "":
            return None
        return self.number(name)

    def integer(self, name: str, *, at_least: int = 1) -> int:
        value = self.raw(name)
        rule = f"must be an integer >= {at_least}"
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise NotConfigured(f"{name} ({value!r}) {rule}")
        try:
            number = int(value)
        except ValueError:
            raise NotConfigured(f"{name} ({value!r}) {rule}") from None
        if number < at_least:
            raise NotConfigured(f"{name} ({value!r}) {rule}")
        return number

    def optional_port(self, name: str) -> int | None:
        """A TCP port (0: any free one), or ``None``."""
        value = self.raw(name)
        if value is None or value == "":
            return None
        port = self.integer(name, at_least=0)
        if port > 65535:
            raise NotConfigured(f"{name} ({value!r}) must be a port, 0 to 65535")
        return port

    def flag(self, name: str) -> bool:
        try:
            return self.settings.getbool(name, DEFAULTS[name])
        except ValueError:
            raise NotConfigured(f"{name} ({self.raw(name)!r}) must be true or false") from None

    def weights(self, name: str) -> dict[str, float]:
        """A dict of host or site names to finite weights >= 0 (or its JSON, from ``-s``)."""
        value = self.raw(name)
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else {}
            except ValueError:
                raise NotConfigured(f"{name} ({value!r}) must be a dict or its JSON") from None
        rule = "must map host or site names to finite numbers >= 0"
        if not isinstance(value, Mapping):
            raise NotConfigured(f"{name} ({value!r}) {rule}")
        out = {}
        for key, weight in value.items():
            if not isinstance(key, str) or not key.strip() or isinstance(weight, bool):
                raise NotConfigured(f"{name} ({value!r}) {rule}")
            try:
                number = float(weight)
            except (TypeError, ValueError):
                raise NotConfigured(f"{name} ({value!r}) {rule}") from None
            if not (math.isfinite(number) and number >= 0):
                raise NotConfigured(f"{name} ({value!r}) {rule}")
            out[key.strip().lower().rstrip(".")] = number
        return out

    def names(self, name: str) -> tuple[str, ...]:
        """A list of non-empty strings (or one comma-separated string)."""
        value = self.raw(name)
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise NotConfigured(f"{name} ({value!r}) must be a list of strings")
        return tuple(v.strip() for v in value if v.strip())

    def private_hosts(self, name: str) -> tuple[str, ...]:
        """Addresses, networks and names the address guard may allow (:meth:`names`)."""
        entries = self.names(name)
        try:
            AddressGuard(entries)
        except ValueError as exc:
            raise NotConfigured(f"{name} ({self.raw(name)!r}): {exc}") from None
        return entries

    def choice(self, name: str, choices: tuple[str, ...]) -> str:
        value = self.raw(name)
        if value not in choices:
            raise NotConfigured(f"{name} ({value!r}) must be one of: {', '.join(choices)}")
        return str(value)

    def text(self, name: str) -> str:
        value = self.raw(name)
        if not isinstance(value, str):
            raise NotConfigured(f"{name} ({value!r}) must be a string")
        return value

    def optional_path(self, name: str) -> Path | None:
        value = self.raw(name)
        if value is None or value == "":
            return None
        if not isinstance(value, (str, Path)):
            raise NotConfigured(f"{name} ({value!r}) must be a file path")
        path = Path(value)
        if path.suffix.lower() not in {".jsonl", ".ndjson", ".json", ".csv"}:
            raise NotConfigured(
                f"{name} ({str(value)!r}) must end in .jsonl, .ndjson, .json or .csv"
            )
        return path
