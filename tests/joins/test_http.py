"""/v1/joins over HTTP, as another language's client uses it: bad requests are 4xx
with a message, never a 5xx, and a key limited to some topics reaches only joins on them."""

from __future__ import annotations

from pathlib import Path

from brook.config import key_stanza
from tests.served import Served

ADMIN = "key-of-the-joins-admin"
LIMITED = "key-limited-to-orders-only"


def test_bad_join_requests_are_answered_4xx_with_a_message(tmp_path: Path) -> None:
    served = Served(tmp_path / "data")
    try:
        status, _ = served.request("POST", "/v1/topics/t/records", {"records": [{"value": "m"}]})
        assert status == 200
        member = {"topic": "t", "group": "g", "partition": 0, "offset": 0}
        for body, want, words in [
            ({"joins": [{"id": "a", "members": [{**member, "partition": 7}]}]}, 404, "no partition 7"),
            ({"joins": [{"id": "a", "members": [{**member, "offset": 5}]}]}, 400, "past the end"),
            ({"joins": [{"id": "a", "members": [member]}] * 2}, 400, "named twice"),
            ({"joins": [{"id": "a", "members": [{"topic": "t", "group": "g"}]}]}, 400, "or join"),
            ({"joins": []}, 400, "invalid body"),
            ({"joins": [{"id": "b", "members": [{"topic": "t", "group": "g", "join": "zz"}]}]}, 400, "names no join"),
        ]:  # fmt: skip
            status, answer = served.request("POST", "/v1/joins", body)
            assert status == want and words in answer["error"]["message"], (body, answer)
        for path, want in [
            ("/v1/joins/nope", 404),
            ("/v1/joins/nope?wait_ms=abc", 400),
            ("/v1/joins/a%20b", 400),
            ("/v1/joins/" + "x" * 201, 400),
        ]:
            assert served.request("GET", path)[0] == want, path
    finally:
        served.close()


def test_a_key_limited_to_some_topics_reaches_only_their_joins(tmp_path: Path) -> None:
    config = tmp_path / "brook.toml"
    config.write_text(
        key_stanza("ops", ADMIN, ["admin", "produce", "consume"], ["*"])
        + key_stanza("orders-app", LIMITED, ["produce", "consume"], ["orders*"])
    )
    served = Served(tmp_path / "data", config=config)
    admin = {"authorization": f"Bearer {ADMIN}"}
    limited = {"authorization": f"Bearer {LIMITED}"}
    try:
        for topic in ("orders", "billing"):
            status, _ = served.request(
                "POST", f"/v1/topics/{topic}/records", {"records": [{"value": "m"}]}, admin
            )
            assert status == 200
        theirs = {"topic": "orders", "group": "g", "partition": 0, "offset": 0}
        other = {**theirs, "topic": "billing"}
        then = {"topic": "orders.done", "group": "g", "value": "cb"}
        status, _ = served.request(
            "POST", "/v1/joins", {"joins": [{"id": "x", "members": [other], "then": then}]}, limited
        )
        assert status == 403
        elsewhere = {**then, "topic": "billing.done"}
        status, _ = served.request(
            "POST",
            "/v1/joins",
            {"joins": [{"id": "y", "members": [theirs], "then": elsewhere}]},
            limited,
        )
        assert status == 403
        status, _ = served.request(
            "POST",
            "/v1/joins",
            {"joins": [{"id": "z", "members": [theirs], "then": then}]},
            limited,
        )
        assert status == 200
        assert served.request("GET", "/v1/joins/z", None, limited)[0] == 200
        status, _ = served.request(
            "POST",
            "/v1/joins",
            {"joins": [{"id": "w", "members": [other], "then": elsewhere}]},
            admin,
        )
        assert status == 200
        assert served.request("GET", "/v1/joins/w", None, limited)[0] == 403
    finally:
        served.close()
