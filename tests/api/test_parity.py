"""The embedded broker, `brook.connect` and `brook.connect_async` are one API: every
handle has the same public methods with the same parameters (names, kinds, defaults
and types), and the async client's are coroutines."""

from __future__ import annotations

import inspect
import re
from typing import Any

import pytest

from brook.broker import Broker
from brook.client.aio import AsyncBroker
from brook.client.aio_handles import AsyncConsumer, AsyncEndpoint, AsyncQueue, AsyncTopic
from brook.client.sync import RemoteBroker
from brook.client.sync_handles import RemoteConsumer, RemoteEndpoint, RemoteQueue, RemoteTopic
from brook.delivery.handle import Endpoint
from brook.groups.consumer import Consumer
from brook.queue.handle import Queue
from brook.topic import Topic

HANDLES = [
    (Broker, RemoteBroker, AsyncBroker),
    (Topic, RemoteTopic, AsyncTopic),
    (Consumer, RemoteConsumer, AsyncConsumer),
    (Queue, RemoteQueue, AsyncQueue),
    (Endpoint, RemoteEndpoint, AsyncEndpoint),
]
SYNC_IN_ASYNC = {"topic"}
"""AsyncBroker.topic makes a handle without asking the server, so it is not a coroutine."""


def methods(cls: type) -> dict[str, Any]:
    return {
        name: getattr(cls, name)
        for name in dir(cls)
        if not name.startswith("_") and inspect.isfunction(getattr(cls, name))
    }


def shape(function: Any) -> tuple[list[tuple[str, Any, Any, str]], str]:
    """A method's parameters and return type, with Remote/Async class prefixes dropped."""
    signature = inspect.signature(function)

    def plain(annotation: Any) -> str:
        return re.sub(r"\b(Remote|Async)(?=[A-Z])", "", str(annotation))

    parameters = [
        (p.name, p.kind, p.default, plain(p.annotation))
        for p in signature.parameters.values()
        if p.name != "self"
    ]
    return parameters, plain(signature.return_annotation)


@pytest.mark.parametrize("handles", HANDLES, ids=lambda h: h[0].__name__)
def test_every_handle_has_the_same_methods_everywhere(handles: tuple[type, type, type]) -> None:
    embedded, remote, asynchronous = (methods(cls) for cls in handles)
    # What the shells in the broker's process read (read models, the loop's bridge):
    # declared, so nothing else can slip out of the shared API unnoticed.
    only_here = handles[0].EMBEDDED_ONLY  # type: ignore[attr-defined]
    assert only_here <= set(embedded)
    assert not only_here & (set(remote) | set(asynchronous))
    embedded = {name: f for name, f in embedded.items() if name not in only_here}
    assert sorted(embedded) == sorted(remote) == sorted(asynchronous)
    for name, function in embedded.items():
        assert shape(function) == shape(remote[name]), f"{handles[1].__name__}.{name}"
        assert shape(function) == shape(asynchronous[name]), f"{handles[2].__name__}.{name}"
        coroutine = inspect.iscoroutinefunction(asynchronous[name])
        assert coroutine != (name in SYNC_IN_ASYNC and handles[0] is Broker), (
            f"{handles[2].__name__}.{name} should {'not ' if not coroutine else ''}be a coroutine"
        )
