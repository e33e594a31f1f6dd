"""Dead records copied to the dead-letter topic, once each.

A record that dies is copied after its DEAD transition is durable, with an
idempotency key naming the death, and an entry then marks it copied; a restart
copies again whatever was not marked, and the key keeps that from appending twice.
Part of `QueueGroup` (queue/shell.py)."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from brook import limits, validate
from brook.queue import settings as queue_settings
from brook.queue.group import Position
from brook.queue.lifecycle import JobState
from brook.records import Record

if TYPE_CHECKING:
    from brook.queue.shell import QueueGroup


class DeadLetters:
    def letter_dead_isolated(self: QueueGroup) -> None:
        """`letter_dead`, its failure the group's alone: the settling that made the
        records dead is durable already, so its caller is not told of it; the group
        shows as failing, and its ticker copies them again later."""
        with self.core.supervisor.isolate("queues", self.subject, "dead letters"):
            self.letter_dead()

    def letter_dead(self: QueueGroup) -> None:
        """Copy dead records not yet copied to the dead-letter topic, then mark them."""
        with self._letter_mutex:
            with self.mutex:
                pending = sorted(self._unlettered.items())[: limits.read_records_max]
                jobs = {pos: self.machine.jobs.get(pos) for pos, _ in pending}
            if not pending:
                return
            target = queue_settings.dead_letter_topic(self.topic, self.settings)
            if target is not None:
                self._copy_dead(target, pending, jobs)
            with self.mutex:
                marked = []
                for (p, o), at in pending:
                    if self._unlettered.get((p, o)) == at:
                        del self._unlettered[(p, o)]
                        marked.append((p, o, at))
                request = self._submit([], lettered=marked) if marked else None
            if request is not None:
                self._wait(request)

    def _copy_dead(
        self: QueueGroup,
        target: str,
        pending: list[tuple[Position, int]],
        jobs: dict[Position, JobState | None],
    ) -> None:
        """Append copies of the `pending` deaths to `target`, once each (idempotency
        keys name each death)."""
        records = {(r.partition, r.offset): r for r in self._fetch([pos for pos, _ in pending])}
        copies: list[Record] = []
        keys: list[bytes | str | None] = []
        for pos, at in pending:
            found, job = records.get(pos), jobs.get(pos)
            if found is None or job is None:
                continue  # removed by retention, or redriven meanwhile
            copies.append(self._dead_letter(found, job))
            keys.append(self._letter_key(pos, at))
        if copies:
            # Brook's own copies, never refused for size (a record of the largest size
            # gains a few headers here).
            ceiling = limits.record_bytes_max_ceiling
            self.core.append(target, validate.records(copies, keys, record_bytes_max=ceiling))

    def _dead_letter(self: QueueGroup, record: Record, job: JobState) -> Record:
        headers = dict(record.headers or {})
        headers.update(
            {
                "brook.origin.topic": self.topic.encode(),
                "brook.origin.partition": str(record.partition).encode(),
                "brook.origin.offset": str(record.offset).encode(),
                "brook.group": self.group.encode(),
                "brook.attempts": str(job.attempt).encode(),
                "brook.error": job.error.encode()[:4096],
            }
        )
        return Record(value=record.value, key=record.key, headers=headers)

    def _letter_key(self: QueueGroup, position: Position, at_ms: int) -> str:
        """Names one death of one record, so copying it again appends nothing."""
        text = f"{self.topic}\0{self.group}\0{position[0]}\0{position[1]}\0{at_ms}"
        return "brook.dlq." + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
