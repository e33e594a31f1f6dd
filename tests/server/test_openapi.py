"""GET /openapi.json describes every endpoint, and no generated input gets a 5xx."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, positive_data_acceptance

from brook.server.openapi import OPERATIONS
from tests.served import Served


def test_the_description_lists_exactly_the_served_routes(served: Served) -> None:
    status, document = served.request("GET", "/openapi.json")
    assert status == 200 and document["openapi"].startswith("3.")
    described = {
        (method.upper(), path) for path, ops in document["paths"].items() for method in ops
    }
    assert described == set(OPERATIONS)
    for path, ops in document["paths"].items():
        for method in ops:
            status, answer = served.request(
                method.upper(), path.replace("{topic}", "t").replace("{group}", "g"), b""
            )
            # 404 for a missing topic or endpoint is fine; "not_found" is a missing route.
            code = answer["error"]["code"] if isinstance(answer, dict) and "error" in answer else ""
            assert status != 405 and code != "not_found", (
                f"{method.upper()} {path} is described but not served"
            )


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = Path(tmp_path_factory.mktemp("schemathesis"))
    # Private networks allowed: whether a URL's address may be called is the broker's
    # setting, stated in the description, not something a schema can say.
    (folder / "brook.toml").write_text("delivery_allow_private_networks = true\n")
    server = Served(folder / "data", config=folder / "brook.toml")
    yield server
    server.close()


@pytest.fixture(scope="module")
def api(live: Served) -> Any:
    return schemathesis.openapi.from_url(f"http://127.0.0.1:{live.port}/openapi.json")


# schemathesis leaves out the schema's own URL; the test above covers /openapi.json.
FUZZED = sorted(key for key in OPERATIONS if key[1] != "/openapi.json")


@pytest.mark.parametrize(("method", "path"), FUZZED)
def test_no_generated_request_gets_a_server_error_or_a_refusal_the_document_does_not_state(
    api: Any, method: str, path: str
) -> None:
    """Every request the document allows is served (2xx) or refused for a reason a
    schema-valid request may meet: 404 (no such topic), 409 (a state that conflicts),
    or a 400 for one of the operation's stated relations. Never a 5xx."""
    relations = [re.compile(pattern) for _, pattern in OPERATIONS[(method, path)].relations]
    # schemathesis's own pytest plugin does not run under pytest 9 yet; its strategies do.
    operation = next(
        op.ok()
        for op in api.get_all_operations()
        if op.ok().method.upper() == method and op.ok().path == path
    )

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(operation.as_strategy())
    def check(case: Any) -> None:
        # Keep long-polls short (a wait may be a whole float too: 10008.0 waited 10 s).
        for asked in (case.query, case.body):
            if isinstance(asked, dict) and isinstance(asked.get("wait_ms"), int | float):
                asked["wait_ms"] = min(asked["wait_ms"], 50)
        response = case.call()
        try:
            case.validate_response(response, checks=[not_a_server_error, positive_data_acceptance])
        except BaseException:
            if response.status_code == 400 and any(r.search(response.text) for r in relations):
                return  # a rule the description states
            raise

    check()
