"""The timer service of a broker: the I/O shell around `TimerBook`.

Scheduling and cancelling append a `LogEntry` to the timer log through the
committer and return once it is durable (group commit batches concurrent
calls). One supervised loop (brook/supervisor.py) does everything time does,
in order:

- loads each bucket from storage as it comes within the look-ahead;
- fires due timers, earliest first: their records are appended to their
  topics through the normal write path, with the timer id as idempotency key
  (so a crash between the append and the log entry that marks them fired does
  not append them twice), then the log entry is appended;
- flushes what happened since the last flush into the buckets' run files, then
  the checkpoint, after which the log before it can be deleted;
- deletes the files of buckets long past (timer_history_ms) where nothing is pending.

A failed write leaves the book ahead of storage; the service then rebuilds from
storage before its next call, as a queue group does.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import msgspec

from brook import layout, limits, validate
from brook.codec.batch import Columns
from brook.commit import AppendRequest, Waiter
from brook.core import Hooks
from brook.errors import Closed, StorageError
from brook.log.partition import LogSettings
from brook.models import TimerInfo
from brook.records import Histogram, Record, TimerStats
from brook.timers import files, merging
from brook.timers.book import TimerBook, Unflushed, bucket_of
from brook.timers.model import Timer

if TYPE_CHECKING:
    from brook.core import Core

log = logging.getLogger("brook.timers")

TIMER_HEADER = "brook.timer.id"


def new_ids(count: int) -> Iterator[str]:
    """`count` new random ids (96 bits each), from one read of the system's randomness."""
    blob = secrets.token_hex(12 * count)
    return (blob[i : i + 24] for i in range(0, 24 * count, 24))


DAY_MS = 24 * 60 * 60 * 1000
FIRE_LAG_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)


class FireStats:
    """Counters for /metrics: timers fired, and how late (fired minus due)."""

    def __init__(self) -> None:
        self.fired = 0
        self.lag_counts = [0] * (len(FIRE_LAG_BUCKETS) + 1)
        self.lag_sum_s = 0.0

    def observe(self, lag_s: float) -> None:
        self.fired += 1
        self.lag_counts[bisect_left(FIRE_LAG_BUCKETS, lag_s)] += 1
        self.lag_sum_s += lag_s


