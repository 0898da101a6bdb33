"""Names that resolve where the crawl may not reach: every request of the crawl (a link's, a
redirect's, robots.txt's, the spider's own) is judged by the address its host name resolves
to, not by the name alone. Reproduced on the build of 2026-11-29: the address guard judged
names, so any name whose records point at a private, loopback or metadata address (any
``*.nip.io``-style name) passed. Here ``localhost``, which the machine's resolver answers
with 127.0.0.1, stands for such a name (the tests reach no DNS server)."""

from __future__ import annotations

import pytest
import pytest_twisted
from scrapy import Request
from scrapy.exceptions import IgnoreRequest

from scrapy_echo.crawler.downloadermw import EchoDownloaderMiddleware
from scrapy_echo.sources.address_guard import AddressGuard
from tests.test_middlewares import setup


def test_a_name_is_judged_by_the_address_it_resolves_to() -> None:
    guard = AddressGuard.for_crawl(["http://news.example/"], allowed=["intranet.example"])
    refusal = guard.resolved_refusal("http://sneaky.example/x", "169.254.169.254")
    assert refusal is not None and "sneaky.example resolves to" in refusal
    assert guard.resolved_refusal("http://sneaky.example/x", "10.1.2.3") is not None
    assert guard.resolved_refusal("http://sneaky.example/x", "::1") is not None
    assert guard.resolved_refusal("http://sneaky.example/x", "93.184.216.34") is None
    # Names the crawl allows may resolve anywhere: its sources' hosts, the allowed ones.
    assert guard.resolved_refusal("http://intranet.example/", "10.1.2.3") is None


@pytest_twisted.ensureDeferred
async def test_every_request_to_a_name_resolving_to_loopback_is_refused() -> None:
    crawler, _, _ = setup(ECHO_SOURCES=["http://127.0.0.2:8/hub/"])
    middleware = EchoDownloaderMiddleware.from_crawler(crawler)
    for request in (
        Request("http://localhost:8/admin"),  # the spider's own
        Request("http://localhost:8/robots.txt"),  # robots.txt's
        Request("http://localhost:8/p", meta={"redirect_urls": ["http://127.0.0.1:8/out"]}),
    ):
        with pytest.raises(IgnoreRequest):
            await middleware.process_request(request)
    assert crawler.stats.get_value("echo/requests/resolved_refused") == 3
    # Allowed by name, it is fetched; an address as written is judged as written elsewhere.
    crawler, _, _ = setup(ECHO_ALLOWED_PRIVATE_HOSTS=["localhost"])
    allowed = EchoDownloaderMiddleware.from_crawler(crawler)
    assert await allowed.process_request(Request("http://localhost:8/admin")) is None
    assert await middleware.process_request(Request("http://127.0.0.2:8/hub/")) is None
