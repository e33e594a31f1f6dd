"""A seeded simulation of task workers: two workers' ledgers (brook/tasks/ledger.py)
driven as the real worker drives its own, against a model broker, with time passed in.

The workers run different tasks of one app on one queue (Celery-style routing with
`--tasks`), jobs of every kind (threads that hang past their deadline, async runs
that are cancelled, process runs that are killed), per-key concurrency of one, slow
and failing settles and extensions. Checked all along and at the end:

- a job runs only the function its record names, and only on a worker that runs it;
  a job naming a task the app does not have ends dead, never run;
- never two runs of one key at once (a thread past its deadline keeps its key);
- every leased job is settled, or its lease left to run out; nothing is left held;
- no room or slot leaks, and the prefetch bound holds: jobs waiting or running at most
  the room plus one per feeder (`Ledger.check`);
- a deadline is noticed within 100 ms (here: at once, the loop waking for it).

Set BROOK_SEED to replay one seed; BROOK_WORKER_SIM_SEEDS runs more (make reliability).
"""

from __future__ import annotations

import itertools
import os
import random
from dataclasses import dataclass, field

import pytest

from brook.tasks.ledger import Leased, Ledger, Outcome, Settle, Stage

DECLARED = ("thread", "coro", "proc", "other")
"""The app's tasks: a sync one, an async one, a process-isolated one, and one that
only the second worker runs."""
KINDS = {"thread": "thread", "coro": "async", "proc": "process", "other": "thread"}
TIMEOUTS = {"thread": 40, "coro": 40, "proc": 40, "other": None}
VISIBILITY_MS = 300
MAX_ATTEMPTS = 4
SEEDS = int(os.environ.get("BROOK_WORKER_SIM_SEEDS", "200"))


@dataclass
class Record:
    position: int
    task: str | None
    key: str
    state: str = "ready"  # ready, leased, acked, dead
    attempt: int = 0
    ready_at: float = 0.0
    receipt: str | None = None
    lease_until: float = 0.0
    error: str = ""


