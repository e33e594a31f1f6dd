"""Periodic schedules, stored in the broker and fired through its timers.

Each schedule is one file (`schedules/<name>.json`, written atomically): its
definition and where it stands. A schedule that is not paused always has its
next slot armed: a timer `sched:<name>:<slot>` due at the slot, appending the
schedule's record (with headers `brook.schedule` and `brook.slot_ms`). A loop
looks at the armed timers; once one has fired it records the slot as done and
arms the next slot after now. A timer id is taken once, and the file moves on
only after its timer is seen fired, so each slot appends at most one record and,
unless skipped, exactly one, across restarts and take-overs: a broker that
stopped between the two arms the same slot again, which is a no-op.

Slots the broker was down over: at start, before the timers fire anything, an
armed slot more than `schedule_late_ms` in the past is cancelled if the schedule
says `missed="skip"` (the next slot after now is armed instead); with
`run_once` it fires at once, once, for all the slots missed.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

import msgspec

from brook import layout, limits, validate
from brook.errors import BadRequest, Conflict, ScheduleNotFound
from brook.records import ScheduleInfo
from brook.schedules.model import Spec, State, Stored, check, next_slot
from brook.timers.model import Timer

if TYPE_CHECKING:
    from brook.core import Core
    from brook.timers.service import TimerService

log = logging.getLogger("brook.schedules")

_decode = msgspec.json.Decoder(Stored).decode
_encode = msgspec.json.encode


class ScheduleService:
    def __init__(self, core: Core, timers: TimerService) -> None:
        self.core = core
        self.timers = timers
        self.mutex = threading.Lock()
        self._stored: dict[str, Stored] = {}
        for name in core.storage.list(layout.SCHEDULES):
            parsed = layout.parse_schedule(name)
            raw = core.storage.read_all(name) if parsed is not None else None
            if parsed is None or raw is None:
                continue
            try:
                self._stored[parsed] = _decode(raw)
            except msgspec.DecodeError as exc:
                log.error("schedule %s is unreadable (%s): left as it is", parsed, exc)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if not core.read_only:
            self._catch_up()
            self._thread = core.supervisor.start("schedules", self._step, self._stop)

    # ------------------------------------------------------------ calls

    def put(self, spec: Spec) -> ScheduleInfo:
        """Create a schedule, or change one: a change of its timing re-arms it from now."""
        self.core.check_writable("change a schedule")
        check(spec)
        validate.topic_name(spec.topic)
        with self.mutex:
            now = self.core.now_ms()
            old = self._stored.get(spec.name)
            if old is None and len(self._stored) >= limits.schedules_max:
                raise Conflict(f"at most {limits.schedules_max} schedules: delete some first")
            if old is not None and old.spec == spec:
                return self._info(old)
            if old is not None:
                old = self._observed(old)
            state = State(created_ms=now)
            if old is not None:
                self._disarm(old)
                state = msgspec.structs.replace(old.state, version=old.state.version + 1)
            if not state.paused:
                state = msgspec.structs.replace(state, next_ms=next_slot(spec, now))
            stored = Stored(spec, state)
            self._write(stored)
            if not state.paused:
                self._arm(stored)
            return self._info(stored)

    def get(self, name: str) -> ScheduleInfo:
        with self.mutex:
            return self._info(self._find(name))

    def list(self) -> list[ScheduleInfo]:
        with self.mutex:
            return [self._info(self._stored[name]) for name in sorted(self._stored)]

    def pause(self, name: str) -> ScheduleInfo:
        """No slot fires until `resume`; the armed one is cancelled."""
        self.core.check_writable("change a schedule")
        with self.mutex:
            stored = self._find(name)
            if stored.state.paused:
                return self._info(stored)
            self._disarm(stored)
            stored = self._observed(stored)  # counted if it fired before it could be cancelled
            stored = Stored(
                stored.spec, msgspec.structs.replace(stored.state, paused=True, next_ms=None)
            )
            self._write(stored)
            return self._info(stored)

    def resume(self, name: str) -> ScheduleInfo:
        """Fire again from the next slot after now (the slots paused over are not run)."""
        self.core.check_writable("change a schedule")
        with self.mutex:
            stored = self._find(name)
            if not stored.state.paused:
                return self._info(stored)
            slot = next_slot(stored.spec, self.core.now_ms())
            stored = Stored(
                stored.spec, msgspec.structs.replace(stored.state, paused=False, next_ms=slot)
            )
            self._write(stored)
            self._arm(stored)
            return self._info(stored)

    def delete(self, name: str) -> bool:
        self.core.check_writable("change a schedule")
        with self.mutex:
            stored = self._stored.get(name)
            if stored is None:
                return False
            self._disarm(stored)
            self.core.storage.delete(layout.schedule(name))
            del self._stored[name]
            return True

    # ------------------------------------------------------------ firing

    def _catch_up(self) -> None:
        """At start, before any timer fires: skip the slots missed long ago where
        the schedule says so, and arm every schedule (a crash may have come between
        writing a schedule and arming it)."""
        now = self.core.now_ms()
        with self.mutex:
            for stored in list(self._stored.values()):
                slot = stored.state.next_ms
                if slot is None:
                    continue
                late = stored.spec.missed == "skip" and now - slot > limits.schedule_late_ms
                if late and self.timers.cancel(stored.timer(slot)):
                    later = next_slot(stored.spec, now)
                    log.info(
                        "schedule %s: slot %d missed while the broker was down: skipped",
                        stored.spec.name,
                        slot,
                    )
                    stored = Stored(
                        stored.spec,
                        msgspec.structs.replace(
                            stored.state, next_ms=later, skipped=stored.state.skipped + 1
                        ),
                    )
                    self._write(stored)
                self._arm(stored)

    def _step(self) -> float:
        """Move every schedule whose armed slot fired on to its next slot."""
        with self.mutex:
            for stored in list(self._stored.values()):
                slot = stored.state.next_ms
                if slot is None or slot > self.core.now_ms():
                    continue
                info = self.timers.info(stored.timer(slot))
                if info is None:
                    self._arm(stored)  # lost before it was durable: arm it again
                    continue
                if info.state == "pending":
                    continue
                stored = self._observed(stored)
                later = next_slot(stored.spec, max(slot, self.core.now_ms()))
                stored = Stored(stored.spec, msgspec.structs.replace(stored.state, next_ms=later))
                self._write(stored)
                self._arm(stored)
        return limits.schedule_check_ms / 1000

    def _observed(self, stored: Stored) -> Stored:
        """Holding the mutex: the schedule with its armed slot counted if its timer
        fired (the slot stays armed: the caller moves on from it)."""
        slot = stored.state.next_ms
        if slot is None or stored.state.last_slot_ms == slot:
            return stored
        info = self.timers.info(stored.timer(slot))
        if info is None or info.state != "fired":
            return stored
        state = msgspec.structs.replace(
            stored.state,
            last_slot_ms=slot,
            last_fired_ms=info.at_ms,
            last_partition=info.partition,
            last_offset=info.offset,
            fired=stored.state.fired + 1,
        )
        return Stored(stored.spec, state)

    def _arm(self, stored: Stored) -> None:
        """Holding the mutex: the timer of the schedule's next slot (a no-op when it
        exists, pending or fired)."""
        slot = stored.state.next_ms
        if slot is None:
            return
        spec = stored.spec
        headers = dict(spec.headers or {})
        headers["brook.schedule"] = spec.name.encode()
        headers["brook.slot_ms"] = str(slot).encode()
        timer = Timer(stored.timer(slot), spec.topic, slot, spec.value, spec.key, headers)
        self.timers.schedule([timer])

    def _disarm(self, stored: Stored) -> None:
        """Holding the mutex: cancel the timer of its armed slot, if one is."""
        if stored.state.next_ms is not None:
            self.timers.cancel(stored.timer(stored.state.next_ms))

    def _write(self, stored: Stored) -> None:
        self.core.storage.write_atomic(layout.schedule(stored.spec.name), _encode(stored))
        self._stored[stored.spec.name] = stored

    def _find(self, name: str) -> Stored:
        stored = self._stored.get(name)
        if stored is None:
            raise ScheduleNotFound(f"no schedule named {name!r}")
        return stored

    @staticmethod
    def _info(stored: Stored) -> ScheduleInfo:
        spec, state = stored.spec, stored.state
        return ScheduleInfo(
            name=spec.name,
            topic=spec.topic,
            cron=spec.cron,
            every_ms=spec.every_ms,
            tz=spec.tz,
            missed=spec.missed,
            paused=state.paused,
            next_ms=state.next_ms,
            last_slot_ms=state.last_slot_ms,
            last_fired_ms=state.last_fired_ms,
            last_partition=state.last_partition,
            last_offset=state.last_offset,
            fired=state.fired,
            skipped=state.skipped,
            created_ms=state.created_ms,
            value=spec.value,
            key=spec.key,
            headers=spec.headers,
        )

    # ------------------------------------------------------------ the broker's

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def close(self) -> None:
        pass


def spec_of(name: str, topic: str, **given: Any) -> Spec:
    """A Spec from a call's arguments, bytes and types checked."""
    value = given.get("value", b"")
    key = given.get("key")
    headers = given.get("headers")
    record, _ = validate.record(value, key, headers)
    every_ms = given.get("every_ms")
    cron = given.get("cron")
    if cron is not None and not isinstance(cron, str):
        raise BadRequest("cron must be a string such as '*/5 * * * *'")
    return Spec(
        name=str(name),
        topic=topic,
        cron=cron,
        every_ms=None if every_ms is None else validate.whole(every_ms, "every_ms", 1),
        tz=str(given.get("tz") or "UTC"),
        missed=str(given.get("missed") or "skip"),
        value=record.value,
        key=record.key,
        headers=record.headers,
    )
