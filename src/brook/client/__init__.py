"""Brook over HTTP: the same API as the embedded broker (client/sync.py, client/aio.py)."""

from brook.client.aio import AsyncBroker
from brook.client.sync import RemoteBroker

__all__ = ["AsyncBroker", "RemoteBroker"]
