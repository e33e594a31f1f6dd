"""Idempotent produce in a commit round: which records of the round's requests are
appended, and what each request is answered with (SPEC §1, "Idempotent produce").

The committer makes one Plan per partition batch of a round, writes its pieces,
and once the batch is durable (or failed) lets the plan answer the requests and
remember the keys. The rule, record by record: a key already durable within the
window is answered with the original's ack; a key written but not yet durable
waits for that write's outcome; a key seen earlier in the round shares that
record; anything else is appended.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from brook.codec.batch import ClientBatches, Columns
from brook.errors import BrookError
from brook.idempotency import IdempotencyIndex
from brook.records import Ack


class PlannedLog(Protocol):
    @property
    def topic(self) -> str: ...


class PlannedRequest(Protocol):
    """A caller's records (committer.AppendRequest), answered by the plan."""

    acks: list[Ack] | None
    error: BrookError | None

    @property
    def columns(self) -> Columns | ClientBatches: ...


class PlannedBatch(Protocol):
    """What a plan needs of the committer's batch: its partition's log, its requests,
    and once settled, its acks or its error."""

    @property
    def log(self) -> PlannedLog: ...

    @property
    def group(self) -> Sequence[PlannedRequest]: ...

    @property
    def acks_by_slot(self) -> list[Ack]: ...

    @property
    def error(self) -> BrookError | None: ...


Inflight = dict[tuple[str, bytes], tuple[PlannedBatch, int]]
"""(topic, key) -> the batch written but not yet durable that holds it, and where."""


class Plan:
    """Which records of a round's requests to append, after idempotency de-duplication.

    A record whose idempotency key is already durable within the window is not
    appended; it is answered with the original's ack. A record whose key was
    written earlier but is not yet durable waits for that write's outcome
    (its ack if it becomes durable, its error if not).
    """

    def __init__(
        self,
        index: IdempotencyIndex,
        inflight: Inflight,
        batch: PlannedBatch,
    ) -> None:
        self.batch = batch
        self.topic = batch.log.topic
        group = batch.group
        self.slots: list[range | list[int | Ack | tuple[PlannedBatch, int]]] = []
        """Per request: indexes into this batch, durable acks, or (other batch, index)."""
        if all(r.columns.idempotency is None for r in group):
            self.idempotency: list[bytes | None] | None = None
            self.pieces = pieces([r.columns for r in group])
            start = 0
            for request in group:
                self.slots.append(range(start, start + len(request.columns)))
                start += len(request.columns)
        else:
            columns = self._deduplicated(index, inflight, group)
            self.idempotency = columns.idempotency
            self.pieces = [columns]
        self.count = sum(map(len, self.pieces))
        self.bytes = sum(piece.bytes for piece in self.pieces)

    def _deduplicated(
        self,
        index: IdempotencyIndex,
        inflight: Inflight,
        group: Sequence[PlannedRequest],
    ) -> Columns:
        """The records to append once repeats of known idempotency keys are taken out."""
        columns = Columns([], [], [], [])
        values, keys_out, headers_out, idem_out = (
            columns.values,
            columns.keys,
            columns.headers,
            columns.idempotency,
        )
        assert keys_out is not None and headers_out is not None and idem_out is not None
        seen: dict[bytes, int] = {}
        for request in group:
            c = (
                request.columns
                if isinstance(request.columns, Columns)
                else request.columns.columns()
            )
            n = len(c)
            keys, headers, idem = (
                c.keys or [None] * n,
                c.headers or [None] * n,
                c.idempotency or [None] * n,
            )
            slots: list[int | Ack | tuple[PlannedBatch, int]] = []
            # Records without a key are copied a run at a time (a staged chunk carries
            # one key, on its last record): only the keyed ones are looked up.
            start = 0
            for i in [i for i, key in enumerate(idem) if key is not None] + [n]:
                if i > start:
                    base = len(values)
                    slots.extend(range(base, base + i - start))
                    values.extend(c.values[start:i])
                    keys_out.extend(keys[start:i])
                    headers_out.extend(headers[start:i])
                    idem_out.extend(idem[start:i])
                start = i + 1
                if i == n:
                    break
                key = idem[i]
                assert key is not None
                known = index.get(self.topic, key)
                if known is not None:
                    slots.append(known)
                    continue
                pending = inflight.get((self.topic, key))
                if pending is not None:
                    slots.append(pending)
                    continue
                if key in seen:
                    slots.append(seen[key])
                    continue
                seen[key] = len(values)
                slots.append(len(values))
                values.append(c.values[i])
                keys_out.append(keys[i])
                headers_out.append(headers[i])
                idem_out.append(key)
            self.slots.append(slots)
        for name in ("keys", "headers", "idempotency"):
            if all(v is None for v in getattr(columns, name)):
                setattr(columns, name, None)
        columns.bytes = sum(map(len, columns.values))
        return columns

    def remember_inflight(self, inflight: Inflight) -> None:
        if self.idempotency is not None:
            for i, key in enumerate(self.idempotency):
                if key is not None:
                    inflight[(self.topic, key)] = (self.batch, i)

    def forget_inflight(self, inflight: Inflight) -> None:
        if self.idempotency is not None:
            for key in self.idempotency:
                if key is not None and inflight.get((self.topic, key), (None,))[0] is self.batch:
                    inflight.pop((self.topic, key), None)

    def resolve(self, index: IdempotencyIndex) -> None:
        """Answer each request once this batch is durable; remember its keys.

        A request holding a duplicate of an earlier batch that failed gets that
        batch's error; the others get their acks.
        """
        acks = self.batch.acks_by_slot
        for request, slots in zip(self.batch.group, self.slots, strict=True):
            if isinstance(slots, range):
                request.acks = acks[slots.start : slots.stop]
                continue
            resolved: list[Ack] = []
            for slot in slots:
                if isinstance(slot, int):
                    resolved.append(acks[slot])
                elif isinstance(slot, Ack):
                    resolved.append(slot)
                else:
                    other, i = slot
                    if other.error is not None:
                        request.error = other.error
                        break
                    resolved.append(other.acks_by_slot[i])
            else:
                request.acks = resolved
        if self.idempotency is not None:
            for i, key in enumerate(self.idempotency):
                if key is not None:
                    index.add(self.topic, key, acks[i])


def pieces(parts: list[Columns | ClientBatches]) -> list[Columns | ClientBatches]:
    """Neighbouring Columns joined into one batch; a client's batches kept as they are."""
    pieces: list[Columns | ClientBatches] = []
    run: list[Columns] = []
    for part in parts:
        if isinstance(part, Columns):
            run.append(part)
            continue
        if run:
            pieces.append(Columns.concat(run))
            run = []
        pieces.append(part)
    if run:
        pieces.append(Columns.concat(run))
    return pieces
