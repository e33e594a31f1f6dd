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
`delivery_allow_private_networks = true` allows them all, for local development.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from brook import names
from brook.errors import BadRequest

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]
"""(host, port) -> the addresses it resolves to, as text."""

_HOST = re.compile(names.HOST_PATTERN)
METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}


class Refused(Exception):
    """An address that may not be called; the message says why."""


def why_refused(address: Address) -> str | None:
    """Why `address` may not be called by default, or None when it is public."""
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        address = mapped
    if address in METADATA:
        return "a cloud metadata address"
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


def check_url(url: str, allow_private: bool) -> str:
    """The URL, if it may be an endpoint's; BadRequest saying what is wrong."""
    if not isinstance(url, str) or len(url) > 2048:
        raise BadRequest("url must be an http or https URL of at most 2,048 characters")
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
    if allow_private:
        return url
    if host == "localhost" or host.endswith(".localhost"):
        raise BadRequest(_private_hint(url, "a loopback address"))
    try:
        literal: Address | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None  # a name: checked after each resolution
    if literal is not None:
        why = why_refused(literal)
        if why is not None:
            raise BadRequest(_private_hint(url, why))
    return url


def _private_hint(url: str, why: str) -> str:
    return (
        f"{url[:100]} is {why}: endpoints are called only at public addresses unless the "
        "broker is started with delivery_allow_private_networks = true (local development)"
    )


def pick(host: str, port: int, resolver: Resolver, allow_private: bool) -> str:
    """The address to connect to for `host`: resolved, every address checked (one
    private address among public ones refuses them all: the answer is not to be
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
    if not allow_private:
        for address in found:
            why = why_refused(address)
            if why is not None:
                raise Refused(f"{host} resolves to {address}, {why}")
    return str(found[0])


def system_resolver(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to (blocking: run off the event loop)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))
