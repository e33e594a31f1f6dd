"""Which addresses the broker may call (SSRF safety, SPEC §7). Pure but for the
resolver, which is passed in (tests give a fake one).

An endpoint's URL comes from whoever may create endpoints; without a check, the
broker would post records to anything it can reach: its own admin port, a
database on the private network, the cloud's metadata service (credentials).
So by default only public addresses are called, and the check is made after
DNS resolution on every attempt, against the address actually connected to: a
name that resolved to a public address when the endpoint was created and to
10.0.0.5 later (DNS rebinding) is refused then. A URL whose host is a literal
private address (or `localhost`) is refused when the endpoint is created.

What else may be called is the broker's `Reach`:

    address                      default   private networks   ... and allow_networks
    public                       called    called             called
    loopback, private, other     refused   called             called only inside them
      non-public unicast
    metadata (METADATA, and      refused   refused            called only when one of
      169.254.0.0/16)                                         them is exactly it (/32)

An IPv6 address that carries an IPv4 one (::ffff:a.b.c.d, NAT64's 64:ff9b::/96,
6to4's 2002::/16) is judged as that IPv4 address: 64:ff9b::a9fe:a9fe reaches
169.254.169.254 through a NAT64 gateway.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from brook import limits, names
from brook.errors import BadRequest

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], list[str]]
"""(host, port) -> the addresses it resolves to, as text."""

_HOST = re.compile(names.HOST_PATTERN)
METADATA = {
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, Oracle, DigitalOcean, OpenStack, ...
        "fd00:ec2::254",  # AWS over IPv6
        "169.254.170.2",  # AWS ECS tasks' credentials
        "169.254.170.23",  # AWS EKS Pod Identity's credentials
        "fd00:ec2::23",  # the same over IPv6
        "100.100.100.200",  # Alibaba Cloud
        "168.63.129.16",  # Azure's WireServer (a public address)
        "192.0.0.192",  # Oracle Cloud's older metadata
    )
}
"""Cloud metadata and credential services: never called unless named exactly."""
LINK_LOCAL_V4 = ipaddress.ip_network("169.254.0.0/16")
"""Where clouds serve metadata, credentials, DNS and time to their machines: all of it
is treated as metadata (a webhook receiver has no business there)."""
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_ALLOW_NETWORKS_HINT = "give CIDRs such as 10.0.0.0/8, fd00::/8 or 169.254.169.254/32"


class Refused(Exception):
    """An address that may not be called; the message says why."""


def plain(address: Address) -> Address:
    """The IPv4 address an IPv6 one carries (mapped, NAT64, 6to4), else `address`."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if address.sixtofour is not None:
            return address.sixtofour
    return address


def metadata_kind(address: Address) -> str | None:
    """What metadata `address` is (after `plain`), or None when it is none."""
    address = plain(address)
    if address in METADATA:
        return "a cloud metadata address"
    if address in LINK_LOCAL_V4:
        return "a link-local address (where clouds serve metadata and credentials)"
    return None


def why_refused(address: Address) -> str | None:
    """Why `address` may not be called by default, or None when it is public."""
    address = plain(address)
    metadata = metadata_kind(address)
    if metadata is not None:
        return metadata
    if address.is_unspecified or address.is_multicast:
        return "not a unicast address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_private:
        return "a private address"
    if address.is_reserved:
        return "a reserved address"
    if not address.is_global:
        return "not a public address"
    return None


@dataclasses.dataclass(frozen=True)
class Reach:
    """Which addresses besides public ones delivery may call (the table above):
    `private` (delivery_allow_private_networks) lets it call loopback and private
    addresses, `networks` (delivery_allow_networks) only those inside them, and a
    metadata address only when one of `networks` is exactly that address."""

    private: bool = False
    networks: tuple[Network, ...] = ()

    def why_refused(self, address: Address) -> str | None:
        """Why `address` may not be called, or None when it may."""
        address = plain(address)
        why = why_refused(address)
        if why is None:
            return None
        if metadata_kind(address) is not None:
            if any(n.num_addresses == 1 and address in n for n in self.networks):
                return None
            return why
        if not self.private:
            return why
        if self.networks and not any(address in n for n in self.networks):
            return f"{why} outside delivery_allow_networks"
        return None

    def hint(self, address: Address) -> str:
        """What the operator may do about a refused `address`."""
        if metadata_kind(address) is not None:
            exact = ipaddress.ip_network(plain(address))
            needs = "" if self.private else ", with delivery_allow_private_networks = true"
            return (
                "Brook calls none unless the broker's delivery_allow_networks names it "
                f"exactly ({exact}{needs})"
            )
        if self.private:
            return "add its network to the broker's delivery_allow_networks to call it"
        return (
            "endpoints are called only at public addresses unless the broker is started "
            "with delivery_allow_private_networks = true (local development)"
        )

    def arguments(self) -> tuple[str, str]:
        """The reach as two words of a command line (a delivery worker's): see `parsed`."""
        return ("1" if self.private else "0", ",".join(str(n) for n in self.networks))


