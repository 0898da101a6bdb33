"""The address guard: which hosts a URL from content the crawl does not control may name."""

from __future__ import annotations

import pytest

from scrapy_echo.sources.address_guard import AddressGuard

# Even a crawl that allows every private and loopback address refuses these.
EVERYTHING_PRIVATE = ["0.0.0.0/0", "::/0", "localhost", "api.localhost"]


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://169.254.170.2/v2/credentials",  # (ECS task credentials)
        "http://2852039166/latest/meta-data/",  # 169.254.169.254 as one number
        "http://0xa9.0xfe.0xa9.0xfe/",  # in hexadecimal
        "http://0251.0376.0251.0376/",  # in octal
        "http://169.254.43518/",  # its last 16 bits as one part
        "http://169.254.169.254./",  # a trailing dot
        "http://[::ffff:169.254.169.254]/",  # IPv4-mapped
        "http://[::ffff:a9fe:a9fe]/",
        "http://[fe80::1]/",
        "http://[fe80::1%25eth0]/",  # with a zone
        "http://[fd00:ec2::254]/latest/meta-data/",  # AWS's IPv6 endpoint
        "http://100.100.100.200/latest/meta-data/",  # Alibaba Cloud's
        "http://metadata.google.internal/computeMetadata/v1/",
        "http://METADATA.google.internal./computeMetadata/v1/",
        "http://metadata/computeMetadata/v1/",
        "http://0.0.0.0:6379/",
        "http://0/",
        "http://[::]/",
        "http://224.0.0.251/",
        "http://255.255.255.255/",
        "http://１６９．２５４．１６９．２５４/",  # full-width digits and dots
        "http://300.1.2.3/",  # not an address, and no name either
        "http://[not-an-address]/",
    ],
)
def test_metadata_link_local_and_unspecified_are_refused_always(url: str) -> None:
    guard = AddressGuard.for_crawl(["http://169.254.169.254/"], allowed=EVERYTHING_PRIVATE)
    assert guard.refusal(url) is not None


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",
        "http://127.1/",
        "http://0x7f000001/",
        "http://017700000001/",
        "http://[::1]/",
        "http://localhost:8080/",
        "http://api.localhost/",
        "http://10.0.0.5/",
        "http://172.16.3.4/",
        "http://192.168.1.1/admin",
        "http://100.64.0.1/",  # carrier-grade NAT
        "http://[fd12:3456::1]/",
        "http://[::ffff:10.0.0.5]/",
        "http://[64:ff9b::a00:5]/",  # 10.0.0.5 through NAT64
    ],
)
def test_private_and_loopback_hosts_need_an_allowance(url: str) -> None:
    assert "ECHO_ALLOWED_PRIVATE_HOSTS" in (AddressGuard().refusal(url) or "")
    assert AddressGuard(EVERYTHING_PRIVATE).refusal(url) is None


def test_the_crawls_own_source_hosts_are_allowed_and_no_others() -> None:
    guard = AddressGuard.for_crawl(
        ["http://127.0.0.2:8000/rss.xml", "http://localhost/feed", "https://news.example/"],
        allowed=["10.1.0.0/16", "192.168.1.7"],
    )
    for url in (
        "http://127.0.0.2:9999/a",  # (any port of an allowed host)
        "http://[::ffff:127.0.0.2]/",
        "http://LOCALHOST./x",
        "http://10.1.200.3/",
        "http://192.168.1.7/",
        "https://news.example/a",
    ):
        assert guard.refusal(url) is None, url
    for url in ("http://127.0.0.3/", "http://10.2.0.1/", "http://192.168.1.8/"):
        assert guard.refusal(url) is not None, url


def test_public_addresses_and_names_pass() -> None:
    guard = AddressGuard()
    for url in (
        "https://www.example.com/a",
        "http://93.184.215.14/",
        "http://[2606:4700::6810:84e5]/",
        "https://xn--bcher-kva.example/",
        "https://bücher.example/",
        # Judged by name: a public name that resolves to a private address passes (that
        # needs a guard where names are resolved; docs/scrapy.rst says so).
        "http://internal.example.com/",
    ):
        assert guard.refusal(url) is None, url


@pytest.mark.parametrize("entry", ["169.254.169.254", "metadata.google.internal", "0.0.0.0", ""])
def test_an_allowance_of_what_is_refused_always_is_an_error(entry: str) -> None:
    with pytest.raises(ValueError, match=repr(entry)):
        AddressGuard([entry])
