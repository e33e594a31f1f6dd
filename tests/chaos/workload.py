"""The clients of a chaos run, over HTTP as users' programs are: producers with
idempotency keys, queue workers on an ordered group, a timer scheduler, and the
receivers of two endpoints. Each notes what it sent and what it was told."""

from __future__ import annotations

import base64
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

import brook
from brook.delivery.signing import verify
from tests.chaos.history import History
from tests.delivery.receivers import Answer, Got, Receiver

ORDERS = "chaos.orders"
"""Keyed records worked by the queue group WORK (ordering by key)."""
WORK = "work"
EVENTS = ("chaos.events.a", "chaos.events.b")
"""Delivered to both endpoints (pattern `chaos.events.*`)."""
TIMERS = "chaos.timers"
AUDIT = "audit"
"""A stream group on EVENTS[0], read by one consumer that commits after each poll."""
KEYS = 12
ENDPOINTS = ("healthy", "flaky")
CALL_TIMEOUT_S = 5.0


class Broker:
    """Where the clients send, and the run's shared state."""

    def __init__(self, port: int, history: History, seed: int) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.history = history
        self.stop = threading.Event()
        """Every client stops (workers last: they finish the queue first)."""
        self.stop_sending = threading.Event()
        """Producers and the timer scheduler stop."""
        self.seed = seed

    def call(self, method: str, path: str, body: Any = None) -> tuple[int | None, Any]:
        """(status, JSON body); (None, error text) when no answer came (the broker down,
        paused or killed mid-call: the outcome is unknown)."""
        try:
            with httpx.Client(base_url=self.url, timeout=CALL_TIMEOUT_S) as client:
                response = client.request(method, path, json=body)
        except httpx.HTTPError as exc:
            return None, type(exc).__name__
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, response.text[:200]


def settled(status: int | None, code: str | None) -> bool:
    """Whether an answer settles a send: not a 5xx, no answer at all, or a broker that
    another has taken over (`fenced`: it stored nothing, and the front now leads to
    the new one), each of which a careful client sends again."""
    return status is not None and status < 500 and code != "fenced"


def _error_code(body: Any) -> str | None:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("code"))
    return None


def produce(broker: Broker, name: str) -> None:
    """Single-record appends, each with an idempotency key; an unknown outcome is sent
    again with the same key (the way a careful producer retries)."""
    rng = random.Random(f"{broker.seed}-{name}")
    n = 0
    while not broker.stop_sending.is_set():
        topic = rng.choice((ORDERS, ORDERS, *EVENTS))
        key = f"k{rng.randrange(KEYS)}"
        value = f"{name}-{n}"
        for _ in range(4):
            sent = time.monotonic()
            status, body = broker.call(
                "POST",
                f"/v1/topics/{topic}/records",
                {"records": [{"value": value, "key": key, "idempotency_key": value}]},
            )
            ack = body["acks"][0] if status == 200 else None
            broker.history.note(
                "append",
                topic=topic,
                key=key,
                value=value,
                sent=sent,
                status=status,
                code=_error_code(body),
                partition=None if ack is None else ack["partition"],
                offset=None if ack is None else ack["offset"],
            )
            if settled(status, _error_code(body)):
                break
            broker.stop_sending.wait(0.2)
        n += 1
        broker.stop_sending.wait(rng.uniform(0.005, 0.03))


def work(broker: Broker, name: str) -> None:
    """Lease, work a moment, ack: a worker of the ordered group."""
    rng = random.Random(f"{broker.seed}-{name}")
    base = f"/v1/topics/{ORDERS}/queues/{WORK}"
    while not broker.stop.is_set():
        status, body = broker.call("POST", base + "/lease", {"max_records": 4, "wait_ms": 300})
        jobs = body.get("jobs", []) if status == 200 else []
        broker.history.note(
            "lease",
            status=status,
            code=_error_code(body),
            jobs=[[j["partition"], j["offset"], j.get("key"), j["attempt"]] for j in jobs],
        )
        if not jobs:
            broker.stop.wait(0.1 if status == 200 else 0.3)
            continue
        broker.stop.wait(rng.uniform(0, 0.02))
        status, body = broker.call(
            "POST", base + "/ack", {"receipts": [j["receipt"] for j in jobs]}
        )
        broker.history.note(
            "ack",
            status=status,
            code=_error_code(body),
            jobs=[[j["partition"], j["offset"], j.get("key")] for j in jobs],
        )


