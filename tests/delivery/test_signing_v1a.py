"""Ed25519 signatures (Standard Webhooks `v1a`): the receiver holds only the public key.

Verified by an implementation Brook does not share code with: Node's `crypto`, given the
`whpk_` key as a raw 32-byte Ed25519 public key, as a receiver written in JavaScript
would (the Python `standardwebhooks` package has no v1a yet)."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess

import pytest

import brook
from brook.delivery import signing
from brook.errors import BadRequest
from tests.delivery.receivers import Got, Receiver, wait_for
from tests.served import Served

NODE = shutil.which("node")
VERIFY_JS = r"""
const crypto = require("crypto");
const input = JSON.parse(require("fs").readFileSync(0, "utf8"));
const raw = Buffer.from(input.public_key.replace(/^whpk_/, ""), "base64");
// An Ed25519 SubjectPublicKeyInfo: its fixed 12-byte prefix, then the raw key.
const spki = Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]);
const key = crypto.createPublicKey({ key: spki, format: "der", type: "spki" });
const signed = Buffer.concat([
  Buffer.from(`${input.id}.${input.timestamp}.`),
  Buffer.from(input.body_b64, "base64"),
]);
const ok = input.signature.split(" ").some((part) => {
  const [scheme, value] = part.split(",");
  return scheme === "v1a" && crypto.verify(null, signed, key, Buffer.from(value, "base64"));
});
process.stdout.write(ok ? "valid" : "invalid");
"""


def _node_says(public_key: str, got: Got) -> str:
    assert NODE is not None, "node is part of the test machine (Debian's nodejs)"
    given = {
        "public_key": public_key,
        "id": got.headers["webhook-id"],
        "timestamp": got.headers["webhook-timestamp"],
        "signature": got.headers["webhook-signature"],
        "body_b64": base64.b64encode(got.body).decode(),
    }
    done = subprocess.run(
        [NODE, "-e", VERIFY_JS], input=json.dumps(given), capture_output=True, text=True, check=True
    )
    return done.stdout


def test_an_endpoint_signs_with_ed25519_and_a_receiver_verifies_with_the_public_key(
    served: Served,
) -> None:
    with Receiver() as hook, brook.connect(f"http://127.0.0.1:{served.port}") as b:
        made = b.create_endpoint("hook", hook.url, ["orders"], signature="v1a")
        assert made.secret is not None and made.secret.startswith("whsk_")
        assert made.public_key is not None and made.public_key.startswith("whpk_")
        assert b.endpoint("hook").info().public_key == made.public_key  # shown always
        assert b.endpoint("hook").info().secret is None  # the private key: once
        b.topic("orders").append(b'{"paid": true}')
        wait_for(lambda: len(hook.requests()) == 1)
        got = hook.requests()[0]
        assert got.headers["webhook-signature"].startswith("v1a,")
        assert _node_says(made.public_key, got) == "valid"
        assert signing.verify_v1a(
            made.public_key,
            got.headers["webhook-id"],
            int(got.headers["webhook-timestamp"]),
            got.body,
            got.headers["webhook-signature"],
        )
        forged = Got(got.path, dict(got.headers), b'{"paid": false}', got.at)
        assert _node_says(made.public_key, forged) == "invalid"

        # Rotated: both keys sign for a day, and the new public key verifies.
        b.endpoint("hook").rotate_secret()
        rotated = b.endpoint("hook").info().public_key
        assert rotated is not None and rotated != made.public_key
        b.topic("orders").append(b"after")
        wait_for(lambda: len(hook.requests()) == 2)
        after = hook.requests()[1]
        assert after.headers["webhook-signature"].count("v1a,") == 2
        assert _node_says(rotated, after) == "valid"
        assert _node_says(made.public_key, after) == "valid"


def test_a_given_ed25519_key_is_checked_and_keeps_its_scheme() -> None:
    secret = signing.new_secret("v1a")
    seed = base64.b64decode(secret.removeprefix("whsk_"))
    public = signing.public_key(secret)
    assert public is not None
    raw_public = base64.b64decode(public.removeprefix("whpk_"))
    libsodium = "whsk_" + base64.b64encode(seed + raw_public).decode()
    assert signing.public_key(libsodium) == public
    with pytest.raises(BadRequest, match="public key"):
        signing.key_of("whsk_" + base64.b64encode(seed + bytes(32)).decode())
    with pytest.raises(BadRequest, match="32-byte seed"):
        signing.key_of("whsk_" + base64.b64encode(seed[:20]).decode())
    with pytest.raises(BadRequest, match="easy to guess"):
        signing.key_of("whsk_" + base64.b64encode(bytes(32)).decode())
    assert signing.public_key(signing.new_secret()) is None  # an HMAC secret has none
    mixed = signing.signature_header(
        [signing.key_of(secret), signing.key_of(signing.new_secret())], "m1", 1, b"x"
    )
    assert [part.split(",")[0] for part in mixed.split(" ")] == ["v1a", "v1"]
