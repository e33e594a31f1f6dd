"""The task worker's ledger: the jobs it holds, what each is doing, what to do next.

Pure: no threads, no I/O, no clock. The worker (tasks/worker.py) drives it with the
time passed in and carries out what it answers; the seeded simulation
(tests/sim/test_worker_sim.py) drives the same ledger against a model broker and
checks what the worker promises (docs/TASKS.md):

```
   lease ──dispatch──▶ waiting ──start──▶ running ──return──▶ finished ──settled──▶ gone
     │                                      │                    ▲
     │ not this worker's task:              └─ deadline ▶ overdue ┘ (returns at last:
     │ released or dead ─────────────────────────────────▶ finished   its result dropped)
```

- **Dispatch by name.** A job runs the function its own record names, never the one
  whose queue it was leased from. A task this worker does not run but its app
  declares (another worker runs it: `--tasks`) is *released*, its attempt not
  spent, after a pause that doubles each time this worker meets the same job; a task
  the app does not declare ends dead (`no task named ...`).
- **Slots.** At most `slots` jobs run at once, of every kind; the rest wait, leased,
  first come first served. A job keeps its slot until its run returns, even past its
  deadline: a sync thread cannot be stopped, so it keeps its slot, its lease
  (extended) and so its key until it really ends — never two runs of one job or key.
- **Room.** The worker holds at most `held_per_slot` jobs per slot waiting or
  running (Celery's prefetch) on reserved room, plus at most one per feeder waiting
  idle for work. A job's room is free again once it finished running (or will not run
  here); it stays held, its lease kept, until it is settled.
- **Deadlines.** A run past its task's `timeout_ms` is *overdue*: its attempt is
  failed at once (the worker cancels an async run, kills a process one, logs a
  thread one), and settled as failed when its run ends.
- **Leases.** Every job held, whatever it is doing, is extended each third of its
  visibility timeout, until it is settled.
"""

from __future__ import annotations

import enum
import random
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from brook import limits
from brook.models import Backoff
from brook.retry import retry_delay

_SPREAD = limits.worker_release_spread
_RELEASE = Backoff(
    min_ms=round(limits.worker_release_ms_min * (1 + _SPREAD)),
    factor=2.0,
    max_ms=round(limits.worker_release_ms_max * (1 + _SPREAD)),
    jitter=2 * _SPREAD / (1 + _SPREAD),
)
"""A release's pause as retry_delay takes it: the base times 1 + spread, less up to the
jitter of it, is the base times 1 - spread to 1 + spread."""