TASKS_QUEUE = "chaos.tasks"
"""The queue of tests/chaos/tasks_app.py (its QUEUE)."""
TASK_CALLS = (("charge", 6), ("flaky", 2), ("later", 2), ("urgent", 1))
"""The tasks the enqueuer calls (tests/chaos/tasks_app.py), with their weights."""


def enqueue_tasks(broker: Broker, name: str) -> None:
    """Jobs through the App's own client, as an app's web process enqueues them: keyed
    charges, flaky jobs, delayed ones, urgent ones at a high priority. Each enqueue
    carries an idempotency key; one whose outcome is unknown is sent again under it."""
    rng = random.Random(f"{broker.seed}-{name}")
    app = brook.App(broker.url)  # by name, as a web process that imports no task
    weights = [w for _, w in TASK_CALLS]
    n = 0
    try:
        while not broker.stop_sending.is_set():
            task_name = rng.choices([t for t, _ in TASK_CALLS], weights)[0]
            ident = f"{name}-{n}"
            options: dict[str, Any] = {"idempotency_key": ident}
            delay_ms = None
            if task_name == "charge":
                options["key"] = f"customer-{rng.randrange(KEYS)}"
                args: list[Any] = [ident]
            elif task_name == "later":
                delay_ms = rng.randrange(200, 3000)
                options["delay_ms"] = delay_ms
                args = [n, 0]
            elif task_name == "urgent":
                options["priority"] = 9
                args = [n]
            else:
                args = [n]
            if task_name == "later":  # never before the first send's time and delay
                args = [n, int(time.time() * 1000) + (delay_ms or 0)]
            for _ in range(4):
                sent_ms = int(time.time() * 1000)
                try:
                    ref = str(app.send_task(task_name, args, queue=TASKS_QUEUE, **options))
                    status, code = 200, None
                except Exception as exc:  # the outcome, whatever it is, goes in the history
                    ref, status, code = (
                        None,
                        getattr(exc, "status", None),
                        getattr(exc, "code", type(exc).__name__),
                    )
                broker.history.note(
                    "enqueue", task=task_name, args=args, id=ident, ref=ref,
                    key=options.get("key"), sent_ms=sent_ms, delay_ms=delay_ms,
                    status=status, code=code,
                )  # fmt: skip
                if settled(status, code):
                    break
                broker.stop_sending.wait(0.3)
            n += 1
            broker.stop_sending.wait(rng.uniform(0.01, 0.05))
    finally:
        app.close()


CHORD_MEMBERS = 5


def enqueue_chords(broker: Broker, name: str) -> None:
    """Chords through the App's canvas, as an app enqueues them: members on the tasks'
    shared queue, a callback given their results. An enqueue whose outcome is unknown
    is not sent again (a second chord would be another one): only answered ones count."""
    rng = random.Random(f"{broker.seed}-{name}")
    app = brook.App(broker.url)

    def sig(task: str, *args: Any) -> Any:
        return app.signature_from({"task": task, "queue": TASKS_QUEUE, "args": list(args)})

    n = 0
    try:
        while not broker.stop_sending.is_set():
            tag = f"{name}-{n}"
            values = [rng.randrange(100) for _ in range(CHORD_MEMBERS)]
            try:
                ref = str(
                    brook.chord(
                        [sig("part", tag, v) for v in values], sig("gathered", tag)
                    ).enqueue()
                )
                status, code = 200, None
            except Exception as exc:
                ref, status, code = (
                    None,
                    getattr(exc, "status", None),
                    getattr(exc, "code", type(exc).__name__),
                )
            broker.history.note(
                "chord", chord=tag, ref=ref, expected=[v * v for v in values],
                status=status, code=code,
            )  # fmt: skip
            n += 1
            broker.stop_sending.wait(rng.uniform(0.2, 0.5))
    finally:
        app.close()


