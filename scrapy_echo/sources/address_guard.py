"""Which hosts a URL from content the crawl does not control may name.

Links on a page, the sitemaps a robots.txt lists, where a redirect points and the requests
read from Redis all come from someone else: a site, or whoever can write to Redis. A crawler
that fetched whatever they name would fetch for them from inside its own network
(server-side request forgery): a cloud's metadata service hands out credentials at
``169.254.169.254``, and services that trust their network listen on private addresses.

:class:`AddressGuard` judges a URL by its host:

- refused always: link-local addresses (``169.254.0.0/16``, ``fe80::/10``), the metadata
  services' other addresses and names (``metadata.google.internal``, ...), unspecified
  addresses (``0.0.0.0/8``, ``::``), multicast and broadcast;
- refused unless allowed: loopback and every other address that is not global (private
  networks, shared and reserved ranges), and the names of loopback (``localhost``);
- allowed: everything else, and what the crawl allows: the hosts of its own sources and
  ``ECHO_ALLOWED_PRIVATE_HOSTS`` (addresses, networks such as ``10.0.0.0/8``, names).

A host is read the way the C resolver reads it, so ``2852039166``, ``0xa9.254.169.254`` and
``169.254.43518`` are all ``169.254.169.254``, and an IPv6 address that carries an IPv4 one
(``::ffff:10.0.0.1``) is judged by that one. A DNS name is judged by its name where a URL is
checked, and by the address it resolves to before each request of the crawl is sent
(:meth:`AddressGuard.resolved_refusal`, asked by the downloader middleware: links, redirects,
robots.txt and the spider's own requests alike), so a name whose records point at a private
or metadata address is refused too, unless the crawl allows that name.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# The metadata services of the big clouds, by name and by the addresses that are not
# link-local (those are refused as such): AWS's IPv6 endpoint, Alibaba's, Oracle Cloud
# Classic's.
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "instance-data",
        "instance-data.ec2.internal",
    }
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("fd00:ec2::254", "100.100.100.200", "192.0.0.192")
)
# Names the resolver answers with loopback without asking DNS (/etc/hosts, RFC 6761).
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})

_THIS_NETWORK = ipaddress.ip_network("0.0.0.0/8")  # "this host": 0.0.0.0 reaches loopback
_BROADCAST = ipaddress.ip_address("255.255.255.255")
# IPv6 ranges that carry an IPv4 address in their last 32 bits: IPv4-compatible (deprecated,
# still routed by some stacks) and the well-known NAT64 prefix (a NAT64 gateway connects to
# the IPv4 address). IPv4-mapped addresses are read by ``ipv4_mapped``.
_CARRY_IPV4 = (ipaddress.ip_network("::/96"), ipaddress.ip_network("64:ff9b::/96"))
# A label inet_aton reads as a number: hexadecimal, octal (a leading 0), decimal.
_NUMBER = re.compile(r"(0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*)\Z")
_LAST_LABEL_NUMERIC = re.compile(r"(0[xX][0-9a-fA-F]*|[0-9]+)\Z")


class AddressGuard:
    """Judges the hosts of URLs from untrusted content.

    Parameters
    ----------
    allowed : iterable of str
        Addresses (``10.0.0.5``), networks (``10.0.0.0/8``) and names (``localhost``) that a
        URL may name though loopback or private. ``ValueError`` naming an entry that is
        none of these, or names what is refused always.

    Examples
    --------
    >>> guard = AddressGuard.for_crawl(["http://127.0.0.2:8000/feed.xml"], allowed=["10.1.0.0/16"])
    >>> guard.refusal("http://127.0.0.2:8000/a") is None
    True
    >>> guard.refusal("http://10.1.2.3/") is None
    True
    >>> guard.refusal("http://2852039166/latest/meta-data/")
    'link-local address 169.254.169.254'
    >>> guard.refusal("http://127.0.0.3/")
    'loopback address 127.0.0.3 (not a source host; see ECHO_ALLOWED_PRIVATE_HOSTS)'
    """

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        networks: list[IPNetwork] = []
        names: set[str] = set()
        for entry in allowed:
            network, name = _allowance(entry)
            if network is not None:
                networks.append(network)
            if name is not None:
                names.add(name)
        self.allowed_networks = tuple(networks)
        self.allowed_names = frozenset(names)

    @classmethod
    def for_crawl(cls, sources: Iterable[str], allowed: Iterable[str] = ()) -> AddressGuard:
        """The guard of a crawl whose own sources are ``sources``: their hosts are allowed,
        loopback or private (the operator named them), and so is ``allowed``
        (``ECHO_ALLOWED_PRIVATE_HOSTS``)."""
        hosts = []
        for url in sources:
            host = _host(url)
            if host is not None and _always_refused(host) is None and _needs_allowance(host):
                hosts.append(host)
        return cls([*allowed, *hosts])

    def refusal(self, url: str) -> str | None:
        """Why ``url`` may not be fetched (its host, and what it is), or ``None`` if it may.
        ``url`` as Scrapy fetches it: a request's URL, or a clean link."""
        host = _host(url)
        if host is None:
            return f"malformed host in {url[:80]!r}"
        refused = _always_refused(host)
        if refused is not None:
            return refused
        kind = _needs_allowance(host)
        if kind is None or self._allows(host):
            return None
        return f"{kind} {host} (not a source host; see ECHO_ALLOWED_PRIVATE_HOSTS)"

    def allows(self, url: str) -> bool:
        return self.refusal(url) is None

    def resolved_refusal(self, url: str, address: str) -> str | None:
        """Why ``url``, whose host is a name that resolved to ``address``, may not be
        fetched (``None`` if it may): a name the crawl allows (a source's host, one in
        ``ECHO_ALLOWED_PRIVATE_HOSTS``) may resolve anywhere; any other is judged by the
        address it resolved to, as a URL naming that address would be."""
        host = _host(url)
        if host is None or host in self.allowed_names:
            return None
        try:
            judged = f"[{address}]" if ":" in address else address
        except TypeError:
            return None
        refused = self.refusal(f"http://{judged}/")
        return None if refused is None else f"{host} resolves to {refused}"

    def _allows(self, host: str) -> bool:
        address = read_address(host)
        if address is None:
            return host in self.allowed_names
        return any(address in network for network in self.allowed_networks)