class Stage(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    OVERDUE = "overdue"
    FINISHED = "finished"

    __hash__ = object.__hash__


@dataclass(slots=True)
class Leased:
    """A job as leased: what the ledger needs of it."""

    receipt: str
    topic: str
    task: str | None
    """The task its record names; None when the record is not a task's call."""
    key: bytes | None = None
    visibility_ms: int = 30_000
    problem: str = ""
    """Why the record is not a task's call (when `task` is None)."""
    position: tuple[int, int] = (0, 0)
    """(partition, offset): the job, across leases (for the release pause)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a job ends: the call that settles it."""

    action: str
    """ack, nack, discard or release."""
    result: bytes | None = None
    reason: str = ""
    delay_ms: int | None = None

    @staticmethod
    def timed_out(timeout_ms: int) -> Outcome:
        return Outcome("nack", reason=f"TimeoutError: ran longer than timeout_ms ({timeout_ms})")


@dataclass(slots=True)
class Settle:
    """A job to settle now, with its outcome."""

    receipt: str
    topic: str
    task: str | None
    outcome: Outcome
    ran_ms: float
    """How long it ran (0 when it never ran)."""


@dataclass(slots=True)
class Held:
    """One job the worker holds."""

    leased: Leased
    reserved: bool
    stage: Stage
    leased_ms: float
    lease_until_ms: float
    started_ms: float | None = None
    deadline_ms: float | None = None
    outcome: Outcome | None = None
    """Decided already (a timeout): what its return will not change."""


class Ledger:
    def __init__(
        self,
        slots: int,
        runs: Iterable[str],
        declared: Iterable[str],
        timeouts_ms: dict[str, int | None] | None = None,
        feeders: int = 1,
        held_per_slot: int = limits.worker_jobs_held_per_slot,
        deadline_at_begin: Iterable[str] = (),
        rng: random.Random | None = None,
    ) -> None:
        assert slots >= 1 and feeders >= 1 and held_per_slot >= 1
        self.slots = slots
        self.runs = frozenset(runs)
        self.declared = frozenset(declared) | self.runs
        self.timeouts_ms = dict(timeouts_ms or {})
        self.deadline_at_begin = frozenset(deadline_at_begin)
        self.rng = rng or random.Random()
        """Tasks whose deadline counts from `begin`, not from the start of their slot."""
        self.feeders = feeders
        self.room_max = held_per_slot * slots
        self.room = self.room_max
        """Room free to reserve: room_max less what is reserved or held on reserved room."""
        self.reserved_out = 0
        """Room reserved by feeders with a lease in flight."""
        self.idle_out = 0
        """Idle feeders' leases in flight (one job each, on no room)."""
        self.idle_held = 0
        """Jobs held on no room (brought by idle feeders)."""
        self.held: dict[str, Held] = {}
        self.busy = 0
        """Slots taken: jobs running or overdue."""
        self._waiting: OrderedDict[str, None] = OrderedDict()
        self._releases: OrderedDict[tuple[str, int, int], int] = OrderedDict()
        """How often this worker released each job lately (for the release pause)."""

    # ------------------------------------------------------------ room

    def reserve(self, want: int, idle: bool = False) -> int:
        """Room for a lease of up to `want` jobs, taken now; how many it may bring.
        An idle feeder (its last lease found nothing) asks for one job on room of
        its own, outside the reserved count, while fewer than one per feeder are so
        held: an idle task keeps no room from a busy one, nor a busy one from it."""
        if idle:
            given = 1 if self.idle_held + self.idle_out < self.feeders else 0
            self.idle_out += given
            return given
        given = max(0, min(want, self.room))
        self.room -= given
        self.reserved_out += given
        return given

    def leased(self, jobs: list[Leased], asked: int, idle: bool, now_ms: float) -> list[Settle]:
        """Take the jobs a lease of `asked` (as `reserve` gave) brought, giving back
        the room it did not fill; the jobs this worker does not run, to settle now."""
        assert len(jobs) <= asked
        if idle:
            assert asked <= self.idle_out
            self.idle_out -= asked
            self.idle_held += len(jobs)
        else:
            assert asked <= self.reserved_out
            self.reserved_out -= asked
            self.room += asked - len(jobs)
        now_settle: list[Settle] = []
        for job in jobs:
            assert job.receipt not in self.held, f"{job.receipt} leased twice"
            held = Held(job, not idle, Stage.WAITING, now_ms, now_ms + job.visibility_ms)
            self.held[job.receipt] = held
            outcome = self._dispatch(job)
            if outcome is None:
                self._waiting[job.receipt] = None
            else:
                held.outcome = outcome
                self._finish(held)
                now_settle.append(Settle(job.receipt, job.topic, job.task, outcome, 0.0))
        return now_settle

    def _finish(self, held: Held) -> None:
        """The job is done with here (ran, or will not run here): its room is free for
        the next, though it stays held, its lease kept, until it is settled."""
        held.stage = Stage.FINISHED
        if held.reserved:
            self.room += 1
        else:
            self.idle_held -= 1

    def _dispatch(self, job: Leased) -> Outcome | None:
        """None: run it here; otherwise how it ends without running here."""
        if job.task is None:
            return Outcome("discard", reason=job.problem or "not a task record")
        if job.task in self.runs:
            return None
        if job.task in self.declared:
            where = (job.topic, *job.position)
            times = self._releases.pop(where, 0)
            self._releases[where] = times + 1
            while len(self._releases) > limits.worker_releases_kept_max:
                self._releases.popitem(last=False)
            # Jittered: a pause in step with the releasing worker's own long-polls handed
            # the job back to it again and again, the right worker idle (a fresh-clone
            # trial: 8 releases in a row, 62 s late).
            delay = retry_delay(_RELEASE, times + 1, self.rng)
            return Outcome(
                "release",
                reason=f"task {job.task} does not run in this worker (--tasks): "
                "released for a worker that runs it",
                delay_ms=delay,
            )
        known = ", ".join(sorted(self.declared)) or "none"
        return Outcome("discard", reason=f"no task named {job.task} (the app has: {known})")

    # ------------------------------------------------------------ runs

    def startable(self, now_ms: float) -> list[Held]:
        """Waiting jobs given a free slot now, in the order leased: each starts now, its
        deadline counted from now (from `begin` for a task in `deadline_at_begin`)."""
        started: list[Held] = []
        while self._waiting and self.busy < self.slots:
            receipt, _ = self._waiting.popitem(last=False)
            held = self.held[receipt]
            held.stage, held.started_ms = Stage.RUNNING, now_ms
            task = held.leased.task or ""
            if task not in self.deadline_at_begin:
                timeout = self.timeouts_ms.get(task)
                held.deadline_ms = None if timeout is None else now_ms + timeout
            self.busy += 1
            started.append(held)
        return started

    def begin(self, receipt: str, now_ms: float) -> float | None:
        """The job's function is called only now (its child process had to start
        first): its deadline counts from here. The deadline, or None."""
        held = self.held[receipt]
        assert held.stage is Stage.RUNNING, f"{receipt} begun while {held.stage}"
        held.started_ms = now_ms
        timeout = self.timeouts_ms.get(held.leased.task or "")
        held.deadline_ms = None if timeout is None else now_ms + timeout
        return held.deadline_ms

    def returned(self, receipt: str, now_ms: float, outcome: Outcome) -> Settle:
        """A run ended with `outcome` (dropped if its deadline had passed): its slot is
        free; the job is to be settled."""
        held = self.held[receipt]
        assert held.stage in (Stage.RUNNING, Stage.OVERDUE), f"{receipt} returned {held.stage}"
        assert held.started_ms is not None
        self.busy -= 1
        if held.stage is Stage.RUNNING:
            held.outcome = outcome
        self._finish(held)
        assert held.outcome is not None
        ran = now_ms - held.started_ms
        return Settle(receipt, held.leased.topic, held.leased.task, held.outcome, ran)

    def settled(self, receipts: Iterable[str]) -> None:
        """The jobs are settled (or given up: their leases run out): forget them."""
        for receipt in receipts:
            held = self.held.pop(receipt)
            assert held.stage is Stage.FINISHED, f"{receipt} settled while {held.stage}"

    # ------------------------------------------------------------ time

    def overdue(self, now_ms: float) -> list[Held]:
        """Runs whose deadline passed by `now_ms`, newly: their attempts fail now
        (cancel or kill what can be stopped; a thread runs on, holding its slot)."""
        found: list[Held] = []
        for held in self.held.values():
            deadline = held.deadline_ms
            if held.stage is Stage.RUNNING and deadline is not None and now_ms >= deadline:
                held.stage = Stage.OVERDUE
                held.outcome = Outcome.timed_out(self.timeouts_ms[held.leased.task or ""] or 0)
                found.append(held)
        return found

    def next_deadline_ms(self) -> float | None:
        deadlines = [
            h.deadline_ms
            for h in self.held.values()
            if h.stage is Stage.RUNNING and h.deadline_ms is not None
        ]
        return min(deadlines) if deadlines else None

    def due_extensions(self, now_ms: float) -> dict[str, list[str]]:
        """Receipts whose leases to extend now, by topic: every job held (whatever it
        does, until it is settled) once two thirds of its visibility timeout are left."""
        due: dict[str, list[str]] = {}
        for held in self.held.values():
            if now_ms >= self._extend_at(held):
                due.setdefault(held.leased.topic, []).append(held.leased.receipt)
        return due

    def extended(self, receipts: Iterable[str], until_ms: float) -> None:
        """The broker extended these leases until `until_ms` (as asked: from the
        moment the extension was sent)."""
        for receipt in receipts:
            held = self.held.get(receipt)
            if held is not None:
                held.lease_until_ms = until_ms

    def next_extension_ms(self) -> float | None:
        return min((self._extend_at(h) for h in self.held.values()), default=None)

    @staticmethod
    def _extend_at(held: Held) -> float:
        """A lease is extended once two thirds of its visibility timeout are left."""
        return held.lease_until_ms - held.leased.visibility_ms * 2 / 3

    # ------------------------------------------------------------ checks

    @property
    def unfinished(self) -> int:
        """Jobs running or waiting for a slot."""
        return self.busy + len(self._waiting)

    @property
    def running(self) -> int:
        return sum(1 for h in self.held.values() if h.stage in (Stage.RUNNING, Stage.OVERDUE))

    def check(self) -> None:
        """Assert the ledger's invariants (the simulation calls it after every step)."""
        live = [h for h in self.held.values() if h.stage is not Stage.FINISHED]
        on_room = sum(1 for h in live if h.reserved)
        assert self.room + self.reserved_out + on_room == self.room_max, "room leaked"
        assert 0 <= self.room <= self.room_max
        assert self.busy == self.running <= self.slots, "slots miscounted"
        idle = len(live) - on_room
        assert idle == self.idle_held, "idle jobs miscounted"
        assert idle + self.idle_out <= self.feeders, f"{idle} held idle, {self.feeders} feeders"
        waiting = [r for r, h in self.held.items() if h.stage is Stage.WAITING]
        assert sorted(waiting) == sorted(self._waiting), "the waiting line lost a job"
