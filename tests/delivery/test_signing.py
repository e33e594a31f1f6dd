"""Standard Webhooks signatures: the spec's test vector, and the spec's reference
library (standardwebhooks) as the receiver's verifier."""

from __future__ import annotations

import base64
import datetime
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from brook import limits, names
from brook.delivery import endpoint as ep
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
def test_every_secret_the_document_allows_is_taken_unless_weak(secret: str) -> None:
    """The document gives secrets' shape; a weak key is the rule stated apart, and so is
    an Ed25519 key of 64 bytes whose second half must be its seed's public key."""
    if secret.startswith("whsk_") and len(secret) > 60:
        with pytest.raises(BadRequest, match="public key"):  # random halves never match
            signing.stored_key(secret)
        return
    key = signing.stored_key(secret)
    seed = key.removeprefix(signing.ED25519_TAG)
    if secret.startswith("whsk_"):
        assert len(seed) == signing.ED25519_SEED_BYTES
    else:
        assert signing.SECRET_BYTES_MIN <= len(key) <= signing.SECRET_BYTES_MAX
    if signing.weakness(seed) is None:
        assert signing.key_of(secret) == key
    else:
        with pytest.raises(BadRequest, match="too easy to guess"):
            signing.key_of(secret)


def whsec(key: bytes) -> str:
    return "whsec_" + base64.b64encode(key).decode()


@pytest.mark.parametrize(
    ("key", "why"),
    [
        (bytes(16), "its 16 bytes are all 0x00"),
        (b"a" * 32, "its 32 bytes are all 0x61"),
        (
            b"ab" * 12,
            "its 24 bytes hold only 2 distinct values, and a key of that length needs at least 6",
        ),
        (b"secret" * 8, "its 48 bytes hold only 5 distinct values"),
        (bytes(63) + b"\x01", "its 64 bytes hold only 2 distinct values"),
    ],
)
def test_secrets_of_obviously_weak_keys_are_refused(key: bytes, why: str) -> None:
    with pytest.raises(BadRequest, match="too easy to guess") as refused:
        signing.key_of(whsec(key))
    assert why in refused.value.message
    assert "openssl rand -base64 32" in refused.value.message, "says how to make a good one"
    with pytest.raises(BadRequest, match="all 0x00"):
        signing.key_of("whsec_AAAAAAAAAAAAAAAAAAAAAA==")  # the one issue 50 found taken


def test_random_keys_and_keys_of_hex_or_base64_text_are_taken() -> None:
    """The rule never refuses what generators make: random bytes of any length taken
    (16 to 64), and keys that are hex or base64 text (16 or 64 distinct values)."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for length in range(signing.SECRET_BYTES_MIN, signing.SECRET_BYTES_MAX + 1):
        for _ in range(50):
            for key in (
                rng.randbytes(length),
                rng.randbytes(length).hex()[:length].encode(),
                base64.b64encode(rng.randbytes(length))[:length],
            ):
                assert signing.weakness(key) is None, f"{key!r} refused (seed {seed})"
    for _ in range(1000):
        assert signing.key_of(signing.new_secret())


def test_a_stored_weak_secret_still_signs() -> None:
    """A secret taken before weak keys were refused keeps signing (no endpoint stops)."""
    assert signing.stored_key(whsec(bytes(16))) == bytes(16)


def test_rotations_in_a_loop_keep_the_newest_few_secrets_signing() -> None:
    """A portal user clicking "new secret" 300 times: the current secret and the four
    newest old ones sign (each for its day); the header stays small enough for any
    receiver, and the last secrets handed out all verify."""
    secrets: tuple[ep.Secret, ...] = (ep.Secret(signing.new_secret()),)
    handed_out = []
    for i in range(300):
        new = signing.new_secret()
        handed_out.append(new)
        secrets = ep.rotated(secrets, new, 1_800_000_000_000 + i)
    assert len(secrets) == 1 + limits.endpoint_secrets_retiring_max
    assert [s.value for s in secrets] == handed_out[::-1][: len(secrets)]
    keys = [signing.key_of(s.value) for s in secrets]
    timestamp = now_s()
    header = signing.signature_header(keys, "t:0:1", timestamp, b"body")
    assert len(header) < 512
    headers = {
        "webhook-id": "t:0:1",
        "webhook-timestamp": str(timestamp),
        "webhook-signature": header,
    }
    for secret in handed_out[-5:]:
        Webhook(secret).verify(b"body", headers, json_parse=False)
