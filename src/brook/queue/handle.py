"""`b.queue(topic, group)`: lease records, settle them, look at the group.

Every call that changes the group returns once its transitions are durable in
the status log. Settling calls take a Job, a receipt string, or a list of either.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from brook import limits, validate
from brook.errors import BadRequest
from brook.models import ErrorGroup, Outcome, Transition
from brook.partitioner import partition_for_key
from brook.queue import settings as queue_settings
from brook.queue.shell import QueueGroup
from brook.records import DeadRecord, Job, JobInfo, Record, UniqueAck


class Queue:
    EMBEDDED_ONLY = frozenset({"counts", "next_due_ms"})
    """Looks for the dashboard and /metrics in this process (they write nothing)."""

    def __init__(self, group: QueueGroup) -> None:
        self._group = group
        self.topic = group.topic
        self.group = group.group

    def __repr__(self) -> str:
        return f"<Queue {self.topic} group={self.group}>"

    def lease(
        self,
        max_records: int = limits.lease_records_default,
        timeout: float = limits.poll_wait_s_default,
        visibility_timeout_ms: int | None = None,
    ) -> list[Job]:
        """Up to `max_records` records (capped at queue_lease_records_max), fairly
        across keys, waiting up to `timeout` seconds for the first. Each stays
        leased for the group's visibility timeout (or `visibility_timeout_ms`)."""
        count = min(validate.whole(max_records, "max_records", 1), limits.queue_lease_records_max)
        seconds = validate.seconds(timeout, "timeout")
        visibility = validate.optional_whole(
            visibility_timeout_ms, "visibility_timeout_ms", 1, limits.visibility_timeout_ms_max
        )
        return self._group.lease(count, seconds, visibility)

    def ack(self, jobs: Any, results: Sequence[bytes | None] | None = None) -> None:
        """The records are done. `results`, one per job (bytes or None), are kept
        with the acks for `job()` to tell, bounded (limits.queue_results_*). Raises
        LeaseExpired for receipts no longer live (the others are acked)."""
        receipts = validate.receipts(jobs)
        outcome = None
        if results is not None:
            checked = validate.results(results, len(receipts))
            outcome = {
                r: Outcome(result=v)
                for r, v in zip(receipts, checked, strict=True)
                if v is not None
            }
        self._group.settle(receipts, "ack", outcome=outcome or None)

    def job(self, partition: int, offset: int, timeout: float = 0.0) -> JobInfo:
        """Where the record at (partition, offset) stands: its state, attempts, last
        error, and the result its ack gave (while kept). With `timeout` (seconds,
        capped at limits.wait_ms_max), first waits up to that long for it to be
        finished (acked or dead): answered once the ack or death is durable."""
        partition = validate.whole(partition, "partition")
        offset = validate.whole(offset, "offset")
        seconds = min(validate.seconds(timeout, "timeout"), limits.wait_ms_max / 1000)
        group = self._group
        if seconds:
            group.wait_finished(partition, offset, seconds)
        return group.job(partition, offset)

    def nack(self, jobs: Any, delay_ms: int | None = None, reason: str = "") -> None:
        """The attempts failed: retry after `delay_ms` (default: the group's
        backoff), or dead after the last attempt. Raises LeaseExpired as ack does."""
        delay = validate.optional_whole(delay_ms, "delay_ms", 0, limits.visibility_timeout_ms_max)
        self._group.settle(validate.receipts(jobs), "nack", validate.reason(reason), delay)

    def release(self, jobs: Any, delay_ms: int | None = None, reason: str = "") -> None:
        """Give the leases back unused: their attempts are not counted, and the records
        are ready again at once, or after `delay_ms` (for a consumer that leased records
        it cannot handle itself, so that another may). `reason` goes in the trace.
        Raises LeaseExpired as ack does."""
        delay = validate.optional_whole(delay_ms, "delay_ms", 0, limits.visibility_timeout_ms_max)
        given = validate.reason(reason) or "released"
        self._group.settle(validate.receipts(jobs), "release", given, delay)

    def extend(self, jobs: Any, ms: int) -> None:
        """Keep the leases for `ms` more from now. Raises LeaseExpired as ack does."""
        extend_ms = validate.whole(ms, "ms", 1, limits.visibility_timeout_ms_max)
        self._group.settle(validate.receipts(jobs), "extend", extend_ms=extend_ms)

    def discard(self, jobs: Any, reason: str = "") -> None:
        """Dead at once, copied to the dead-letter topic. Raises LeaseExpired as ack does."""
        self._group.settle(validate.receipts(jobs), "discard", validate.reason(reason))

    def next_due_ms(self) -> int | None:
        """When time alone next changes something in the group (a retry or a delayed
        record comes due, a lease ends), in epoch ms; None if nothing waits on time.
        May be early (an entry already moot): look again then."""
        return self._group.next_due_ms()

    def stats(self) -> dict[str, int]:
        """Records by state (ready, leased, retrying, dead; acked counts all ever
        acked) and oldest_ready_age_ms."""
        return self._group.stats()

    def counts(self) -> dict[str, int]:
        """Records by state as they stand, as `stats`, but without acting on time first:
        a look (the dashboard, /metrics) writes nothing."""
        return self._group.counts()

    def dead_errors(self) -> list[ErrorGroup]:
        """The errors its dead records died of, grouped (by exception type and the
        task's innermost frame, or by the reason with its ids masked: queue/error_groups.py),
        as ErrorGroup(group, dead, example): how many are dead, and one whole error of
        the group; most first."""
        return self._group.dead_errors()

    def dead_records(
        self,
        error: str,
        after: tuple[int, int] | None = None,
        limit: int = limits.dead_records_page_default,
    ) -> list[DeadRecord]:
        """Up to `limit` dead records of the error group `error` (as `dead_errors` names
        it; a whole error stands for its group), in order of their place, from just after
        `after` ((partition, offset): keyset paging). BadRequest for a bad argument;
        `limit` is capped at read_records_max."""
        if not validate.text(error, "error", limits.queue_reason_chars_max):
            raise BadRequest("error must name an error group (as dead_errors gives them)")
        if after is not None:
            (after,) = validate.positions([after]) or [after]
        limit = min(validate.whole(limit, "limit", 1), limits.read_records_max)
        return [
            DeadRecord(
                partition=partition,
                offset=offset,
                attempts=job.attempt,
                error=job.error,
                redriven=job.lives,
            )
            for (partition, offset), job in self._group.dead_records(error, after, limit)
        ]

    def trace(self, partition: int, offset: int) -> list[Transition]:
        """The record's transitions in the status log, oldest first ([] if none)."""
        return self._group.trace(
            validate.whole(partition, "partition"), validate.whole(offset, "offset")
        )

    def redrive(
        self, limit: int | None = None, records: Iterable[tuple[int, int]] | None = None
    ) -> int:
        """Put up to `limit` dead records (all by default, or those of `records`, as
        (partition, offset) pairs) back to work, attempts counted afresh; returns how
        many. Records that are not dead are left as they are. Idempotent."""
        return self._group.redrive(
            validate.optional_whole(limit, "limit", 1), validate.positions(records)
        )

    def cancel(
        self,
        records: Iterable[tuple[int, int]] | None = None,
        key: bytes | str | None = None,
        reason: str = "",
    ) -> list[tuple[int, int]]:
        """Cancel waiting records: those of `records` ((partition, offset) pairs), or
        every one of `key`. Each that is ready, delayed or waiting to retry is dead at
        once with `reason` (default "cancelled"; copied to the dead-letter topic as any
        death is), durably, and never delivered again unless redriven; leased,
        finished and unknown ones are left as they are. The positions cancelled, in
        order. Idempotent."""
        chosen, key_bytes = validate.cancelled(records, key)
        return self._group.cancel(chosen, key_bytes, validate.reason(reason))

    def enqueue_unique(
        self,
        identity: str,
        value: bytes,
        key: bytes | None = None,
        headers: dict[str, bytes] | None = None,
        replace: bool = False,
    ) -> UniqueAck:
        """Append a record unless a live record (waiting, delayed, retrying or leased)
        of `identity` is in the group: then nothing is appended and that one is given
        (`existing`). With `replace` (debounce), a waiting one of the identity is
        cancelled instead and the new record appended (a leased one is left to run).
        The record carries the header brook.unique. Durable when it returns. Claims of
        one group take turns, so racing producers append one record between them."""
        if (
            not isinstance(identity, str)
            or not 1 <= len(identity) <= limits.unique_identity_chars_max
        ):
            raise BadRequest(
                f"identity must be a string of 1 to {limits.unique_identity_chars_max} characters"
            )
        core = self._group.core
        record, _ = validate.record(value, key, headers, record_bytes_max=core.record_bytes_max)

        def append(record: Record) -> tuple[int, int]:
            columns = validate.one(
                record.value,
                record.key,
                record.headers,
                None,
                record_bytes_max=core.record_bytes_max,
            )
            state = core.topic_state(self.topic)
            partitions = state.config.partitions
            if record.key is None:
                partition = state.spread.next(partitions)
            else:
                partition = partition_for_key(record.key, partitions)
            ack = core.append_to(state.logs[partition], columns)[0]
            return ack.partition, ack.offset

        (partition, offset), existing, replaced = self._group.enqueue_unique(
            identity, record, bool(replace), append
        )
        return UniqueAck(partition=partition, offset=offset, existing=existing, replaced=replaced)

    def settings(self) -> dict[str, Any]:
        """The group's stored settings, the dead-letter topic resolved."""
        return queue_settings.as_json(self._group.settings, self.topic)