PUBLIC = Reach()
"""The default: public addresses only."""


def reach(private: bool, networks: str | Iterable[str] | None = None) -> Reach:
    """The broker's reach from its settings: `networks` is a list of CIDRs, or one
    string of them, separated by commas or spaces (an address alone is its /32 or
    /128). BadRequest, in one line, for a CIDR that is no network, too many of them,
    or networks without private networks allowed."""
    items = [] if networks is None else [networks] if isinstance(networks, str) else networks
    given = [part for item in items for part in re.split(r"[,\s]+", str(item)) if part]
    if len(given) > limits.delivery_allow_networks_max:
        raise BadRequest(
            f"delivery_allow_networks names {len(given)} networks; at most "
            f"{limits.delivery_allow_networks_max}"
        )
    parsed: list[Network] = []
    for part in given:
        try:
            parsed.append(ipaddress.ip_network(part))
        except ValueError as exc:
            raise BadRequest(
                f"delivery_allow_networks: {part[:60]!r} is not a network ({exc}); "
                f"{_ALLOW_NETWORKS_HINT}"
            ) from None
    if parsed and not private:
        raise BadRequest(
            "delivery_allow_networks narrows delivery_allow_private_networks: set "
            "delivery_allow_private_networks = true as well"
        )
    return Reach(bool(private), tuple(dict.fromkeys(parsed)))


def parsed(arguments: list[str]) -> Reach:
    """The reach `Reach.arguments` wrote."""
    private, networks = arguments
    return reach(private == "1", networks)


def check_url(url: str, allow: Reach) -> str:
    """The URL, if it may be an endpoint's; BadRequest saying what is wrong."""
    if not isinstance(url, str) or len(url) > limits.endpoint_url_chars_max:
        raise BadRequest(
            "url must be an http or https URL of at most "
            f"{limits.endpoint_url_chars_max:,} characters"
        )
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:  # a bracketed host that is no IPv6 address
        raise BadRequest(f"url {url[:100]!r} has no valid host") from None
    if parts.scheme not in ("http", "https") or not host:
        raise BadRequest(f"url must be http:// or https:// with a host, not {url[:100]!r}")
    if not (host.startswith("[") or _HOST.fullmatch(host) or ":" in host):
        raise BadRequest(
            f"{host[:100]!r} is not a host name (letters, digits, '-' and '.'; "
            "an international name in its xn-- form)"
        )
    if parts.username is not None or parts.password is not None:
        raise BadRequest("put credentials in the endpoint's headers, not in its url")
    if parts.fragment:
        raise BadRequest("an endpoint's url has no #fragment")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise BadRequest(f"the port of {url[:100]!r} is not a port") from None
    literal: Address | None
    if host == "localhost" or host.endswith(".localhost"):
        literal = ipaddress.IPv4Address("127.0.0.1")
    else:
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            literal = None  # a name: checked after each resolution
    if literal is not None:
        why = allow.why_refused(literal)
        if why is not None:
            raise BadRequest(f"{url[:100]} is {why}: {allow.hint(literal)}")
    return url


def pick(host: str, port: int, resolver: Resolver, allow: Reach) -> str:
    """The address to connect to for `host`: resolved, every address checked (one
    refused address among allowed ones refuses them all: the answer is not to be
    trusted). Raises Refused, or OSError when the name does not resolve."""
    try:
        literal: Address | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    found = (
        [literal]
        if literal is not None
        else [ipaddress.ip_address(a) for a in resolver(host, port)]
    )
    if not found:
        raise OSError(f"{host} resolves to no address")
    for address in found:
        why = allow.why_refused(address)
        if why is not None:
            raise Refused(f"{host} resolves to {address}, {why}: {allow.hint(address)}")
    return str(found[0])


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (blocking: run off the event loop)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))
