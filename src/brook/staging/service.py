"""Staged writes: many tasks stage records in parts; one call publishes them once.

Why it exists: a sink that tags each record with (task, row position) is
exactly-once only if a replay puts the same rows in the same tasks in the same
order, which Spark does not promise after a shuffle. Here a task's rows are
staged under an id of its own, the writer (a Spark query, or one batch write)
publishes a transaction (`seq`, a micro-batch) by naming the parts its
successful tasks staged, and the broker appends exactly those, once:

1. The first publish of a `seq` writes the writer's state as `publishing`
   (the parts, and each partition's end offset) before appending anything.
2. The chunks are appended; each chunk's records in one partition form one
   write whose last record carries a marker key (plan.marker).
3. The state is rewritten as `done`, and the staged chunks are deleted.

A publish of a `seq` found `publishing` (the broker or the caller died during
step 2) resumes from the state: it appends only the pieces whose marker is not
in the partition past its recorded end offset, whatever parts the caller names
now. A publish of a `seq` already done, or older than the last, appends
nothing. Staging for such a `seq` is refused, so a replay costs no copy.
Layout, format and limits: docs/FORMAT.md ("Staged writes"); the promise:
docs/GUARANTEES.md ("Staged writes").
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from brook import layout, limits, validate
from brook.codec.batch import Columns, encode_batch
from brook.commit import AppendRequest, Waiter
from brook.core import Hooks
from brook.errors import (
    BadRequest,
    BrookError,
    CorruptData,
    NotStaged,
    PartitionNotFound,
    ReadOnly,
    StorageError,
    TopicNotFound,
)
from brook.records import Published
from brook.staging import plan

if TYPE_CHECKING:
    from brook.core import Core, TopicState

log = logging.getLogger("brook.staging")

MARKER_PREFIX = b"brook-staged:"


class StagingService:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.storage = core.storage
        self.ttl_ms = limits.staging_ttl_ms_default
        self._states: dict[tuple[str, str], plan.WriterState | None] = {}
        """What each writer last published, as stored (only this broker writes them)."""
        self._mutex = threading.Lock()
        self._writers: dict[tuple[str, str], threading.Lock] = {}
        """One lock per writer: its publishes, aborts and sweeping never overlap."""
        self._unclaimed: dict[str, int] = {}
        """Staged `seq` folders no state claims yet -> when the sweep first saw them."""
        self._stop = threading.Event()
        core.register(Hooks("staging", on_topic_deleted=self.forget_topic))
        self._thread: threading.Thread | None = None
        if not core.read_only:
            self._thread = core.supervisor.start("staging", self._step, self._stop)

    # ------------------------------------------------------------ the API

    def stage(
        self,
        topic: str,
        writer: str,
        seq: int,
        part: str,
        chunk: int,
        records: Columns | bytes,
        partition: int | None = None,
    ) -> bool:
        """Keep `records` (checked Columns, or a client's binary batches) durably as
        chunk `chunk` of `part` for the publish of `seq`; staging a chunk again
        replaces it. The topic is created with defaults if new, as by an append.
        False, and nothing is kept, when `seq` was published already (or is being
        published). Raises BadRequest, PartitionNotFound, ReadOnly, TopicNotFound (the
        topic was deleted meanwhile), StorageError."""
        self._check_writable()
        topic, writer, part = self._ids(topic, writer, part)
        seq = validate.staging_seq(seq)
        chunk = validate.whole(chunk, "chunk", 0, limits.staging_chunks_per_part_max - 1)
        limit = self.core.record_bytes_max
        checked = (
            validate.batch_body(records, record_bytes_max=limit)
            if isinstance(records, bytes)
            else records
        )
        if checked.idempotency is not None:
            raise BadRequest("staged records cannot carry idempotency keys")
        if isinstance(records, bytes):
            body = records  # stored as the client sent it
        else:
            body = b"".join(encode_batch(0, 0, records)) if len(records) else b""
        topic_state = self.core.topic_state(topic, create=True)
        if partition is not None:
            validate.whole(partition, "partition")
            if partition >= topic_state.config.partitions:
                raise PartitionNotFound(f"topic {topic} has no partition {partition}")
        name = layout.staging_chunk(topic, writer, seq, part, chunk)
        # The writer's lock: its publishes, aborts and the sweep delete staged folders,
        # and a chunk written into one as it goes failed with ENOENT (a 503 for a
        # client's timing alone); now a chunk is staged before a publish or refused after.
        with self._writer_lock(topic, writer):
            if plan.decide(self._state(topic, writer), seq) != "new":
                return False
            with self._unless_deleted(topic):
                self.storage.write_atomic(name, plan.encode_chunk(body, partition))
        return True

    def publish(self, topic: str, writer: str, seq: int, parts: dict[str, int]) -> Published:
        """Append the records staged in `parts` (part -> chunks) for `seq`, once: see
        the module's docstring. Returns once they are all durable. Raises NotStaged
        (a part or chunk that was never staged: nothing is appended), ReadOnly,
        TopicNotFound (the topic was deleted meanwhile), StorageError (try again: the
        publish resumes)."""
        self._check_writable()
        topic, writer = self._ids(topic, writer)
        seq = validate.staging_seq(seq)
        parts = validate.staged_parts(parts)
        with self._writer_lock(topic, writer), self._unless_deleted(topic):
            state = self._state(topic, writer)
            decision = plan.decide(state, seq)
            if decision == "stale":
                return Published(seq, None, replayed=True)
            if decision == "done":
                assert state is not None
                return Published(seq, state.records, replayed=True)
            if state is not None and state.phase == "publishing" and decision == "new":
                self._finish(topic, writer, state)  # an older publish never finished: first
            if decision == "resume":
                assert state is not None
                return self._finish(topic, writer, state)
            self._check_staged(topic, writer, seq, parts)
            topic_state = self.core.topic_state(topic, create=True)
            begun = plan.WriterState(
                seq=seq,
                phase="publishing",
                parts=parts,
                starts={str(p.partition): p.durable_offset for p in topic_state.logs},
                records=0,
                updated_ms=self.core.now_ms(),
            )
            self._save(topic, writer, begun)
            return self._finish(topic, writer, begun, resumed=False)

    def abort(self, topic: str, writer: str, seq: int) -> bool:
        """Drop what was staged for `seq`; False (nothing dropped) if it was published
        or is being published. Raises BadRequest, ReadOnly, StorageError."""
        self._check_writable()
        topic, writer = self._ids(topic, writer)
        seq = validate.staging_seq(seq)
        with self._writer_lock(topic, writer), self._unless_deleted(topic):
            if plan.decide(self._state(topic, writer), seq) != "new":
                return False
            self.storage.delete_prefix(layout.staging_seq(topic, writer, seq))
            return True

    @contextlib.contextmanager
    def _unless_deleted(self, topic: str) -> Iterator[None]:
        """A storage error in the staged work of a topic deleted meanwhile is the
        deletion's doing (it deletes `staging/<topic>/` under the work's feet):
        TopicNotFound, which says so, not a 503 for a client's timing alone."""
        try:
            yield
        except (StorageError, CorruptData):  # (its chunks gone under a publish)
            if not self.core.has_topic(topic):
                raise TopicNotFound(
                    f"topic {topic} was deleted meanwhile; nothing was staged or published"
                ) from None
            raise

    def forget_topic(self, topic: str) -> None:
        """The topic was deleted: so is what was staged for it, and its writers."""
        self.storage.delete_prefix(layout.staging_of(topic))
        with self._mutex:
            for key in [k for k in self._states if k[0] == topic]:
                del self._states[key]

    # ------------------------------------------------------------ publishing

    def _finish(
        self, topic: str, writer: str, state: plan.WriterState, resumed: bool = True
    ) -> Published:
        """Append what `state` names and is not appended yet, then mark it done."""
        topic_state = self.core.topic_state(topic, create=True)
        present: set[bytes] = set()
        if resumed:
            log.info("resuming the publish of %s seq %d to topic %s", writer, state.seq, topic)
            for p, start in state.starts.items():
                partition = int(p)
                if partition < len(topic_state.logs):
                    present.update(
                        key
                        for key, _, _ in topic_state.logs[partition].scan_idempotency(
                            from_offset=start
                        )
                        if key.startswith(MARKER_PREFIX)
                    )
        records = self._copy(topic_state, writer, state, present)
        done = plan.WriterState(
            seq=state.seq,
            phase="done",
            parts={},
            starts={},
            records=records,
            updated_ms=self.core.now_ms(),
        )
        self._save(topic, writer, done)
        self.storage.delete_prefix(layout.staging_seq(topic, writer, state.seq))
        return Published(state.seq, records, replayed=resumed)

    def _copy(
        self, topic_state: TopicState, writer: str, state: plan.WriterState, present: set[bytes]
    ) -> int:
        """Append every piece not `present`, a bounded number of bytes in flight at
        once; returns how many records the publish holds in all."""
        topic = topic_state.name
        partitions = topic_state.config.partitions
        waiting: deque[tuple[AppendRequest, Waiter, int]] = deque()
        in_flight = records = 0
        error: BrookError | None = None

        def settle_oldest() -> None:
            nonlocal in_flight, error
            request, waiter, size = waiting.popleft()
            waiter.wait()
            in_flight -= size
            if request.error is not None and error is None:
                error = request.error

        for part, chunks in sorted(state.parts.items()):
            for chunk in range(chunks):
                name = layout.staging_chunk(topic, writer, state.seq, part, chunk)
                raw = self.storage.read_all(name)
                if raw is None:
                    raise CorruptData(
                        f"{name} is gone although the publish of seq {state.seq} names it"
                    )
                partition, columns = plan.decode_chunk(raw, name)
                records += len(columns)
                for p, indexes in plan.route(columns, partitions, partition, name.encode()):
                    key = plan.marker(writer, state.seq, part, chunk, p)
                    if key in present:
                        continue
                    piece = plan.piece(columns, indexes, key)
                    waiter = Waiter()
                    request = AppendRequest(topic_state.logs[p], piece, waiter)
                    self.core.submit(request)
                    waiting.append((request, waiter, piece.bytes))
                    in_flight += piece.bytes
                while in_flight > limits.staging_publish_bytes_in_flight and waiting:
                    settle_oldest()
        while waiting:
            settle_oldest()
        if error is not None:
            raise error
        return records

    def _check_staged(self, topic: str, writer: str, seq: int, parts: dict[str, int]) -> None:
        stored = set(self.storage.list(layout.staging_seq(topic, writer, seq)))
        for part, chunks in sorted(parts.items()):
            for chunk in range(chunks):
                if layout.staging_chunk(topic, writer, seq, part, chunk) not in stored:
                    raise NotStaged(
                        f"part {part} chunk {chunk} of seq {seq} was never staged "
                        f"(or was dropped); nothing was published"
                    )

    # ------------------------------------------------------------ state

    def _state(self, topic: str, writer: str) -> plan.WriterState | None:
        key = (topic, writer)
        with self._mutex:
            if key in self._states:
                return self._states[key]
        name = layout.staging_state(topic, writer)
        raw = self.storage.read_all(name)
        state = None if raw is None else plan.decode_state(raw, name)
        with self._mutex:
            self._states[key] = state
        return state

    def _save(self, topic: str, writer: str, state: plan.WriterState) -> None:
        key = (topic, writer)
        with self._mutex:
            self._states.pop(key, None)  # unknown until the write is known to be durable
        self.storage.write_atomic(layout.staging_state(topic, writer), plan.encode_state(state))
        with self._mutex:
            self._states[key] = state

    def _writer_lock(self, topic: str, writer: str) -> threading.Lock:
        with self._mutex:
            return self._writers.setdefault((topic, writer), threading.Lock())

    def _ids(self, topic: str, writer: str, part: str | None = None) -> tuple[str, ...]:
        validate.topic_name(topic)
        validate.staging_id(writer, "writer")
        if part is None:
            return topic, writer
        return topic, writer, validate.staging_id(part, "part")

    def _check_writable(self) -> None:
        self.core.check_open()
        if self.core.read_only:
            raise ReadOnly("cannot stage or publish: this broker was opened read-only")

    # ------------------------------------------------------------ the thread

    def _step(self) -> float:
        """One pass of the staging loop: finish publishes a crash interrupted, then
        sweep what was staged and never published; again after `staging_sweep_ms`."""
        with contextlib.suppress(TopicNotFound):  # deleted meanwhile: swept next time
            self.sweep()
        return limits.staging_sweep_ms / 1000

    def sweep(self) -> None:
        """Finish every interrupted publish; delete writers idle for the TTL and staged
        folders that no publish claimed for the TTL."""
        now = self.core.now_ms()
        writers: dict[tuple[str, str], set[int]] = {}
        for name in self.storage.list(layout.STAGING):
            parts = name[len(layout.STAGING) :].split("/")
            if len(parts) < 3:
                continue
            folders = writers.setdefault((parts[0], parts[1]), set())
            if parts[2] != layout.STAGING_STATE_FILE and parts[2].isdigit():
                folders.add(int(parts[2]))
        seen = set()
        for (topic, writer), folders in sorted(writers.items()):
            if self._stop.is_set():
                return
            if not self.core.has_topic(topic):
                self.forget_topic(topic)
                continue
            with self._writer_lock(topic, writer):
                state = self._state(topic, writer)
                if state is not None and state.phase == "publishing":
                    # Reported (health, metrics) until it works; the other writers go on.
                    with self.core.supervisor.guard("staging", f"resuming the publish of {writer}"):
                        self._finish(topic, writer, state)
                    continue
                pending = False
                for seq in sorted(folders):
                    prefix = layout.staging_seq(topic, writer, seq)
                    if plan.decide(state, seq) != "new":
                        self.storage.delete_prefix(prefix)  # left by a publish that crashed
                        continue
                    first = self._unclaimed.setdefault(prefix, now)
                    if now - first > self.ttl_ms:
                        log.info(
                            "dropping %s: staged %d ms ago, never published", prefix, now - first
                        )
                        self.storage.delete_prefix(prefix)
                        continue
                    seen.add(prefix)
                    pending = True
                if state is not None and not pending and now - state.updated_ms > self.ttl_ms:
                    self.storage.delete_prefix(layout.staging_writer(topic, writer))
                    with self._mutex:
                        self._states.pop((topic, writer), None)
        self._unclaimed = {k: v for k, v in self._unclaimed.items() if k in seen}

    def close(self) -> None:
        """Nothing held open: staged chunks and states are whole files."""

    def stop(self) -> None:
        """Stop the thread (before the committer closes)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
