"""The broker's joins: counted from the queue groups, durably, appended once.

A `create` call is one record on the join log (`__joins`), durable in the commit round
it joins, as any append (so a chain of any length costs a share of one round to make).
The joins it made then share one file (`joins/defs/<first id>.json`, written atomically
within join_flush_ms), which is where they stand from then on: the members that
arrived are written to it within join_flush_ms of their arrival (a broker that stops in
between reads them back from their queue groups: the acks and deaths are in the groups'
status logs, and the results in what the groups keep of them). A checkpoint says which
log offset the files cover; the log before it is dropped. A start reads the files, then
the log after the checkpoint for joins whose file was not written yet.

A loop, woken by every commit round while a join is open, counts members: it
watches the queue groups the open joins wait in (`QueueGroup.finish_feed`, the
positions acked or killed since it last looked) and takes a member as arrived
once its group says it is finished durably. A join whose members all arrived
fires (or fails) by appending its record with an idempotency key that names the
join (`model.append_key`), the records of all joins decided in one step in one
batch per topic: whatever crash comes between the append and the join's file
saying so, a restart decides again and its append is answered with the first
one's position (as a timer's firing is: within the topic's idempotency window,
ten minutes by default, of the first append).

A member that is another join's continuation is watched like the others once that
join appended it; if that join failed, the member arrives failed with its error,
so a chain fails through.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

import msgspec

from brook import layout, limits, names, side_by_side, validate
from brook.codec.batch import Columns
from brook.commit import AppendRequest
from brook.commit import Waiter as Durable
from brook.core import Hooks
from brook.errors import (
    BadRequest,
    BrookError,
    Conflict,
    JoinNotFound,
    NotFound,
    PartitionNotFound,
)
from brook.joins import model
from brook.joins.model import Arrival, Member, Spec, Stored
from brook.records import JoinInfo, Record

if TYPE_CHECKING:
    from brook.core import Core
    from brook.queue.shell import QueueGroup
    from brook.queue.store import QueueStore

log = logging.getLogger("brook.joins")

Position = tuple[int, int]
GroupKey = tuple[str, str]
Waiter = tuple[str, int]
"""(join id, member index)."""


class JoinFile(msgspec.Struct, frozen=True):
    """What a join file (and a join-log record) holds: the joins made by one `create`
    call (a canvas's)."""

    joins: list[Stored]


class Checkpoint(msgspec.Struct, frozen=True):
    log_offset: int = 0
    """Every join-log record before this offset is in the files."""


_decode = msgspec.json.Decoder(JoinFile).decode
_decode_checkpoint = msgspec.json.Decoder(Checkpoint).decode
_encode = msgspec.json.encode


class JoinService:
    def __init__(self, core: Core, queues: QueueStore) -> None:
        self.core = core
        self.queues = queues
        self.mutex = threading.Lock()
        self._joins: dict[str, Stored] = {}
        """Every join open, and those ended within join_history_ms."""
        self._waiting: dict[GroupKey, dict[Position, list[Waiter]]] = {}
        """Members appended and not arrived, by the queue group they finish in."""
        self._after: dict[str, list[Waiter]] = {}
        """Members that are a join's continuation, by that join, until it is appended."""
        self._watched: dict[GroupKey, tuple[QueueGroup, int]] = {}
        """The group object (and its generation) whose finish feed this loop reads."""
        self._unsure: dict[GroupKey, set[Position]] = {}
        """Fed positions whose finish was not durable yet when looked at."""
        self._changed: set[str] = set()
        """Joins with new arrivals, to decide."""
        self._unwritten: dict[str, int] = {}
        """Joins whose file lags what happened: since when (ms)."""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._logged: dict[str, int] = {}
        """Files not written yet, by the join-log offset of the create that made them."""
        self._covered = -1
        """The log offset the checkpoint last written says the files cover."""
        self.log = core.open_log(layout.JOIN_LOG, 0)
        self._file_of: dict[str, str] = {}
        """Each join's file (named by the first join its create call made)."""
        self._files: dict[str, list[str]] = {}
        """The joins each file holds."""
        stored_files = [
            n for n in core.storage.list(layout.JOINS) if layout.parse_join(n) is not None
        ]
        # Read side by side where the storage makes each read wait (S3: a request each).
        side_by_side.each(
            core.storage, stored_files, lambda n: (n, core.storage.read_all(n)), self._read_file
        )
        try:
            self._replay_log()
        except BaseException:
            self.log.close()
            raise
        for stored in list(self._joins.values()):
            self._register(stored)
        core.register(Hooks("joins", on_round=self._on_round, maintain=self.maintain))
        if not core.read_only:
            self._thread = core.supervisor.start("joins", self._step, self._stop, self._pause)

    def _read_file(self, found: tuple[str, bytes | None]) -> None:
        name, raw = found
        file_id = layout.parse_join(name)
        if file_id is None or raw is None:
            return
        try:
            joins = _decode(raw).joins
        except msgspec.DecodeError as exc:
            log.error("join file %s is unreadable (%s): left as it is", name, exc)
            return
        self._adopt(file_id, joins)

    def _adopt(self, file_id: str, joins: list[Stored]) -> None:
        """Know the joins of one file (or log record), as the file groups them."""
        self._files[file_id] = [stored.spec.id for stored in joins]
        for stored in joins:
            self._joins[stored.spec.id] = stored
            self._file_of[stored.spec.id] = file_id

    def _replay_log(self) -> None:
        """Joins made by creates whose file was not written before the broker stopped:
        the log records after the checkpoint (a file, once written, is newer)."""
        raw = self.core.storage.read_all(layout.JOIN_CHECKPOINT)
        checkpoint = Checkpoint() if raw is None else _decode_checkpoint(raw)
        offset = max(checkpoint.log_offset, self.log.start_offset)
        while True:
            records = self.log.read(offset, limits.read_records_max)
            if not records:
                return
            for record in records:
                made = _decode(record.value).joins
                if made and made[0].spec.id not in self._files:
                    self._adopt(made[0].spec.id, made)
                    self._logged[made[0].spec.id] = record.offset
                    for stored in made:
                        self._unwritten.setdefault(stored.spec.id, 0)
            offset = records[-1].offset + 1

    # ------------------------------------------------------------ calls

    def create(self, specs: list[Spec]) -> list[JoinInfo]:
        """Make the joins (durable when it returns); a join whose id exists with the
        same definition is left as it is (so a create sent twice is one), another
        definition is a Conflict. A member may be the continuation of a join made
        before or earlier in the same call."""
        self.core.check_writable("create a join")
        if not specs:
            raise BadRequest("give at least one join")
        if len(specs) > limits.joins_per_call_max:
            raise BadRequest(f"at most {limits.joins_per_call_max} joins per call")
        ids = [spec.id for spec in specs]
        if len(set(ids)) < len(ids):
            twice = next(i for i in ids if ids.count(i) > 1)
            raise BadRequest(f"join id {twice!r} is named twice in one call")
        for spec in specs:
            self._check(spec)
        with self.mutex:
            made = {s.id: s for s in specs}
            new = []
            for spec in specs:
                old = self._joins.get(spec.id)
                if old is not None:
                    if old.spec != spec:
                        raise Conflict(f"join {spec.id!r} exists with another definition")
                    continue
                for member in spec.members:
                    if member.join is None:
                        continue
                    named = made.get(member.join) or self._spec_of(member.join)
                    if named is None:
                        raise BadRequest(
                            f"join {spec.id}: member {model.member_ref(member)} names no join "
                            "(create it first, or in the same call)"
                        )
                    if named.then is None:
                        raise BadRequest(
                            f"join {spec.id}: member {model.member_ref(member)} names a join "
                            "that appends nothing (it has no then)"
                        )
                new.append(spec)
            if self._open_count() + len(new) > limits.joins_open_max:
                raise Conflict(
                    f"at most {limits.joins_open_max} joins may be open: wait for some to end"
                )
            now = self.core.now_ms()
            if new:
                making = [Stored(spec=spec, created_ms=now) for spec in new]
                value = _encode(JoinFile(making))
                request = AppendRequest(
                    self.log, Columns([value], size_bytes=len(value)), Durable()
                )
                self.core.submit(request)  # in this mutex: the log's order is the creates'
        if new:
            assert isinstance(request.on_done, Durable)
            request.on_done.wait()
            offset = request.result()[0].offset  # raises: nothing was made
            with self.mutex:
                if any(spec.id in self._joins for spec in new):  # a racing create of an id
                    raise Conflict(f"join {new[0].id!r} was made meanwhile: create it again")
                self._adopt(new[0].id, making)
                self._logged[new[0].id] = offset
                for stored in making:
                    self._unwritten[stored.spec.id] = now
                    self._register(stored)
        self._wake.set()
        with self.mutex:
            return [self._info(self._joins[s.id]) for s in specs]

    def get(self, join_id: str) -> JoinInfo:
        with self.mutex:
            stored = self._joins.get(join_id)
            if stored is None:
                raise JoinNotFound(f"no join {join_id!r} (never made, or ended long ago)")
            return self._info(stored)

    def settled(self, join_id: str) -> bool:
        """Whether the join ended (and so, if it fired, its continuation is appended):
        what a long-poll on `join` waits for. True for an unknown join (the next
        look says so). Takes no lock (one read of a dict), so it may be called
        holding the core's `appended` condition, as waits do."""
        stored = self._joins.get(join_id)
        return stored is None or stored.ended is not None

    def wait(self, join_id: str, seconds: float) -> None:
        """Wait up to `seconds` for `settled(join_id)`; returns either way."""
        monotonic = self.core.clock.monotonic
        deadline = monotonic() + seconds
        while not self.settled(join_id) and not self.core.closed:
            remaining = deadline - monotonic()
            if remaining <= 0:
                return
            self.core.wait_for_records(lambda: self.settled(join_id), remaining)

    def idle(self) -> bool:
        """Whether the loop has nothing to do until another job finishes: no member
        finished and not yet counted, no join to decide, no continuation on its way.
        For a test that runs jobs by hand (`app.testing()`), to know a canvas moved
        as far as it can."""
        with self.mutex:
            if self._changed or self._unsure:
                return False
            if any(self._ended(join_id) for join_id in self._after):
                return False
            for key in self._waiting:
                group = self.queues.find(*key)
                if group is None:
                    continue
                seen = self._watched.get(key)
                if seen is None or seen[0] is not group or group.finish_feed:
                    return False
            return True

    def wait_idle(self, seconds: float) -> bool:
        """Wait up to `seconds` for `idle()`, waking the loop; whether it is."""
        monotonic = self.core.clock.monotonic
        deadline = monotonic() + seconds
        while not self.idle():
            if monotonic() >= deadline or self.core.closed:
                return False
            self._wake.set()
            self._stop.wait(0.002)
        return True

    def _spec_of(self, join_id: str) -> Spec | None:
        stored = self._joins.get(join_id)
        return None if stored is None else stored.spec

    def _ended(self, join_id: str) -> bool:
        stored = self._joins.get(join_id)
        return stored is None or stored.ended is not None

    def open_count(self) -> int:
        with self.mutex:
            return self._open_count()

    # ------------------------------------------------------------ checks

    def _check(self, spec: Spec) -> None:
        if not names.ID.fullmatch(spec.id):
            raise BadRequest(
                f"join id {spec.id[:60]!r} must be 1 to {limits.timer_id_chars_max} "
                "of A-Z a-z 0-9 . _ : -"
            )
        if not 1 <= len(spec.members) <= limits.join_members_max:
            raise BadRequest(
                f"join {spec.id}: give 1 to {limits.join_members_max} members, "
                f"not {len(spec.members)}"
            )
        for member in spec.members:
            validate.topic_name(member.topic)
            validate.group_name(member.group)
            if member.join is not None:
                continue
            if member.partition < 0 or member.offset < 0:
                raise BadRequest(
                    f"join {spec.id}: a member names a join, or its partition and offset"
                )
            logs = self.core.topic_state(member.topic).logs  # TopicNotFound
            if member.partition >= len(logs):
                raise PartitionNotFound(
                    f"join {spec.id}: topic {member.topic} has no partition {member.partition}"
                )
            if member.offset >= logs[member.partition].durable_offset:
                raise BadRequest(
                    f"join {spec.id}: offset {member.offset} is past the end of partition "
                    f"{member.partition} of {member.topic} (a member is a record appended)"
                )
        for continuation in (spec.then, spec.on_error):
            if continuation is None:
                continue
            validate.topic_name(continuation.topic)
            validate.group_name(continuation.group)
            validate.record(
                continuation.value,
                continuation.key,
                continuation.headers,
                record_bytes_max=self.core.record_bytes_max,
            )
        if len({(m.topic, m.partition, m.offset, m.join) for m in spec.members}) < len(
            spec.members
        ):
            raise BadRequest(f"join {spec.id}: a member is named twice")

    # ------------------------------------------------------------ registering

    def _register(self, stored: Stored) -> None:
        """Holding the mutex (or alone): know the join, and wait for its members."""
        spec = stored.spec
        self._joins[spec.id] = stored
        if stored.ended is not None:
            return
        for index, member in enumerate(spec.members):
            if index in stored.arrived:
                continue
            if member.join is not None:
                self._after.setdefault(member.join, []).append((spec.id, index))
            else:
                self._wait_for(member, (member.partition, member.offset), (spec.id, index))
        self._changed.add(spec.id)  # arrivals read back may complete it

    def _wait_for(self, member: Member, position: Position, waiter: Waiter) -> None:
        key = (member.topic, member.group)
        self._waiting.setdefault(key, {}).setdefault(position, []).append(waiter)
        self._watched.pop(key, None)  # look at every member of the group again

    # ------------------------------------------------------------ the loop

    def _on_round(self, topics: frozenset[str]) -> None:
        """After every commit round (the syncer's thread): an ack or a death may have
        become durable, or a continuation been appended. Quick: reads, and an Event."""
        if self._waiting or self._after:
            self._wake.set()

    def _pause(self, seconds: float) -> None:
        """Between steps: until a commit round while joins wait (`_on_round`), a
        create, or `seconds`. A round during a step is not lost: the Event stays set."""
        self._wake.wait(seconds)
        self._wake.clear()

    def _step(self) -> float:
        with self.mutex:
            now = self.core.now_ms()
            self._count_arrivals()
            self._decide(now)
            self._resolve_after()
            self._write_lagging(now)
            if self._unwritten:
                return limits.join_flush_ms / 1000
        return 1.0

    def _count_arrivals(self) -> None:
        """Holding the mutex: take the members their groups finished durably."""
        for key in list(self._waiting):
            positions = self._waiting[key]
            if not positions:
                del self._waiting[key]
                self._unwatch(key)
                continue
            group = self._group(key)
            if group is None:
                continue
            seen = self._watched.get(key)
            if seen is None or seen[0] is not group or seen[1] != group.generation:
                with group.mutex:
                    group.finish_feed = []
                    self._watched[key] = (group, group.generation)
                candidates = set(positions)
            else:
                with group.mutex:
                    fed, group.finish_feed = group.finish_feed or [], []
                candidates = {p for p in fed if p in positions}
                candidates |= self._unsure.pop(key, set())
            unsure = set()
            for position in candidates:
                try:
                    if not group.finished(*position):
                        if group.finish_pending(*position):
                            unsure.add(position)  # its entry is not durable yet: look again
                        continue
                    arrival = self._arrival_in(group, key[0], position)
                except NotFound as exc:  # its partition is gone (the topic made anew)
                    ref = f"{key[0]}/{position[0]}/{position[1]}"
                    arrival = Arrival(False, f"no record {ref}: {exc.message}".encode(), ref)
                except BrookError as exc:  # the group's failure: look again next step
                    log.warning("joins: looking at %s/%s failed (%s)", *key, exc)
                    unsure.add(position)
                    continue
                for join_id, index in positions.pop(position, []):
                    self._arrive(join_id, index, arrival)
            if unsure:
                self._unsure[key] = unsure

    def _group(self, key: GroupKey) -> QueueGroup | None:
        """The queue group, if it exists; members of a deleted topic arrive failed."""
        topic, group_name = key
        if not self.core.has_topic(topic):
            gone = self._waiting.pop(key, {})
            self._unwatch(key)
            for position, waiters in gone.items():
                failure = Arrival(
                    False,
                    f"topic {topic} was deleted".encode(),
                    f"{topic}/{position[0]}/{position[1]}",
                )
                for join_id, index in waiters:
                    self._arrive(join_id, index, failure)
            return None
        return self.queues.find(topic, group_name)  # None until a consumer makes it

    def _unwatch(self, key: GroupKey) -> None:
        seen = self._watched.pop(key, None)
        self._unsure.pop(key, None)
        if seen is not None:
            with seen[0].mutex:
                seen[0].finish_feed = None

    @staticmethod
    def _arrival_in(group: QueueGroup, topic: str, position: Position) -> Arrival:
        """How the member at `position` finished, as its group tells it."""
        ref = f"{topic}/{position[0]}/{position[1]}"
        info = group.job(*position)
        if info.state == "acked":
            return Arrival(True, info.result or b"", ref)
        if info.state == "dead":
            return Arrival(False, (info.error or "dead").encode(), ref)
        return Arrival(
            False, f"no record {ref} (past its partition's end, or removed)".encode(), ref
        )

    def _arrive(self, join_id: str, index: int, arrival: Arrival) -> None:
        stored = self._joins.get(join_id)
        if stored is None:
            return
        after = model.arrive(stored, index, arrival)
        if after is not stored:
            self._joins[join_id] = after
            self._changed.add(join_id)
            self._unwritten.setdefault(join_id, self.core.now_ms())

    def _resolve_after(self) -> None:
        """Members that are continuations of joins now appended (or failed)."""
        for join_id in list(self._after):
            stored = self._joins.get(join_id)
            if stored is None:
                self._fail_after(join_id, f"join {join_id} is unknown", "")
            elif stored.ended == "failed":
                self._fail_after(join_id, stored.error, stored.failed_ref)
            elif stored.ended == "fired" and stored.spec.then is not None:
                assert stored.partition is not None and stored.offset is not None
                then = stored.spec.then
                member = Member(topic=then.topic, group=then.group)
                for waiter in self._after.pop(join_id, []):
                    self._wait_for(member, (stored.partition, stored.offset), waiter)

    def _fail_after(self, join_id: str, error: str, failed_ref: str) -> None:
        for waiting_id, index in self._after.pop(join_id, []):
            stored = self._joins.get(waiting_id)
            ref = failed_ref or (
                model.member_ref(stored.spec.members[index]) if stored else join_id
            )
            self._arrive(waiting_id, index, Arrival(False, error.encode(), ref))

    def _decide(self, now: int) -> None:
        """Fire or fail every join whose members decide it; their records appended in
        one batch per topic. Members of a failed join that arrive later change nothing
        (`model.arrive`)."""
        decided: list[tuple[Stored, str, Record, str]] = []
        while self._changed:
            stored = self._joins.get(self._changed.pop())
            if stored is None:
                continue
            how = model.verdict(stored)
            if how == "fired":
                made = model.continuation(stored)
                if made is not None and model.record_bytes(made[1]) > self.core.record_bytes_max:
                    too_big = (
                        f"the members' results make a record of {model.record_bytes(made[1])} "
                        f"bytes, more than the broker's record_bytes_max "
                        f"({self.core.record_bytes_max})"
                    )
                    ref = f"{made[0]}/after/{stored.spec.id}"
                    stored = model.ended(stored, "failed", now, too_big, ref)
                    made = model.error_record(stored)
                    key = model.append_key(stored.spec.id, error=True)
                else:
                    stored = model.ended(stored, "fired", now)
                    key = model.append_key(stored.spec.id)
            elif how == "failed":
                stored = model.ended(stored, "failed", now)
                made = model.error_record(stored)
                key = model.append_key(stored.spec.id, error=True)
            else:
                continue
            self._joins[stored.spec.id] = stored
            if made is not None:
                decided.append((stored, made[0], made[1], key))
        if not decided:
            return
        self._append([d for d in decided])
        for stored, _, _, _ in decided:
            # Written by this step's _write_lagging, after the appends: the records are
            # durable already; the file spares a restart the work.
            self._unwritten[stored.spec.id] = now - limits.join_flush_ms
        self.core.wake_waiters()  # long-polls on a join that ended

    def _append(self, decided: list[tuple[Stored, str, Record, str]]) -> None:
        """Append the decided joins' records, a batch per topic; note where each fired
        join's continuation went. A failure leaves them decided and unwritten: the step
        is tried again, and the idempotency keys make a repeat append nothing new."""
        by_topic: dict[str, list[tuple[Stored, Record, str]]] = {}
        for stored, topic, record, key in decided:
            by_topic.setdefault(topic, []).append((stored, record, key))
        for topic, items in by_topic.items():
            checked = validate.records(
                [record for _, record, _ in items],
                [key for _, _, key in items],
                record_bytes_max=self.core.record_bytes_max,
            )
            try:
                acks = self.core.append(topic, checked)
            except BaseException:
                for stored, _, _ in items:  # decide again next step
                    self._joins[stored.spec.id] = msgspec.structs.replace(
                        stored, ended=None, ended_ms=None, error="", failed_ref=""
                    )
                    self._changed.add(stored.spec.id)
                raise
            for (stored, _, _), ack in zip(items, acks, strict=True):
                if stored.ended == "fired":
                    self._joins[stored.spec.id] = msgspec.structs.replace(
                        stored, partition=ack.partition, offset=ack.offset
                    )

    def _write_lagging(self, now: int) -> None:
        due = {
            self._file_of[join_id]
            for join_id, since in self._unwritten.items()
            if now - since >= limits.join_flush_ms or self._stop.is_set()
        }
        for file_id in due:
            self._write_file(file_id)

    def _write(self, stored: Stored) -> None:
        """The join's file, written with it as it stands now."""
        self._write_file(self._file_of[stored.spec.id])

    def _write_file(self, file_id: str) -> None:
        joins = [self._joins[join_id] for join_id in self._files[file_id]]
        self.core.storage.write_atomic(layout.join(file_id), _encode(JoinFile(joins)))
        for join_id in self._files[file_id]:
            self._unwritten.pop(join_id, None)
        self._logged.pop(file_id, None)  # the log no longer needs to hold it

    def _open_count(self) -> int:
        return sum(1 for s in self._joins.values() if s.ended is None)

    def _info(self, stored: Stored) -> JoinInfo:
        spec = stored.spec
        state = "open" if stored.ended is None else stored.ended
        partition = offset = None
        if stored.ended == "fired":
            partition, offset = stored.partition, stored.offset
        return JoinInfo(
            id=spec.id,
            state=state,
            members=len(spec.members),
            arrived=len(stored.arrived),
            topic=spec.members[0].topic if spec.then is None else spec.then.topic,
            partition=partition,
            offset=offset,
            error=stored.error,
            failed_ref=stored.failed_ref,
            created_ms=stored.created_ms,
            ended_ms=stored.ended_ms,
        )

    # ------------------------------------------------------------ the broker's

    def maintain(self) -> None:
        """Writer role: forget joins ended more than join_history_ms ago (their files
        deleted); drop the join log before the first create whose file is not written.
        Never waits for the mutex: the loop holds it while it waits for a commit round,
        which this thread (the committer's writer) must write: it tries next time."""
        if self.core.read_only or not self.mutex.acquire(blocking=False):
            return
        try:
            self._maintain(self.core.now_ms())
        finally:
            self.mutex.release()

    def _maintain(self, now: int) -> None:
        """Holding the mutex: the checkpoint, the log before it, old joins."""
        covered = min(self._logged.values(), default=self.log.durable_offset)
        if covered != self._covered:  # (a write, on S3 a request: only when it moves)
            checkpoint = _encode(Checkpoint(log_offset=covered))
            self.core.storage.write_atomic(layout.JOIN_CHECKPOINT, checkpoint)
            self.log.drop_before(covered)
            self._covered = covered
        for file_id, join_ids in list(self._files.items()):
            joins = [self._joins[join_id] for join_id in join_ids]
            if all(
                stored.ended_ms is not None
                and now - stored.ended_ms > limits.join_history_ms
                and stored.spec.id not in self._unwritten
                for stored in joins
            ):
                self.core.storage.delete(layout.join(file_id))
                del self._files[file_id]
                for join_id in join_ids:
                    del self._joins[join_id], self._file_of[join_id]

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        with self.mutex:
            if not self.core.read_only:
                self._write_lagging(self.core.now_ms())

    def close(self) -> None:
        """Close the join log (after the committer closed)."""
        self.log.close()
