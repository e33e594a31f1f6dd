"""SSRF safety: which URLs may be endpoints and which addresses may be called."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brook import names
from brook.delivery.addresses import Refused, check_url, pick
from brook.errors import BadRequest

PUBLIC = "93.184.215.14"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:8080/hook", "loopback"),
        ("http://localhost/hook", "loopback"),
        ("http://api.localhost/hook", "loopback"),
        ("http://10.1.2.3/hook", "private"),
        ("http://192.168.0.1/hook", "private"),
        ("http://169.254.169.254/latest/meta-data", "metadata"),
        ("http://[::1]/hook", "loopback"),
        ("http://[::ffff:10.0.0.1]/hook", "private"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://0.0.0.0/", "not a unicast"),
        ("http://100.64.0.1/", "not a public"),
    ],
)
def test_literal_private_addresses_are_refused_on_create(url: str, why: str) -> None:
    with pytest.raises(BadRequest, match=why) as caught:
        check_url(url, allow_private=False)
    assert "delivery_allow_private_networks" in caught.value.message
    assert check_url(url, allow_private=True) == url


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
        check_url(url, allow_private=True)


def test_public_urls_pass() -> None:
    assert check_url("https://hooks.example.com/brook?x=1", allow_private=False)
    assert check_url(f"http://{PUBLIC}:8443/", allow_private=False)


def test_every_resolved_address_is_checked_each_time() -> None:
    answers = {"hooks.example.com": [PUBLIC]}

    def resolver(host: str, port: int) -> list[str]:
        return answers[host]

    assert pick("hooks.example.com", 443, resolver, allow_private=False) == PUBLIC
    answers["hooks.example.com"] = ["10.0.0.5"]  # DNS rebinding
    with pytest.raises(Refused, match=r"10\.0\.0\.5, a private address"):
        pick("hooks.example.com", 443, resolver, allow_private=False)
    answers["hooks.example.com"] = [PUBLIC, "127.0.0.1"]  # one bad answer spoils all
    with pytest.raises(Refused, match="loopback"):
        pick("hooks.example.com", 443, resolver, allow_private=False)
    assert pick("hooks.example.com", 443, resolver, allow_private=True) == PUBLIC
    with pytest.raises(Refused):
        pick("169.254.169.254", 80, resolver, allow_private=False)


@given(st.from_regex(names.URL_PATTERN, fullmatch=True))
def test_every_url_the_document_allows_is_taken_when_private_networks_are(url: str) -> None:
    """The OpenAPI document gives endpoint URLs names.URL_PATTERN: each such URL is
    taken (the private-address rule is the broker's setting, stated apart)."""
    assert check_url(url, allow_private=True) == url
