"""Stream groups (consumer groups): a shared cursor per partition, committed durably.

All consumers of one group in one broker share the group's cursor, so records
are split between them, as consumers polling one group over HTTP are. `poll`
advances the in-memory position; `commit` makes it durable, written atomically
to `groups/<topic>/<group>.json`. After a crash the group resumes from its last
commit: delivery is at-least-once.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import msgspec

from brook import layout, limits, validate
from brook.core import Hooks
from brook.errors import BadRequest, TopicNotFound
from brook.records import Record

if TYPE_CHECKING:
    from brook.core import Core, TopicState


class _Stored(msgspec.Struct):
    offsets: dict[int, int]


_decode = msgspec.json.Decoder(_Stored).decode


class GroupCursor:
    """One group's position (next offset to hand out) and committed offset per partition."""

    def __init__(self, core: Core, state: TopicState, group: str, start: str) -> None:
        self.topic = state.name
        self.group = group
        self.mutex = threading.Lock()
        self.commit_mutex = threading.Lock()
        self.deleted = False
        """Set (holding commit_mutex) when the topic is deleted: nothing more is stored."""
        raw = core.storage.read_all(layout.group_positions(state.name, group))
        committed = _decode(raw).offsets if raw is not None else {}
        self.committed: dict[int, int] = {}
        for partition_log in state.logs:
            p = partition_log.partition
            if p in committed:
                self.committed[p] = committed[p]
            elif start == "latest":
                self.committed[p] = partition_log.durable_offset
            else:
                self.committed[p] = partition_log.start_offset
        self.position = dict(self.committed)
        self.next_partition = 0


