"""The write-ahead log, the segments and their checkpoints against a model, under
hypothesis: rounds over many topics, checkpoints, failing syncs and cuts, full disks,
topics deleted and made again, reopens, and power losses at every step, a checkpoint's
middle included (issue 49).

The model is what a user may rely on: every acknowledged record of every topic, in
offset order per partition. A power loss is MemoryStorage.crash(): every byte not yet
synced is gone, so the segments keep only what checkpoints synced and the rest must
come back from the WAL.
"""

from __future__ import annotations

import os

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

import brook
from brook.codec.batch import Columns
from brook.commit import AppendRequest, Waiter
from brook.core import route
from brook.errors import StorageError
from brook.records import Record
from brook.storage.faulty import FaultyStorage
from brook.storage.memory import MemoryStorage

TOPICS = [f"tenant{n}" for n in range(6)]
PARTITIONS = 2
values = st.binary(max_size=60)
keys = st.none() | st.sampled_from([b"a", b"b", b"c"])
topics = st.sampled_from(TOPICS)


class WalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.memory = MemoryStorage()
        self.storage = FaultyStorage(self.memory)
        self.broker = self._open()
        self.model: dict[str, dict[int, list[bytes]]] = {}
        for name in TOPICS:
            self._create(name)

    def _open(self) -> brook.Broker:
        # A small WAL bound: rounds wait for checkpoints and files roll within a run.
        broker = brook.Broker(
            self.storage,
            segment_bytes_max=600,
            linger_ms=0,
            wal_bytes_max=64 * 1024,
            checkpoint_interval_ms=600_000,
        )
        # Checkpoints when a rule asks, when a round finds the WAL full, and at close: never
        # from the background thread, whose syncs would take the faults the rules inject.
        checkpointer = broker.core.committer.checkpointer  # type: ignore[union-attr]
        assert checkpointer is not None
        checkpointer.wal_bytes_trigger = checkpointer.dirty_files_trigger = 1 << 40
        return broker

    def _create(self, name: str) -> None:
        self.broker.create_topic(name, partitions=PARTITIONS)
        self.model[name] = {p: [] for p in range(PARTITIONS)}

    def _acked(self, topic: str, value: bytes, ack: brook.Ack) -> None:
        stored = self.model[topic][ack.partition]
        assert ack.offset == len(stored), f"offset {ack.offset} is not the next ({len(stored)})"
        stored.append(value)

    @rule(topic=topics, value=values, key=keys)
    def append(self, topic: str, value: bytes, key: bytes | None) -> None:
        self._acked(topic, value, self.broker.topic(topic).append(value, key=key))

    @rule(
        batch=st.lists(st.tuples(topics, st.lists(st.tuples(values, keys), min_size=1, max_size=5)))
    )
    def round_over_many_topics(
        self, batch: list[tuple[str, list[tuple[bytes, bytes | None]]]]
    ) -> None:
        """Several topics written in one commit round: submitted together, then awaited."""
        core = self.broker.core
        requests = []
        for topic, records in batch:
            columns = Columns.from_records([Record(v, key=k) for v, k in records], None)
            for partition, slots, part in route(core.topic_state(topic), columns):
                request = AppendRequest(core.topic_state(topic).log(partition), part, Waiter())
                core.submit(request)
                requests.append((topic, [records[i][0] for i in slots], request))
        for topic, values_, request in requests:
            assert isinstance(request.on_done, Waiter)
            request.on_done.wait()
            for value, ack in zip(values_, request.result(), strict=True):
                self._acked(topic, value, ack)

    @rule(topic=topics, value=values, full_disk=st.booleans())
    def append_fails(self, topic: str, value: bytes, full_disk: bool) -> None:
        self._settle()
        if full_disk:
            self.storage.faults.disk_full = True
        else:
            self.storage.faults.sync_failures = 1
        try:
            self.broker.topic(topic).append(value)
        except StorageError:
            pass
        else:
            raise AssertionError("an append whose write or sync failed was acknowledged")
        finally:
            self.storage.faults.disk_full = False
            self.storage.faults.sync_failures = 0

    def _settle(self) -> None:
        """Let work the committer queued for itself (a repair after a failed checkpoint)
        run before a fault is armed, so the fault hits what the rule means it to."""
        self.broker.core.committer.call(lambda: None)

    @rule()
    def checkpoint(self) -> None:
        self.broker.core.checkpoint()

    @rule(fails=st.integers(1, 3))
    def checkpoint_fails(self, fails: int) -> None:
        """A checkpoint whose segment syncs fail: the page cache is not trusted after."""
        self._settle()
        self.storage.faults.sync_failures = fails
        try:
            self.broker.core.checkpoint()
        except StorageError:
            pass
        finally:
            self.storage.faults.sync_failures = 0

    @rule(topic=topics)
    def delete_and_make_again(self, topic: str) -> None:
        self.broker.delete_topic(topic)
        self._create(topic)

    @rule()
    def reopen(self) -> None:
        self.broker.close()
        self.broker = self._open()

    @rule()
    def power_loss(self) -> None:
        survivor = self.memory.crash()
        self._restart_on(survivor)

    @rule(at=st.integers(1, 8))
    def power_loss_during_a_checkpoint(self, at: int) -> None:
        """The power goes after the checkpoint's `at`-th sync (or when it is done)."""
        taken: list[MemoryStorage] = []
        syncs = 0

        def maybe_cut() -> None:
            nonlocal syncs
            syncs += 1
            if syncs == at and not taken:
                taken.append(self.memory.crash())

        self.storage.faults.before_sync = maybe_cut
        try:
            self.broker.core.checkpoint()
        finally:
            self.storage.faults.before_sync = None
        self._restart_on(taken[0] if taken else self.memory.crash())

    def _restart_on(self, survivor: MemoryStorage) -> None:
        self.broker.close()
        self.memory = survivor
        self.storage = FaultyStorage(survivor)
        self.broker = self._open()

    @invariant()
    def every_acknowledged_record_is_there_and_nothing_else(self) -> None:
        for name in TOPICS:
            topic = self.broker.topic(name)
            want = self.model[name]
            assert topic.end_offsets() == {p: len(v) for p, v in want.items()}, name
            for partition, stored in want.items():
                got = topic.read(partition, 0, 10_000)
                assert [r.value for r in got] == stored, f"{name}/{partition}"

    def teardown(self) -> None:
        self.broker.close()


WalMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("BROOK_WAL_SIM_EXAMPLES", "20")),
    stateful_step_count=40,
    deadline=None,
)
test_wal_state_machine = WalMachine.TestCase