def consume(broker: Broker, name: str) -> None:
    """Poll the stream group, then commit the next offsets it was given: the way a
    consumer that processes a batch before committing runs (at least once)."""
    base = f"/v1/topics/{EVENTS[0]}/groups/{AUDIT}"
    while not broker.stop.is_set():
        status, body = broker.call("GET", base + "/poll?max_records=50&wait_ms=300")
        records = body.get("records", []) if status == 200 else []
        broker.history.note(
            "poll",
            status=status,
            code=_error_code(body),
            records=[[r["partition"], r["offset"], r.get("value")] for r in records],
        )
        if not records:
            broker.stop.wait(0.05 if status == 200 else 0.3)
            continue
        offsets: dict[str, int] = {}
        for r in records:
            offsets[str(r["partition"])] = max(offsets.get(str(r["partition"]), 0), r["offset"] + 1)
        status, body = broker.call("POST", base + "/commit", {"offsets": offsets})
        broker.history.note("commit", status=status, code=_error_code(body), offsets=offsets)


def schedule_timers(broker: Broker, name: str) -> None:
    rng = random.Random(f"{broker.seed}-{name}")
    n = 0
    while not broker.stop_sending.is_set():
        timer = f"{name}-{n}"
        delay = rng.randrange(100, 3000)
        sent_ms = int(time.time() * 1000)
        status, body = broker.call(
            "POST",
            "/v1/timers",
            {"topic": TIMERS, "value": timer, "delay_ms": delay, "timer_id": timer},
        )
        broker.history.note(
            "timer",
            timer=timer,
            sent_ms=sent_ms,
            delay_ms=delay,
            status=status,
            code=_error_code(body),
        )
        if status is None or status >= 500:
            broker.stop_sending.wait(0.3)
            continue  # sent again under its id: the first schedule of an id is kept
        n += 1
        broker.stop_sending.wait(rng.uniform(0.05, 0.2))


class Receivers:
    """The endpoints' receivers: `healthy` answers 200 (but while a fault takes it
    down), `flaky` 500 a third of the time. Each notes every request, with whether its
    signature verified."""

    def __init__(self, history: History, secrets: dict[str, str], seed: int) -> None:
        self.history = history
        self.down = threading.Event()
        rng = random.Random(f"{seed}-flaky")
        lock = threading.Lock()
        self.receivers: dict[str, Receiver] = {}
        for name in ENDPOINTS:
            key = base64.b64decode(secrets[name].removeprefix("whsec_"))

            def answer(got: Got, name: str = name, key: bytes = key) -> Answer:
                with lock:
                    failing = (name == "healthy" and self.down.is_set()) or (
                        name == "flaky" and rng.random() < 1 / 3
                    )
                status = 503 if failing else 200
                self._note(name, key, got, status)
                return Answer(status)

            self.receivers[name] = Receiver(answer)

    def _note(self, name: str, key: bytes, got: Got, status: int) -> None:
        headers = got.headers
        signed = verify(
            key,
            headers.get("webhook-id", ""),
            int(headers.get("webhook-timestamp", "0")),
            got.body,
            headers.get("webhook-signature", ""),
        )
        self.history.note(
            "delivery",
            endpoint=name,
            id=headers.get("webhook-id"),
            topic=headers.get("brook-topic"),
            partition=int(headers.get("brook-partition", "-1")),
            offset=int(headers.get("brook-offset", "-1")),
            body=got.body.decode(errors="replace"),
            signed=signed,
            status=status,
        )

    def url(self, name: str) -> str:
        return self.receivers[name].url

    def close(self) -> None:
        for receiver in self.receivers.values():
            receiver.close()


def start_clients(broker: Broker) -> tuple[list[threading.Thread], list[threading.Thread]]:
    """(senders, workers): two producers, a timer scheduler and a task enqueuer; two
    queue workers and a stream consumer."""

    def started(jobs: list[tuple[Callable[[Broker, str], None], str]]) -> list[threading.Thread]:
        threads = [threading.Thread(target=f, args=(broker, name), name=name) for f, name in jobs]
        for thread in threads:
            thread.start()
        return threads

    senders = started(
        [
            (produce, "producer-1"),
            (produce, "producer-2"),
            (schedule_timers, "timers-1"),
            (enqueue_tasks, "enqueuer-1"),
            (enqueue_chords, "chords-1"),
        ]
    )
    workers = started([(work, "worker-1"), (work, "worker-2"), (consume, "consumer-1")])
    return senders, workers
