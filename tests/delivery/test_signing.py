"""Standard Webhooks signatures: the spec's test vector, and the spec's reference
library (standardwebhooks) as the receiver's verifier."""

from __future__ import annotations

import base64
import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from brook import names
from brook.delivery import signing
from brook.errors import BadRequest

# From the reference library's own tests (libraries/python/tests/test_webhooks.py).
VECTOR_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VECTOR_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VECTOR_TIMESTAMP = 1614265330
VECTOR_BODY = b'{"test": 2432232314}'
VECTOR_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_the_specs_test_vector() -> None:
    key = signing.key_of(VECTOR_SECRET)
    assert signing.sign(key, VECTOR_ID, VECTOR_TIMESTAMP, VECTOR_BODY) == VECTOR_SIGNATURE


def now_s() -> int:
    return int(datetime.datetime.now(datetime.UTC).timestamp())


@given(
    body=st.text(max_size=200).map(str.encode),
    message_id=st.from_regex(r"[A-Za-z0-9._-]{1,40}:[0-9]{1,3}:[0-9]{1,12}", fullmatch=True),
)
def test_the_reference_verifier_accepts_what_brook_signs(body: bytes, message_id: str) -> None:
    secret = signing.new_secret()
    timestamp = now_s()
    header = signing.signature_header([signing.key_of(secret)], message_id, timestamp, body)
    headers = {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": header,
    }
    Webhook(secret).verify(body, headers, json_parse=False)
    tampered = body + b"!"
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(tampered, headers, json_parse=False)


def test_during_a_rotation_either_secret_verifies() -> None:
    old, new = signing.new_secret(), signing.new_secret()
    timestamp = now_s()
    header = signing.signature_header(
        [signing.key_of(new), signing.key_of(old)], "t:0:1", timestamp, b"body"
    )
    headers = {
        "webhook-id": "t:0:1",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": header,
    }
    for secret in (old, new):
        Webhook(secret).verify(b"body", headers, json_parse=False)
    with pytest.raises(WebhookVerificationError):
        Webhook(signing.new_secret()).verify(b"body", headers, json_parse=False)


def test_new_secrets_are_random_and_well_formed() -> None:
    made = {signing.new_secret() for _ in range(100)}
    assert len(made) == 100
    for secret in made:
        assert secret.startswith("whsec_") and len(signing.key_of(secret)) == 32


@pytest.mark.parametrize(
    "secret",
    ["", "abc", "whsec_", "whsec_not base64!", "whsec_" + base64.b64encode(b"short").decode()],
)
def test_bad_secrets_are_refused(secret: str) -> None:
    with pytest.raises(BadRequest, match="secret"):
        signing.key_of(secret)


@given(st.from_regex(names.SECRET_PATTERN, fullmatch=True))
def test_every_secret_the_document_allows_is_taken(secret: str) -> None:
    assert signing.SECRET_BYTES_MIN <= len(signing.key_of(secret)) <= signing.SECRET_BYTES_MAX
