"""SSRF safety: which URLs may be endpoints and which addresses may be called."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook import names
from brook.delivery.addresses import PUBLIC as PUBLIC_ONLY
from brook.delivery.addresses import (
    Reach,
    Refused,
    check_url,
    metadata_kind,
    parsed,
    pick,
    reach,
)
from brook.errors import BadRequest

PUBLIC = "93.184.215.14"
PRIVATE = reach(True)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8080/hook", "loopback"),
        ("http://localhost/hook", "loopback"),
        ("http://api.localhost/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://192.168.0.1/hook", "private"),
        ("http://[::1]/hook", "loopback"),
        ("http://[::ffff:10.0.0.1]/hook", "private"),
        ("http://[fe80::1]/hook", "link-local"),
        ("http://0.0.0.0/", "not a unicast"),
        ("http://100.64.0.1/", "not a public"),
    ],
)
def test_literal_private_addresses_are_refused_on_create(url: str, why: str) -> None:
    with pytest.raises(BadRequest, match=why) as caught:
        check_url(url, PUBLIC_ONLY)
    assert "delivery_allow_private_networks" in caught.value.message
    assert check_url(url, PRIVATE) == url


METADATA_URLS = [
    "http://169.254.169.254/latest/meta-data",
    "http://[fd00:ec2::254]/",
    "http://169.254.170.2/v2/credentials",
    "http://100.100.100.200/latest/meta-data",
    "http://168.63.129.16/machine",
    "http://169.254.1.1/",
    "http://[::ffff:169.254.169.254]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:a9fe:a9fe::1]/",
]


@pytest.mark.parametrize("url", METADATA_URLS)
def test_metadata_addresses_are_refused_even_with_private_networks(url: str) -> None:
    for allow in (PUBLIC_ONLY, PRIVATE, reach(True, "0.0.0.0/0,::/0,169.254.0.0/16")):
        with pytest.raises(BadRequest, match="delivery_allow_networks names it exactly") as no:
            check_url(url, allow)
        assert "metadata" in no.value.message or "link-local" in no.value.message


def test_a_metadata_address_is_called_only_when_named_exactly() -> None:
    named = reach(True, ["169.254.169.254/32", "10.0.0.0/8"])
    assert check_url("http://169.254.169.254/latest/meta-data", named)
    assert pick("metadata.google.internal", 80, lambda h, p: ["169.254.169.254"], named)
    with pytest.raises(BadRequest, match=r"exactly \(169\.254\.170\.2/32\)"):
        check_url("http://169.254.170.2/", named)
    with pytest.raises(Refused, match=r"169\.254\.169\.254, a cloud metadata address"):
        pick("metadata.google.internal", 80, lambda h, p: ["169.254.169.254"], PRIVATE)


def test_allow_networks_narrow_private_networks_and_leave_public_ones_alone() -> None:
    narrow = reach(True, "10.1.0.0/16, fd00::/8")
    assert check_url("http://10.1.2.3/hook", narrow)
    assert check_url("http://[fd12::1]/hook", narrow)
    assert check_url(f"http://{PUBLIC}/hook", narrow)
    for url, why in [
        ("http://10.2.0.1/hook", "a private address outside delivery_allow_networks"),
        ("http://127.0.0.1:8080/hook", "a loopback address outside delivery_allow_networks"),
        ("http://localhost/hook", "a loopback address outside delivery_allow_networks"),
    ]:
        with pytest.raises(BadRequest, match=why) as no:
            check_url(url, narrow)
        assert "add its network to the broker's delivery_allow_networks" in no.value.message
    answers = ["10.1.0.5", "192.168.0.9"]  # one address outside spoils all
    with pytest.raises(Refused, match=r"192\.168\.0\.9, a private address outside"):
        pick("hooks.internal", 443, lambda h, p: answers, narrow)
    assert pick("hooks.internal", 443, lambda h, p: answers[:1], narrow) == "10.1.0.5"


@pytest.mark.parametrize(
    ("private", "networks", "why"),
    [
        (True, "10.0.0.1/8", "has host bits set"),
        (True, ["10.0.0.0/8", "nonsense"], "'nonsense' is not a network"),
        (True, "10.0.0.0/33", "is not a network"),
        (False, "10.0.0.0/8", "set delivery_allow_private_networks = true as well"),
        (True, ",".join(f"10.{i}.0.0/16" for i in range(101)), "at most 100"),
    ],
)
def test_a_bad_network_list_is_one_line(private: bool, networks: object, why: str) -> None:
    with pytest.raises(BadRequest, match=why) as no:
        reach(private, networks)  # type: ignore[arg-type]
    assert "\n" not in no.value.message and "delivery_allow_networks" in no.value.message


def test_a_reach_crosses_to_a_worker_process_whole() -> None:
    for made in (PUBLIC_ONLY, PRIVATE, reach(True, "10.0.0.0/8,169.254.169.254")):
        assert parsed(list(made.arguments())) == made
    assert reach(True, " 10.0.0.0/8  fd00::/8 ,") == Reach(
        True, reach(True, "10.0.0.0/8,fd00::/8").networks
    )


def test_every_link_local_ipv4_address_counts_as_metadata() -> None:
    assert metadata_kind(ipaddress.ip_address("169.254.20.10")) is not None
    assert metadata_kind(ipaddress.ip_address("10.0.0.1")) is None
    assert metadata_kind(ipaddress.ip_address(PUBLIC)) is None


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/",
        "example.com/hook",
        "http:///nohost",
        "https://u:p@example.com/",
        "http://x:99999/",
    ],
)
def test_malformed_urls_are_refused(url: str) -> None:
    with pytest.raises(BadRequest):
        check_url(url, PRIVATE)


def test_public_urls_pass() -> None:
    assert check_url("https://hooks.example.com/brook?x=1", PUBLIC_ONLY)
    assert check_url(f"http://{PUBLIC}:8443/", PUBLIC_ONLY)


def test_every_resolved_address_is_checked_each_time() -> None:
    answers = {"hooks.example.com": [PUBLIC]}

    def resolver(host: str, port: int) -> list[str]:
        return answers[host]

    assert pick("hooks.example.com", 443, resolver, PUBLIC_ONLY) == PUBLIC
    answers["hooks.example.com"] = ["10.0.0.5"]  # DNS rebinding
    with pytest.raises(Refused, match=r"10\.0\.0\.5, a private address"):
        pick("hooks.example.com", 443, resolver, PUBLIC_ONLY)
    answers["hooks.example.com"] = [PUBLIC, "127.0.0.1"]  # one bad answer spoils all
    with pytest.raises(Refused, match="loopback"):
        pick("hooks.example.com", 443, resolver, PUBLIC_ONLY)
    assert pick("hooks.example.com", 443, resolver, PRIVATE) == PUBLIC
    with pytest.raises(Refused):
        pick("169.254.169.254", 80, resolver, PUBLIC_ONLY)


@given(st.from_regex(names.URL_PATTERN, fullmatch=True))
def test_every_url_the_document_allows_is_taken_when_private_networks_are(url: str) -> None:
    """The OpenAPI document gives endpoint URLs names.URL_PATTERN: each such URL is
    taken (the private-address rule is the broker's setting, stated apart), but for a
    metadata address (the rule stated apart too)."""
    try:
        literal = ipaddress.ip_address(urlsplit(url).hostname or "")
    except ValueError:
        literal = None
    if literal is not None and metadata_kind(literal) is not None:
        with pytest.raises(BadRequest, match=r"metadata|link-local"):
            check_url(url, PRIVATE)
    else:
        assert check_url(url, PRIVATE) == url
