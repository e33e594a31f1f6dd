"""Services hook into the core through `Core.register(Hooks(...))`: they hear of commit
rounds, topics made and deleted, run at maintenance, and stop once unregistered."""

from __future__ import annotations

import brook
from brook.core import Hooks


def test_a_service_hears_what_it_registered_for_until_it_unregisters() -> None:
    heard: list[tuple[str, object]] = []
    with brook.open("memory://") as b:
        core = b.core
        hooks = core.register(
            Hooks(
                "listener",
                on_round=lambda topics: heard.append(("round", topics)),
                on_topic_created=lambda name: heard.append(("created", name)),
                on_topic_deleted=lambda name: heard.append(("deleted", name)),
                maintain=lambda: heard.append(("maintain", None)),
            )
        )
        b.topic("t").append(b"x")
        b.delete_topic("t")
        core.run_maintenance()
        assert ("created", "t") in heard and ("deleted", "t") in heard
        assert any(kind == "round" and "t" in topics for kind, topics in heard)
        assert ("maintain", None) in heard
        core.unregister(hooks)
        heard.clear()
        b.topic("u").append(b"y")
        core.run_maintenance()
        assert heard == []


def test_a_failing_maintenance_hook_is_reported_and_the_others_still_run() -> None:
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("out of luck")

    with brook.open("memory://") as b:
        b.core.register(Hooks("broken", maintain=broken))
        b.core.register(Hooks("after", maintain=lambda: ran.append("after")))
        b.core.run_maintenance()
        assert ran == ["after"]
        failing = [(f.loop, f.task) for f in b.failing()]
        assert ("maintenance", "broken") in failing