class TimerService:
    def __init__(self, core: Core, start: bool = True) -> None:
        """`start` False: fire nothing until `start()` (the broker first lets the
        periodic schedules skip the slots it was down over)."""
        self.core = core
        self.mutex = threading.Lock()
        self._wake = threading.Condition(self.mutex)
        self._flush_mutex = threading.Lock()
        self._flushed = threading.Condition(self.mutex)
        """Notified when a flush takes what piled up (schedulers may wait for it)."""
        self._stop = threading.Event()
        self._broken = False
        self._in_flight: dict[str, AppendRequest] = {}
        """Timers scheduled whose log entry is not known durable yet: the entry."""
        self.stats = FireStats()
        settings = LogSettings(
            min(core.settings.segment_bytes_max, 8 * limits.MIB), core.settings.segment_ms_max
        )
        self.log = core.open_log(layout.TIMER_LOG, 0, settings)
        try:
            self.book = self._restore()
        except BaseException:
            self.log.close()
            raise
        self._last_flush = core.clock.monotonic()
        core.register(Hooks("timers", maintain=self.maintain))
        self._thread: threading.Thread | None = None
        if start:
            self.start()

    def start(self) -> None:
        """Begin firing (a read-only broker fires nothing)."""
        if not self.core.read_only and self._thread is None:
            self._thread = self.core.supervisor.start("timers", self._step, self._stop, self._sleep)

    # ------------------------------------------------------------ restoring

    def _restore(self) -> TimerBook:
        """The book as storage tells it: bucket runs up to the checkpoint, then the log."""
        storage = self.core.storage
        now = self.core.now_ms()
        book = TimerBook(
            limits.timer_bucket_ms,
            limits.timer_lookahead_ms,
            limits.timer_history_ms,
            limits.timer_history_max,
            now,
        )
        book.loaded_until_ms = bucket_of(now + book.lookahead_ms, book.bucket_ms) + book.bucket_ms
        raw = storage.read_all(layout.TIMER_CHECKPOINT)
        checkpoint = files.Checkpoint() if raw is None else files.decode_checkpoint(raw)
        self.checkpoint = checkpoint
        runs: dict[int, list[tuple[int, str]]] = {}
        self._runs_of: dict[int, list[tuple[int, int]]] = {}
        """Each bucket's runs up to the checkpoint's flush: (flush, size), oldest first."""
        for name in storage.list(layout.TIMER_BUCKETS):
            parsed = layout.parse_timer_run(name)
            if parsed is None:
                continue
            bucket, flush = parsed
            if flush > checkpoint.flush:
                continue  # left by a flush cut short: the log still holds it
            runs.setdefault(bucket, []).append((flush, name))
        for bucket in sorted(runs):
            timers: list[Timer] = []
            ended: list[TimerInfo] = []
            for flush, name in sorted(runs[bucket]):
                data = storage.read_all(name)
                if data is None:
                    continue
                self._runs_of.setdefault(bucket, []).append((flush, len(data)))
                run = files.decode_run(data)
                timers.extend(run.timers)
                ended.extend(run.ended)
            book.restore(timers, ended, now)
        offset = max(checkpoint.log_offset, self.log.start_offset)
        while True:
            records = self.log.read(offset, limits.read_records_max)
            if not records:
                break
            for record in records:
                entry = files.decode_entry(record.value)
                book.schedule(entry.scheduled, given_ids=False)  # checked when first taken
                for info in entry.ended:
                    book.ended(info)
            offset = records[-1].offset + 1
        log.info(
            "timers: %d pending, %d due within the look-ahead", len(book.pending), len(book.near)
        )
        self._broken = False
        return book

    def _check_usable(self) -> None:
        """Holding the mutex: rebuild first if a write failed since the last call."""
        self.core.check_open()
        if self._broken:
            log.warning("timers: rebuilding from storage after a failed write")
            self.book = self._restore()
            self._in_flight.clear()  # what the rebuilt book knows is durable

    # ------------------------------------------------------------ the log

    def _submit(self, entry: files.LogEntry) -> AppendRequest:
        """Holding the mutex: queue an entry for the timer log."""
        value = files.encode(entry)
        request = AppendRequest(self.log, Columns([value], size_bytes=len(value)), Waiter())
        self.core.submit(request)
        return request

    def _wait(self, request: AppendRequest) -> None:
        assert isinstance(request.on_done, Waiter)
        request.on_done.wait()
        try:
            request.result()
        except BaseException:
            self._broken = True
            raise

    # ------------------------------------------------------------ calls

    def schedule(self, timers: Sequence[Timer], given_ids: bool = True) -> None:
        """Take timers (checked by the caller); returns once they are durable.
        A timer whose id is known already is left as it is (the first stands);
        Conflict if it names another topic or record. `given_ids` False: every id
        was made by the broker, so none can be known."""
        with self.mutex:
            self._check_usable()
            # Back-pressure: timers wait in memory only until flushed, so a burst of
            # scheduling waits for the flush rather than filling memory.
            while (
                self.book.unflushed_count >= limits.timer_unflushed_max and not self._stop.is_set()
            ):
                self._wake.notify()
                self._flushed.wait(1.0)
            accepted = self.book.schedule(timers, given_ids)
            # A repeat of a timer whose first schedule is not durable yet (a client
            # sending again after its answer was slow) is acknowledged only once that
            # first entry is: else a crash could lose a timer twice acknowledged.
            taken = {t.id for t in accepted}
            earlier = {
                id(r): r
                for t in timers
                if t.id not in taken and (r := self._in_flight.get(t.id)) is not None
            }
            if not accepted:
                request = None
            else:
                request = self._submit(files.LogEntry(scheduled=accepted))
                for timer in accepted:
                    self._in_flight[timer.id] = request
            if accepted and (
                min(t.due_ms for t in accepted) < self.book.loaded_until_ms
                or self.book.unflushed_count >= limits.timer_flush_timers
            ):
                self._wake.notify()
        try:
            if request is not None:
                self._wait(request)
            for first in earlier.values():  # its Waiter is its own caller's: look, don't take
                while not first.answered and not self.core.closed:
                    self.core.wait_for_records(functools.partial(_answered, first), 1.0)
                try:
                    first.result()
                except BaseException:
                    self._broken = True
                    raise
        finally:
            if request is not None:
                with self.mutex:
                    for timer in accepted:
                        if self._in_flight.get(timer.id) is request:
                            del self._in_flight[timer.id]

    def cancel(self, timer_id: str) -> bool:
        """Cancel a pending timer, durably; False if it fired, was cancelled or is unknown."""
        with self.mutex:
            self._check_usable()
            info = self.book.cancel(timer_id, self.core.now_ms())
            if info is None:
                return False
            request = self._submit(files.LogEntry(ended=[info]))
        self._wait(request)
        return True

    def info(self, timer_id: str) -> TimerInfo | None:
        with self.mutex:
            self._check_usable()
            return self.book.info(timer_id)

    def list_pending(
        self,
        topic: str | None,
        due_from_ms: int | None,
        due_to_ms: int | None,
        after: tuple[int, str] | None,
        limit: int,
    ) -> tuple[list[TimerInfo], tuple[int, str] | None]:
        """Pending timers in order of (due time, id), past `after` and within the due
        window [due_from_ms, due_to_ms), of `topic` if given; at most `limit`, and the
        cursor to pass as `after` for the next page (None: no more).

        Only the ids of pending timers are kept in memory (as digests): the timers
        themselves are read from the buckets' run files, a bucket at a time, and those
        scheduled since the last flush from the book (the look-ahead holds copies of
        these). Flushes wait meanwhile, so no timer is between the book and a file."""
        low = max(due_from_ms or 0, after[0] if after else 0)
        with self._flush_mutex:
            with self.mutex:
                self._check_usable()
                starts = sorted(
                    start
                    for start in self.book.pending_by_bucket()
                    if start + self.book.bucket_ms > low
                    and (due_to_ms is None or start < due_to_ms)
                )
            found: list[Timer] = []
            for start in starts:
                stored = self._read_bucket(start)
                with self.mutex:
                    candidates = (*stored, *self.book.unflushed_in(start))
                    pending = {t.id: t for t in candidates if self.book.is_pending(t)}
                found.extend(
                    t
                    for t in sorted(pending.values(), key=lambda t: (t.due_ms, t.id))
                    if (topic is None or t.topic == topic)
                    and t.due_ms >= low
                    and (due_to_ms is None or t.due_ms < due_to_ms)
                    and (after is None or (t.due_ms, t.id) > after)
                )
                if len(found) > limit:
                    break
        page = found[:limit]
        more = len(found) > limit
        infos = [TimerInfo(t.id, "pending", t.topic, t.due_ms) for t in page]
        return infos, ((page[-1].due_ms, page[-1].id) if more else None)

    def poke(self) -> None:
        """Have the thread look at the clock now (for an injected clock that jumped)."""
        with self.mutex:
            self._wake.notify()

    def pending(self) -> int:
        return len(self.book.pending)

    def summary(self) -> TimerStats:
        """The read model of /metrics and the dashboard's timers page."""
        fired = self.stats
        return TimerStats(
            pending=self.pending(),
            pending_by_day=self.pending_by_day(),
            fired=fired.fired,
            lag_s=Histogram(
                bounds=FIRE_LAG_BUCKETS, counts=list(fired.lag_counts), sum=fired.lag_sum_s
            ),
        )

    def pending_by_day(self) -> list[tuple[int, int]]:
        """(the UTC day's start in ms, timers pending due that day), soonest first."""
        with self.mutex:
            buckets = self.book.pending_by_bucket()
        days: dict[int, int] = {}
        for start, count in buckets.items():
            day = start - start % DAY_MS
            days[day] = days.get(day, 0) + count
        return sorted(days.items())

    # ------------------------------------------------------------ the thread

    def _step(self) -> float:
        """One pass of the timer loop: load buckets coming within the look-ahead,
        fire what is due, flush when due. Returns the seconds to wait (none while
        more may be due). After a failure the book is rebuilt from storage first."""
        try:
            self._load_buckets()
            fired = self._fire_due()
            since_flush = self.core.clock.monotonic() - self._last_flush
            if since_flush >= limits.timer_flush_ms / 1000 or (
                self._unflushed_count() >= limits.timer_flush_timers
            ):
                self.flush()
        except Closed:
            raise
        except Exception:
            with self.mutex:
                self._broken = True
            raise
        if fired:
            return 0
        with self.mutex:
            return self._pause()

    def _sleep(self, seconds: float) -> None:
        """Wait for the next pass; a schedule, a cancel or stop wakes it early."""
        with self.mutex:
            if not self._stop.is_set():
                self._wake.wait(seconds)

    def _pause(self) -> float:
        """Holding the mutex: seconds until something is due, a bucket comes within
        the look-ahead, or a flush is due (at most a second)."""
        now = self.core.now_ms()
        wait = 1.0
        due = self.book.next_due_ms()
        if due is not None:
            wait = min(wait, (due - now) / 1000)
        load_at = self.book.loaded_until_ms - self.book.lookahead_ms
        wait = min(wait, (load_at - now) / 1000)
        return max(0.001, wait)

    def _unflushed_count(self) -> int:
        return self.book.unflushed_count

    def _load_buckets(self) -> None:
        with self.mutex:
            self._check_usable()
            starts = self.book.buckets_to_load(self.core.now_ms())
        for start in starts:
            timers = self._read_bucket(start)
            with self.mutex:
                self.book.load(start, timers)
                self._wake.notify()

    def _read_bucket(self, start: int) -> list[Timer]:
        storage = self.core.storage
        timers: list[Timer] = []
        prefix = layout.timer_bucket(start)
        for name in sorted(storage.list(prefix)):
            parsed = layout.parse_timer_run(name)
            if parsed is None or parsed[1] > self.checkpoint.flush:
                continue
            data = storage.read_all(name)
            if data is not None:
                timers.extend(files.decode_run_timers(data).timers)
        return timers

    def _fire_due(self) -> int:
        """Fire what is due now; returns how many fired."""
        with self.mutex:
            self._check_usable()
            now = self.core.now_ms()
            due = self.book.due(now, limits.timer_fire_batch)
        if not due:
            return 0
        try:
            placed = self._append(due)
        except BaseException:
            with self.mutex:
                self.book.put_back(due)
            raise
        with self.mutex:
            now = self.core.now_ms()
            infos = [self.book.fired(t, p, o, now) for t, (p, o) in zip(due, placed, strict=True)]
            request = self._submit(files.LogEntry(ended=infos))
        self._wait(request)
        for timer in due:
            self.stats.observe(max(0, now - timer.due_ms) / 1000)
        return len(due)

    def _append(self, due: list[Timer]) -> list[tuple[int, int]]:
        """Append the timers' records to their topics; (partition, offset) of each."""
        by_topic: dict[str, list[int]] = {}
        for i, timer in enumerate(due):
            by_topic.setdefault(timer.topic, []).append(i)
        placed: list[tuple[int, int]] = [(0, 0)] * len(due)
        for topic, indexes in by_topic.items():
            records = []
            for i in indexes:
                timer = due[i]
                headers = dict(timer.headers or {})
                headers[TIMER_HEADER] = timer.id.encode()
                records.append(Record(timer.value, timer.key, headers))
            keys: list[bytes | str | None] = [f"brook.timer:{due[i].id}" for i in indexes]
            checked = validate.records(records, keys, record_bytes_max=self.core.record_bytes_max)
            acks = self.core.append(topic, checked)
            for i, ack in zip(indexes, acks, strict=True):
                placed[i] = (ack.partition, ack.offset)
        return placed

    def flush(self) -> None:
        """Write what happened since the last flush to the buckets, then the checkpoint."""
        with self._flush_mutex:
            self._flush_now()

    def _flush_now(self) -> None:
        storage = self.core.storage

        def take() -> tuple[dict[int, Unflushed], int]:
            # With the writer role nothing is in flight: every entry submitted before
            # is durable below durable_offset, and what the book took covers them.
            with self.mutex:
                self._flushed.notify_all()
                return self.book.take_unflushed(), self.log.durable_offset

        taken, cut = self.core.call(take)
        self._last_flush = self.core.clock.monotonic()
        if not taken:
            return
        flush = self.checkpoint.flush + 1
        written: dict[int, int] = {}
        merged: dict[int, list[int]] = {}
        try:
            for start, part in taken.items():
                run = files.encode(files.Run(part.timers, part.ended))
                older = self._runs_of.get(start, [])
                count = merging.runs_to_merge(
                    [size for _, size in older], len(run), limits.timer_bucket_runs_merge
                )
                if count:
                    merged[start] = [f for f, _ in older[-count:]]
                    run = self._merged(start, merged[start], run, whole=count == len(older))
                storage.write_atomic(layout.timer_run(start, flush), run)
                written[start] = len(run)
            checkpoint = files.Checkpoint(flush, cut)
            storage.write_atomic(layout.TIMER_CHECKPOINT, msgspec.json.encode(checkpoint))
        except StorageError:
            with self.mutex:
                self.book.restore_unflushed(taken)
            raise
        self.checkpoint = checkpoint
        for start, size in written.items():
            runs = self._runs_of.setdefault(start, [])
            if start in merged:
                del runs[-len(merged[start]) :]
            runs.append((flush, size))
        # The merged run holds what the older ones did: those can go (a crash before
        # they do leaves both, and restoring a timer twice keeps one).
        for start, flushes in merged.items():
            for old in flushes:
                storage.delete(layout.timer_run(start, old))
        self._forget_past_buckets()

    def _merged(self, start: int, older: list[int], newest: bytes, whole: bool) -> bytes:
        """One run holding bucket `start`'s runs of flushes `older` and then `newest`;
        `whole`: those are all its runs."""
        runs = [
            data
            for flush in older
            if (data := self.core.storage.read_all(layout.timer_run(start, flush))) is not None
        ]
        since = self.core.now_ms() - self.book.history_ms
        return merging.merge([*runs, newest], whole, since)

    def _forget_past_buckets(self) -> None:
        """Delete the files of buckets past for longer than the history is kept, with
        nothing pending: until then they tell restarts what fired and was cancelled."""
        storage = self.core.storage
        now = self.core.now_ms()
        with self.mutex:
            self.book.forget_old(now)
            starts = {
                parsed[0]
                for name in storage.list(layout.TIMER_BUCKETS)
                if (parsed := layout.parse_timer_run(name)) is not None
            }
            past = [
                s
                for s in sorted(starts)
                if s + self.book.bucket_ms + self.book.history_ms <= now
                and not self.book.pending_in(s)
            ]
        for start in past:
            self._runs_of.pop(start, None)
            storage.delete_prefix(layout.timer_bucket(start))

    def maintain(self) -> None:
        """Writer role: delete timer-log segments wholly behind the checkpoint."""
        self.log.drop_before(self.checkpoint.log_offset)

    def stop(self) -> None:
        """Stop the thread (before the committer closes)."""
        with self.mutex:
            self._stop.set()
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join()

    def close(self) -> None:
        """Close the timer log (after the committer closed)."""
        self.log.close()


def _answered(request: AppendRequest) -> bool:
    return request.answered