class Broker:
    """A queue group with a per-key concurrency of one, as the real group keeps it."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.by_receipt: dict[str, Record] = {}
        self.serial = 0

    def _expire(self, now: float) -> None:
        for record in self.records:
            if record.state == "leased" and now >= record.lease_until:
                self.by_receipt.pop(record.receipt or "", None)
                record.receipt = None
                if record.attempt >= MAX_ATTEMPTS:
                    record.state, record.error = "dead", "lease expired on the last attempt"
                else:
                    record.state, record.ready_at = "ready", now

    def lease(self, now: float, want: int) -> list[tuple[str, Record]]:
        self._expire(now)
        busy = {r.key for r in self.records if r.state == "leased"}
        got = []
        for record in self.records:
            if len(got) >= want:
                break
            if record.state != "ready" or record.ready_at > now or record.key in busy:
                continue
            self.serial += 1
            receipt = f"r{self.serial}"
            record.state, record.receipt = "leased", receipt
            record.attempt += 1
            record.lease_until = now + VISIBILITY_MS
            self.by_receipt[receipt] = record
            busy.add(record.key)
            got.append((receipt, record))
        return got

    def live(self, receipt: str, now: float) -> Record | None:
        self._expire(now)
        return self.by_receipt.get(receipt)

    def settle(self, receipt: str, now: float, outcome: Outcome) -> bool:
        record = self.live(receipt, now)
        if record is None:
            return False
        del self.by_receipt[receipt]
        record.receipt = None
        if outcome.action == "ack":
            record.state = "acked"
        elif outcome.action == "discard":
            record.state, record.error = "dead", outcome.reason
        elif outcome.action == "release":
            record.attempt -= 1
            record.state, record.ready_at = "ready", now + (outcome.delay_ms or 0)
        elif record.attempt >= MAX_ATTEMPTS:
            record.state, record.error = "dead", outcome.reason
        else:
            record.state, record.ready_at = "ready", now + (outcome.delay_ms or 5)
        return True

    def extend(self, receipt: str, now: float) -> bool:
        record = self.live(receipt, now)
        if record is None:
            return False
        record.lease_until = now + VISIBILITY_MS
        return True


@dataclass
class Run:
    receipt: str
    record: Record
    began: float
    returns_at: float
    worker: int


@dataclass
class SimWorker:
    number: int
    ledger: Ledger
    feeding: bool = True
    runs: dict[str, Run] = field(default_factory=dict)
    to_settle: list[tuple[float, Settle]] = field(default_factory=list)
    """Settles in flight: (when the broker takes them, the settle)."""
    records: dict[str, Record] = field(default_factory=dict)


def simulate(seed: int) -> None:
    rng = random.Random(seed)
    names = [*DECLARED, "nonesuch", None]
    weights = [5, 5, 5, 3, 1, 1]
    records = [
        Record(i, rng.choices(names, weights)[0], f"k{rng.randrange(12)}") for i in range(80)
    ]
    broker = Broker(records)
    runs_of = [("thread", "coro", "proc"), ("thread", "other")]
    workers = [
        SimWorker(
            n,
            Ledger(
                rng.choice([1, 2, 4]),
                runs=runs_of[n],
                declared=DECLARED,
                timeouts_ms=TIMEOUTS,
                feeders=2,
                held_per_slot=rng.choice([1, 2, 4]),
                rng=random.Random(rng.random()),
            ),
        )
        for n in range(2)
    ]
    ran: list[Run] = []
    overdue_lag: list[float] = []
    now = 0.0
    horizon = 20_000.0

    def context() -> str:
        return f"seed {seed} at {now:.0f} ms (replay with BROOK_SEED={seed})"

    def durations(task: str) -> float:
        if rng.random() < 0.15:
            return rng.uniform(50, 800)  # past the deadline of a timed task (and a lease)
        return rng.uniform(1, 30)

    for _step in range(20_000):
        if now > horizon:
            break
        for worker in workers:
            ledger = worker.ledger
            # Feed: a busy lease on reserved room, or an idle one.
            if worker.feeding and rng.random() < 0.5:
                idle = rng.random() < 0.3
                asked = ledger.reserve(rng.randint(1, 6), idle=idle)
                if asked:
                    got = broker.lease(now, asked)
                    leased = [
                        Leased(
                            receipt,
                            "q",
                            record.task,
                            record.key.encode(),
                            VISIBILITY_MS,
                            "not a task record" if record.task is None else "",
                            (0, record.position),
                        )
                        for receipt, record in got
                    ]
                    for receipt, record in got:
                        worker.records[receipt] = record
                    for settle in ledger.leased(leased, asked, idle, now):
                        worker.to_settle.append((now + rng.uniform(0, 10), settle))
            # Start what has a slot.
            for held in ledger.startable(now):
                receipt = held.leased.receipt
                record = worker.records[receipt]
                task = held.leased.task
                assert task is not None and task == record.task, context()
                assert task in ledger.runs, f"{task} ran on a worker without it ({context()})"
                began = now + rng.uniform(0, 2)
                ledger.begin(receipt, began)
                run = Run(receipt, record, began, began + durations(task), worker.number)
                worker.runs[receipt] = run
                ran.append(run)
            # Deadlines: async runs are cancelled, process runs killed: they end now.
            for held in ledger.overdue(now):
                assert held.deadline_ms is not None
                overdue_lag.append(now - held.deadline_ms)
                run = worker.runs[held.leased.receipt]
                kind = KINDS[held.leased.task or ""]
                if kind in ("async", "process"):
                    run.returns_at = min(run.returns_at, now + rng.uniform(0, 1))
            # Runs that return now.
            for receipt, run in list(worker.runs.items()):
                if run.returns_at <= now:
                    del worker.runs[receipt]
                    run.returns_at = now
                    roll = rng.random()
                    outcome = (
                        Outcome("ack")
                        if roll < 0.7
                        else Outcome("nack", reason="ValueError: no")
                        if roll < 0.9
                        else Outcome("discard", reason="Discard")
                    )
                    settle = ledger.returned(receipt, now, outcome)
                    if ledger.held[receipt].outcome is not outcome:
                        assert settle.outcome.reason.startswith("TimeoutError"), context()
                    worker.to_settle.append((now + rng.uniform(0, 15), settle))
            # Settles the broker takes now (some fail once and are sent again).
            pending = []
            for at, settle in worker.to_settle:
                if at > now:
                    pending.append((at, settle))
                elif rng.random() < 0.1:
                    pending.append((now + rng.uniform(1, 20), settle))  # unreachable: again
                else:
                    landed = broker.settle(settle.receipt, now, settle.outcome)
                    assert landed, f"a held job's lease ran out before it was settled ({context()})"
                    ledger.settled([settle.receipt])
                    worker.records.pop(settle.receipt)
            worker.to_settle = pending
            # Leases due for extension (an extension may fail once; tried again next step).
            for receipts in ledger.due_extensions(now).values():
                if rng.random() < 0.1:
                    continue
                kept = [r for r in receipts if broker.extend(r, now)]
                assert kept == receipts, f"a held job's lease ran out ({context()})"
                ledger.extended(receipts, now + VISIBILITY_MS)
            ledger.check()
            waiting_or_running = [h for h in ledger.held.values() if h.stage is not Stage.FINISHED]
            assert len(waiting_or_running) <= ledger.room_max + ledger.feeders, context()
        # Stop feeding after a while: the workers drain.
        if now > horizon / 2:
            for worker in workers:
                worker.feeding = False
        # Next moment: soon, or the next deadline exactly (the loop wakes for it).
        wakes = [now + rng.uniform(0.5, 10)]
        for worker in workers:
            deadline = worker.ledger.next_deadline_ms()
            if deadline is not None:
                wakes.append(max(deadline, now + 0.001))
        now = min(wakes)
        if now > horizon / 2 and not any(w.ledger.held for w in workers):
            break
    for worker in workers:
        assert not worker.ledger.held, f"jobs left held ({context()})"
        ledger = worker.ledger
        assert ledger.room == ledger.room_max and ledger.busy == 0, context()
        assert ledger.reserved_out == 0 and ledger.idle_out == 0, context()
    assert all(lag <= 100 for lag in overdue_lag), f"late deadline {max(overdue_lag)} ({context()})"
    # Never two runs of one key at once (a run lasts from its start to its real return).
    by_key: dict[str, list[Run]] = {}
    for run in ran:
        by_key.setdefault(run.record.key, []).append(run)
    for key, key_runs in by_key.items():
        spans = sorted((r.began, r.returns_at) for r in key_runs)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end, f"two runs of key {key} overlap ({context()})"
    ran_positions = {run.record.position for run in ran}
    for record in records:
        if record.task in ("nonesuch", None):
            assert record.position not in ran_positions, context()
            if record.state != "ready":  # (leased once at least: it ended dead)
                assert record.state == "dead", context()


@pytest.mark.parametrize("batch", range(4))
def test_workers_keep_their_promises(batch: int) -> None:
    given = os.environ.get("BROOK_SEED")
    seeds = [int(given)] if given else [random.randrange(2**32) for _ in range(SEEDS // 4)]
    for seed in seeds:
        try:
            simulate(seed)
        except AssertionError:
            print(f"worker simulation failed: replay with BROOK_SEED={seed}")
            raise
