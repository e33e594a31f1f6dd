"""The HTTP endpoints of staged writes (docs/PROTOCOL.md, "Staged writes").

Staging writes a file and publishing waits for many group commits, so both run
on the queue endpoints' pool of threads, never on the event loop. Every call is
safe to resend: a chunk staged again replaces itself, a publish repeated or
replayed appends nothing more, a drop repeated drops nothing more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brook import wire
from brook.errors import UnsupportedMediaType
from brook.operations import OPERATIONS
from brook.server import adapter
from brook.server.http import Request, Response, json_response, media_type
from brook.server.query import whole
from brook.wire import BATCH_TYPE, JSON_TYPE, decode_request

if TYPE_CHECKING:
    from brook.server.api import Api


class StagingEndpoints:
    def __init__(self, api: Api) -> None:
        self.api = api
        api.router.serve(OPERATIONS["stage"], self.stage)
        api.router.serve(OPERATIONS["publish"], self.publish)
        api.router.serve(OPERATIONS["drop_staged"], self.drop)

    async def stage(
        self, request: Request, topic: str, writer: str, seq: str, part: str, chunk: str
    ) -> Response:
        content_type = media_type(request)
        records: wire.Columns | bytes
        if content_type == BATCH_TYPE:
            records = request.body
        elif content_type == JSON_TYPE:
            asked = decode_request(request.body, wire.StagedRecordsIn)
            records = asked.columns(self.api.record_bytes_max)
        else:
            raise UnsupportedMediaType(f"stage records as {BATCH_TYPE} or {JSON_TYPE}")
        partition = adapter.arguments(OPERATIONS["stage"].query, request.query)["partition"]
        staged = await self.api.run(
            "blocking",
            self.api.broker.topic(topic).stage_checked,
            writer,
            whole(seq, "seq"),
            part,
            whole(chunk, "chunk"),
            records,
            partition,
        )
        return json_response(wire.Staged(staged=staged))

    async def publish(self, request: Request, topic: str, writer: str, seq: str) -> Response:
        parts = decode_request(request.body, wire.PublishIn).parts
        published = await self.api.run(
            "long", self.api.broker.topic(topic).publish, writer, whole(seq, "seq"), parts
        )
        return json_response(published)

    async def drop(self, request: Request, topic: str, writer: str, seq: str) -> Response:
        dropped = await self.api.run(
            "blocking", self.api.broker.topic(topic).drop_staged, writer, whole(seq, "seq")
        )
        return json_response(wire.Dropped(dropped=dropped))