class GroupStore:
    """Every group cursor of a broker, loaded on first use. Owns `groups/`."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self._cursors: dict[tuple[str, str], GroupCursor] = {}
        self._mutex = threading.Lock()
        core.register(Hooks("stream groups", on_topic_deleted=self.forget_topic))

    def consumer(self, topic: str, group: str, start: str) -> Consumer:
        validate.group_name(group)
        if start not in ("earliest", "latest"):
            raise BadRequest(f"start must be 'earliest' or 'latest', not {start!r}")
        state = self.core.topic_state(validate.topic_name(topic))
        with self._mutex:
            cursor = self._cursors.get((topic, group))
            if cursor is None:
                cursor = self._cursors[(topic, group)] = GroupCursor(self.core, state, group, start)
        return Consumer(self.core, cursor)

    def forget_topic(self, topic: str) -> None:
        """Writer role: the topic is deleted. Its cursors store nothing more (a
        commit racing the deletion cannot bring positions back for a topic made
        again under the same name), and its stored positions go."""
        with self._mutex:
            gone = [self._cursors.pop(k) for k in [k for k in self._cursors if k[0] == topic]]
        for cursor in gone:
            with cursor.commit_mutex:
                cursor.deleted = True
        self.core.storage.delete_prefix(layout.groups_of(topic))

    def records_waiting(self, topic: str, group: str) -> bool:
        """Whether a poll of the group (loaded already) would find records now."""
        with self._mutex:
            cursor = self._cursors.get((topic, group))
        if cursor is None:
            return False
        state = self.core.topic_state(topic)
        with cursor.mutex:
            return any(p.durable_offset > cursor.position[p.partition] for p in state.logs)

    def stop(self) -> None:
        """No thread of its own."""

    def close(self) -> None:
        """Nothing held open: positions are whole files."""

    def stored(self) -> list[Consumer]:
        """A consumer on every group with stored positions or loaded here, all topics
        (for the dashboard; loading a group reads its positions once). One listing of
        `groups/`: a LIST request on S3, so callers space their calls out."""
        found = set()
        for name in self.core.storage.list(layout.GROUPS):
            if name.endswith(".json"):
                topic, _, file = name.removeprefix(layout.GROUPS).rpartition("/")
                found.add((topic, file.removesuffix(".json")))
        with self._mutex:
            found.update(self._cursors)
        out = []
        for topic, group in sorted(found):
            try:
                out.append(self.consumer(topic, group, "earliest"))
            except (TopicNotFound, BadRequest):
                continue  # its topic went meanwhile, or a stray file
        return out

    def consumers(self) -> list[Consumer]:
        """A consumer on every group loaded so far (for reporting, e.g. lag)."""
        with self._mutex:
            cursors = list(self._cursors.values())
        return [Consumer(self.core, cursor) for cursor in cursors]


class Consumer:
    """`b.consumer(topic, group)`: poll records, commit positions."""

    EMBEDDED_ONLY: frozenset[str] = frozenset()
    """Every method is the remote clients' too."""

    def __init__(self, core: Core, cursor: GroupCursor) -> None:
        self._core = core
        self._cursor = cursor
        self.topic = cursor.topic
        self.group = cursor.group

    def __repr__(self) -> str:
        return f"<Consumer {self.topic} group={self.group}>"

    def poll(
        self,
        max_records: int = limits.poll_records_default,
        timeout: float = limits.poll_wait_s_default,
    ) -> list[Record]:
        """Records after the group's position, waiting up to `timeout` seconds for some.

        Partitions are served in turn so none is starved. Advances the position;
        `commit` makes it durable.
        """
        max_records = min(validate.whole(max_records, "max_records", 1), limits.read_records_max)
        if not isinstance(timeout, int | float) or timeout < 0:
            raise BadRequest(f"timeout must be a number of seconds >= 0, not {timeout!r}")
        monotonic = self._core.clock.monotonic
        deadline = monotonic() + timeout
        while True:
            records = self._take(max_records)
            remaining = deadline - monotonic()
            if records or remaining <= 0 or self._core.closed:
                return records
            self._core.wait_for_records(self._has_new, remaining)

    def _has_new(self) -> bool:
        """True when some partition has durable records after the group's position."""
        state = self._core.topic_state(self.topic)
        return any(p.durable_offset > self._cursor.position[p.partition] for p in state.logs)

    def _take(self, max_records: int) -> list[Record]:
        cursor = self._cursor
        state = self._core.topic_state(self.topic)
        logs = state.logs
        records: list[Record] = []
        with cursor.mutex:
            for step in range(len(logs)):
                partition_log = logs[(cursor.next_partition + step) % len(logs)]
                want = max_records - len(records)
                if want <= 0:
                    break
                got = partition_log.read(cursor.position[partition_log.partition], want)
                if got:
                    records.extend(got)
                    cursor.position[partition_log.partition] = got[-1].offset + 1
            cursor.next_partition = (cursor.next_partition + 1) % len(logs)
        return records

    def commit(self, offsets: dict[int, int] | None = None) -> None:
        """Durably store the group's position: everything polled so far is done.

        With `offsets` ({partition: next offset}), commit those instead for the
        partitions named (the position poll continues from is not moved); an
        offset past the partition's end is a BadRequest, since the group would
        skip records not yet written. Raises PartitionNotFound, StorageError.
        """
        cursor = self._cursor
        if offsets is not None:
            state = self._core.topic_state(self.topic)
            for partition, offset in offsets.items():
                _within(state, partition, offset)
        with cursor.commit_mutex:
            if cursor.deleted:
                raise TopicNotFound(f"topic {self.topic} was deleted")
            with cursor.mutex:
                offsets = (
                    {**cursor.committed, **offsets}
                    if offsets is not None
                    else dict(cursor.position)
                )
            self._core.storage.write_atomic(
                layout.group_positions(self.topic, self.group),
                msgspec.json.encode(_Stored(offsets)),
            )
            with cursor.mutex:
                cursor.committed = offsets

    def seek(self, partition: int, offset: int) -> None:
        """Move the group's position on `partition`; the next poll starts there.
        At most the partition's end (BadRequest past it); PartitionNotFound."""
        partition, offset = _within(self._core.topic_state(self.topic), partition, offset)
        with self._cursor.mutex:
            self._cursor.position[partition] = offset

    def position(self) -> dict[int, int]:
        """The next offset poll will return, per partition."""
        with self._cursor.mutex:
            return dict(self._cursor.position)

    def committed(self) -> dict[int, int]:
        with self._cursor.mutex:
            return dict(self._cursor.committed)

    def lag(self) -> dict[int, int]:
        """Records not yet committed by the group, per partition."""
        state = self._core.topic_state(self.topic)
        with self._cursor.mutex:
            return {
                p.partition: max(
                    0, p.durable_offset - max(self._cursor.committed[p.partition], p.start_offset)
                )
                for p in state.logs
            }

    def close(self) -> None:
        """Consumers hold no resources of their own; provided for symmetry."""


def _within(state: TopicState, partition: Any, offset: Any) -> tuple[int, int]:
    """(partition, offset) checked: a partition of the topic, an offset at most its end."""
    partition = validate.whole(partition, "partition")
    partition_log = state.log(partition)
    offset = validate.whole(offset, f"offset of partition {partition}")
    end = partition_log.durable_offset
    if offset > end:
        raise BadRequest(
            f"offset {offset} is past the end of partition {partition} of {state.name} "
            f"(its next offset is {end}): the group would skip records not yet written"
        )
    return partition, offset