def read_address(host: str) -> IPAddress | None:
    """The address ``host`` is, read as the C resolver reads it (an IPv6 address that carries
    an IPv4 one as that one); ``None`` for a name; ``ValueError`` for a host that looks like
    an address and is none."""
    if ":" in host:
        address = ipaddress.IPv6Address(host)
        carried = address.ipv4_mapped
        # (``::`` and ``::1`` are IPv6's own unspecified and loopback addresses.)
        carries = int(address) > 1 and any(address in network for network in _CARRY_IPV4)
        if carried is None and carries:
            carried = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        return carried if carried is not None else address
    labels = host.split(".")
    if not _LAST_LABEL_NUMERIC.match(labels[-1]):
        return None  # a name: its last label (a top-level domain) is never a number
    return _inet_aton(labels)


def _inet_aton(labels: list[str]) -> ipaddress.IPv4Address:
    """inet_aton's forms: ``a.b.c.d``, ``a.b.c`` (c: 16 bits), ``a.b`` (b: 24 bits), ``a``
    (32 bits), each part decimal, octal (a leading 0) or hexadecimal (``0x``)."""
    if len(labels) > 4 or not all(_NUMBER.match(label) for label in labels):
        raise ValueError(f"not an IPv4 address: {'.'.join(labels)!r:.80}")
    parts = [_number(label) for label in labels]
    *head, last = parts
    if any(part > 0xFF for part in head) or last >= 1 << (8 * (5 - len(parts))):
        raise ValueError(f"not an IPv4 address: {'.'.join(labels)!r:.80}")
    value = last
    for shift, part in enumerate(head):
        value |= part << (24 - 8 * shift)
    return ipaddress.IPv4Address(value)


def _number(label: str) -> int:
    if label[:2].lower() == "0x":
        return int(label[2:] or "0", 16)
    if len(label) > 1 and label[0] == "0":
        return int(label, 8)
    return int(label)


def _host(url: str) -> str | None:
    """The host of ``url`` in one form: lower case, no trailing dot, non-ASCII names as the
    IDNA encoding Scrapy fetches them under; ``None`` if it has none or cannot be read."""
    try:
        host = urlsplit(url).hostname
        if host and not host.isascii():
            host = host.encode("idna").decode("ascii").lower()
    except (ValueError, UnicodeError):
        return None
    host = (host or "").rstrip(".")
    return host or None


def _always_refused(host: str) -> str | None:
    if host in METADATA_NAMES:
        return f"cloud metadata service {host}"
    try:
        address = read_address(host)
    except ValueError:
        return f"malformed address {host[:80]!r}"
    if address is None:
        return None
    if address in METADATA_ADDRESSES:
        return f"cloud metadata service {address}"
    if address.is_link_local:
        return f"link-local address {address}"
    if address.is_unspecified or address in _THIS_NETWORK:
        return f"unspecified address {address}"
    if address.is_multicast or address == _BROADCAST:
        return f"multicast or broadcast address {address}"
    return None


def _needs_allowance(host: str) -> str | None:
    """What ``host`` is if it may be named only when allowed (``loopback address``,
    ``private address``, ``loopback name``), else ``None``. ``host`` is not refused always."""
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return "loopback name"
    address = read_address(host)
    if address is None:
        return None
    if address.is_loopback:
        return "loopback address"
    if not address.is_global:
        return "private address"
    return None


def _allowance(entry: str) -> tuple[IPNetwork | None, str | None]:
    """An entry of the allowed list as a network (an address is a network of one) or a
    name; ``ValueError`` naming it if it is neither, or covers what is refused always."""
    text = entry.strip().lower().rstrip(".")
    if not text:
        raise ValueError(f"{entry!r} is not an address, a network or a host name")
    if "/" in text:
        # (A network allows what in it is not refused always: those stay refused.)
        try:
            return ipaddress.ip_network(text, strict=False), None
        except ValueError:
            raise ValueError(f"{entry!r} is not a network") from None
    refused = _always_refused(text)
    if refused is not None:
        raise ValueError(f"{entry!r} is refused always ({refused})")
    address = read_address(text)
    if address is None:
        return None, text
    return ipaddress.ip_network(address), None
