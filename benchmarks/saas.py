"""Webhooks the way a SaaS runs them (issue 50): an endpoint per customer, topics per
customer and event type, single-event appends over HTTP, deliveries to every customer.

`python -m benchmarks.saas` (appends to RESULTS.md), or as part of `make bench`.

- Shape: ENDPOINTS customers `c0000`.. each with one endpoint (`tenant` set, pattern
  `events.c0042.*`) and four topics (`events.c0042.invoice.paid`, `.invoice.created`,
  `.user.created`, `.user.deleted`), made by their first event. `brook serve` with
  `delivery_allow_private_networks = true` in its brook.toml; producers are THREADS
  threads, each with its own `brook.connect(url)`, one record (a JSON event of ~250
  bytes) per call. Receivers: one uvloop process answering 200 at once and noting
  each request's path, `webhook-id` and arrival time (CLOCK_MONOTONIC, which every
  process shares); with BROOK_SAAS_ORIGINS=each (the default) every customer has a
  host of its own (127.10.x.y, all bound by that process), as customers' servers do;
  `one` puts them all on 127.0.0.1. Its pace alone is measured first (wrk).
- Steady: an open-loop rate (sends scheduled at the rate, whatever the answers do)
  for SECONDS over all topics, uniformly; append-to-receiver latency runs from each
  event's scheduled send to its first arrival, so a producer falling behind counts.
- Onboarding: a 50/s stream to existing customers; after BASELINE_S, new customers
  each get an endpoint and one event on each of their four topics, as fast as four
  threads make them; the stream's p99 while they are taken on against before.
- Restart: SIGTERM then start, and kill -9 under a stream then start; seconds from
  start to serving and from an append right after to its delivery; descriptors and
  resident memory of the new process; acknowledged events lost by the crash.
- Endpoint creation once 5 x ENDPOINTS topics exist: a second endpoint per customer
  (`events.c0042.invoice.*`, two topics each), PUT one at a time and from 8 threads.

Smaller: BROOK_SAAS_ENDPOINTS (1000), BROOK_SAAS_SECONDS (20), BROOK_SAAS_RATES
(250,500,1000), BROOK_SAAS_THREADS (32). BROOK_SAAS_PROFILE=steady-1000,onboarding
attaches `py-spy record --gil` to the server for 15 s from the start of those phases
(topics, steady-<rate>, onboarding, stop, start, start-kill9, more-topics, creation)
and reports its top functions (stacks in .bench/profiles/saas-<phase>.txt).
BROOK_SAAS_RECORD=0 leaves RESULTS.md alone. To measure a Brook other than this
checkout's (a copy, while others edit it), put its src on PYTHONPATH and name it in
BROOK_SAAS_BUILD.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

import brook
from benchmarks.run import machine, scratch
from benchmarks.server import ROOT, rss_mb, start

ENDPOINTS = int(os.environ.get("BROOK_SAAS_ENDPOINTS", "1000"))
SECONDS = float(os.environ.get("BROOK_SAAS_SECONDS", "20"))
RATES = [int(r) for r in os.environ.get("BROOK_SAAS_RATES", "250,500,1000").split(",")]
THREADS = int(os.environ.get("BROOK_SAAS_THREADS", "32"))
ORIGINS = os.environ.get("BROOK_SAAS_ORIGINS", "each")
PROFILE = {p for p in os.environ.get("BROOK_SAAS_PROFILE", "").split(",") if p}
EVENT_TYPES = ("invoice.paid", "invoice.created", "user.created", "user.deleted")
NEW_CUSTOMERS = max(1, ENDPOINTS * 75 // 1000)
"""Taken on during the onboarding phase: four topics each (300 at full size)."""
STREAM_RATE = 50
BASELINE_S = 10.0
AFTER_ONBOARDING_S = 5.0
TOPICS_FOR_CREATION = 5 * ENDPOINTS
CREATED_ENDPOINTS = max(10, ENDPOINTS * 3 // 10)
"""Endpoints made one at a time, then as many from CREATION_THREADS threads."""
CREATION_THREADS = 8
DRAIN_S = 60.0
"""Longest wait, after the last send, for every acknowledged event to arrive."""
PROFILE_S = 15
PY_SPY = str(Path(sys.executable).with_name("py-spy"))


def customer(i: int) -> str:
    return f"c{i:04d}"


def host(i: int) -> str:
    return f"127.10.{i // 250}.{i % 250 + 1}" if ORIGINS == "each" else "127.0.0.1"


def topics_of(i: int) -> list[str]:
    return [f"events.{customer(i)}.{kind}" for kind in EVENT_TYPES]


def path_of(topic: str) -> str:
    """The receiver path the customer's endpoint posts to."""
    return f"/hook/{topic.split('.')[1]}"


# ---------------------------------------------------------------- the receiver


async def _receive(hosts: list[str]) -> None:
    """Answer 200 at once to every request on every host (one port), noting path,
    webhook-id and arrival; GET /_arrivals?from=N hands out the notes from N on."""
    from brook.server.http import Connections, HttpLimits, HttpProtocol, Request, Response

    notes: list[str] = []
    ok = Response(200, b"")

    async def handler(request: Request) -> Response:
        if request.path == "/_arrivals":
            begin = int(request.query.get("from", "0"))
            return Response(200, "\n".join(notes[begin:]).encode(), "text/plain")
        notes.append(f"{request.path} {request.headers.get('webhook-id', '-')} {time.monotonic()}")
        return ok

    loop = asyncio.get_running_loop()
    connections = Connections(HttpLimits(connections_max=50_000, idle_timeout_s=600))
    servers = [await loop.create_server(lambda: HttpProtocol(handler, connections), hosts[0], 0)]
    port = servers[0].sockets[0].getsockname()[1]
    for name in hosts[1:]:
        servers.append(
            await loop.create_server(lambda: HttpProtocol(handler, connections), name, port)
        )
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)
    print(f"ready {port}", flush=True)
    await done.wait()


class Receiver:
    """The receiver process, and what arrived at it so far."""

    def __init__(self, customers: int) -> None:
        hosts = sorted({host(i) for i in range(customers)})
        self.process, self.port = start(
            [sys.executable, "-m", "benchmarks.saas", "--receiver", ",".join(hosts)],
            r"ready (\d+)",
        )
        self.first: dict[tuple[str, str], float] = {}
        self.seen: Counter[tuple[str, str]] = Counter()
        self._read = 0
        self._http = httpx.Client(base_url=f"http://{host(0)}:{self.port}", timeout=30)

    def url(self, i: int, kind: str = "hook") -> str:
        return f"http://{host(i)}:{self.port}/{kind}/{customer(i)}"

    def poll(self) -> None:
        text = self._http.get("/_arrivals", params={"from": str(self._read)}).text
        if not text:
            return
        lines = text.split("\n")
        self._read += len(lines)
        for line in lines:
            path, wid, at = line.split(" ")
            key = (path, wid)
            self.seen[key] += 1
            if key not in self.first:
                self.first[key] = float(at)

    def wait_for(self, keys: list[tuple[str, str]], limit_s: float = DRAIN_S) -> bool:
        """Until every key arrived (True) or `limit_s` passed (False)."""
        deadline = time.monotonic() + limit_s
        while True:
            self.poll()
            if all(k in self.first for k in keys):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def alone(self) -> float:
        """Requests/s wrk (16 connections, 3 s) gets from it: its ceiling on this machine."""
        out = subprocess.run(
            [
                "wrk",
                "-t1",
                "-c16",
                "-d3s",
                "-H",
                "webhook-id: probe",
                f"http://{host(0)}:{self.port}/probe/x",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        self.poll()  # (its notes read and dropped)
        return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]

    def close(self) -> None:
        self._http.close()
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)


# ---------------------------------------------------------------- the server


READY = r"listening on http://127\.0\.0\.1:(\d+) "


class Served:
    """`brook serve` on one data directory and port, started again at will."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.config = folder / "brook.toml"
        self.config.write_text("delivery_allow_private_networks = true\n")
        self.port = 0
        self.process: subprocess.Popen[str] | None = None
        self.spy: Spy | None = None
        self.startup: list[str] = []
        """Its log lines until it served, each with the seconds since its start."""
        self.start()

    def start(self, phase: str = "") -> float:
        """Start it; seconds until it serves. With `phase` in BROOK_SAAS_PROFILE,
        py-spy samples it from its first moments (self.spy; finish it after)."""
        started = time.monotonic()
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "brook.cli",
                "--config",
                str(self.config),
                "serve",
                "--data",
                str(self.folder / "data"),
                "--port",
                str(self.port),
                "--log-level",
                "info",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.spy = Spy(phase, process.pid) if phase else None
        assert process.stderr is not None
        self.startup = []
        for line in process.stderr:
            self.startup.append(f"{time.monotonic() - started:6.2f} s {line.strip()[:200]}")
            found = re.search(READY, line)
            if found:
                threading.Thread(target=process.stderr.read, daemon=True).start()
                self.process, self.port = process, int(found.group(1))
                return time.monotonic() - started
        raise RuntimeError("brook serve did not start:\n" + "\n".join(self.startup[-20:]))

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> float:
        """Seconds from the signal to its exit."""
        assert self.process is not None
        started = time.monotonic()
        self.process.send_signal(sig)
        self.process.wait(timeout=120)
        return time.monotonic() - started


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def io_counts(pid: int) -> dict[str, float]:
    """The process's I/O so far: write calls, bytes written to storage, and seconds
    its threads waited for block I/O (delay accounting, when the kernel keeps it)."""
    found = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return {
        "write_calls": float(found["syscw"]),
        "written_bytes": float(found["write_bytes"]),
        "blkio_s": int(fields[39]) / os.sysconf("SC_CLK_TCK"),
    }


def descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def descriptor_kinds(pid: int) -> dict[str, int]:
    """The process's open descriptors by kind: sockets, files of its data, the rest."""
    kinds: Counter[str] = Counter()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:"):
            kinds["sockets"] += 1
        elif target.startswith("/"):
            kinds["files"] += 1
        else:
            kinds["other"] += 1
    return dict(kinds)


# ---------------------------------------------------------------- producers


TENANTS = {"refused": ""}
"""Why a server refused `tenant` (an older Brook), when it did: endpoints then go without."""


def endpoint(client: brook.RemoteBroker, name: str, url: str, pattern: str, i: int) -> None:
    """PUT endpoint `name` for customer i, its tenant set when the server takes one."""
    if not TENANTS["refused"]:
        try:
            client.create_endpoint(name, url, [pattern], tenant=customer(i))
            return
        except brook.errors.BrookError as exc:
            TENANTS["refused"] = f"{type(exc).__name__}: {exc}"
            print(f"tenant refused ({TENANTS['refused']}): without it", file=sys.stderr)
    client.create_endpoint(name, url, [pattern])


@dataclass
class Sent:
    topic: str
    due: float
    sent: float
    acked: float | None = None
    wid: str = ""
    error: str = ""


def _event(topic: str, n: int) -> bytes:
    _, who, *kind = topic.split(".")
    return json.dumps(
        {
            "type": ".".join(kind),
            "customer": who,
            "n": n,
            "id": f"evt_{n:012d}",
            "data": {"amount": 4200 + n % 1000, "currency": "eur", "note": "x" * 120},
        }
    ).encode()


JSON = {"content-type": b"application/json"}


def append(client: brook.RemoteBroker, topic: str, n: int, due: float) -> Sent:
    """One event, one call; what it was scheduled for and what came back."""
    sent = Sent(topic, due, time.monotonic())
    try:
        ack = client.topic(topic).append(_event(topic, n), headers=JSON)
    except Exception as exc:  # a stopped server: noted, not acknowledged
        sent.error = type(exc).__name__
        return sent
    sent.acked = time.monotonic()
    sent.wid = f"{topic}:{ack.partition}:{ack.offset}"
    return sent


class Stream:
    """Open-loop producers: event k is due at start + k / rate, on topic pick(k), sent
    by whichever of `threads` threads (each its own client) is free; until `count`
    events or stop()."""

    def __init__(
        self, url: str, rate: float, pick: Callable[[int], str], count: int, threads: int
    ) -> None:
        self.url, self.rate, self.pick, self.count = url, rate, pick, count
        self.sent: list[Sent] = []
        self._next = itertools.count()
        self._stop = threading.Event()
        # Made before the clock starts: an httpx client costs tens of milliseconds of
        # CPU (its TLS context), which would otherwise delay the first sends.
        clients = [brook.connect(url, timeout=30) for _ in range(threads)]
        self._threads = [
            threading.Thread(target=self._run, args=(c,), daemon=True) for c in clients
        ]
        self.started = time.monotonic() + 0.1
        for thread in self._threads:
            thread.start()

    def _run(self, client: brook.RemoteBroker) -> None:
        try:
            while not self._stop.is_set():
                k = next(self._next)
                if k >= self.count:
                    return
                due = self.started + k / self.rate
                wait = due - time.monotonic()
                if wait > 0 and self._stop.wait(wait):
                    return
                self.sent.append(append(client, self.pick(k), k, due))
        finally:
            client.close()

    def stop(self) -> None:
        self._stop.set()
        self.join()

    def join(self) -> None:
        for thread in self._threads:
            thread.join()


def uniform(topics: list[str], seed: int) -> Callable[[int], str]:
    chosen = random.Random(seed).choices(range(len(topics)), k=1 << 18)
    return lambda k: topics[chosen[k % len(chosen)]]


def keys(sent: list[Sent]) -> list[tuple[str, str]]:
    return [(path_of(s.topic), s.wid) for s in sent if s.acked is not None]


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def latencies(sent: list[Sent], receiver: Receiver) -> list[float]:
    """Scheduled send to first arrival, of those that arrived."""
    found = []
    for s in sent:
        at = receiver.first.get((path_of(s.topic), s.wid)) if s.acked is not None else None
        if at is not None:
            found.append(at - s.due)
    return found


def tally(sent: list[Sent], receiver: Receiver) -> dict[str, float]:
    """What a phase's events came to at the receiver."""
    acks = [(s, s.acked) for s in sent if s.acked is not None]
    wanted = keys(sent)
    arrived = [receiver.first[k] for k in wanted if k in receiver.first]
    late = latencies(sent, receiver)
    after_ack = [
        receiver.first[(path_of(s.topic), s.wid)] - at
        for s, at in acks
        if (path_of(s.topic), s.wid) in receiver.first
    ]
    begin = min(s.due for s in sent)
    last_ack = max((at for _, at in acks), default=begin)
    return {
        "offered": len(sent),
        "acked": len(acks),
        "errors": len(sent) - len(acks),
        "acked_per_s": len(acks) / (last_ack - begin) if last_ack > begin else 0.0,
        "delivered": len(arrived),
        "delivered_per_s": len(arrived) / (max(arrived) - begin) if arrived else 0.0,
        "missing": len(wanted) - len(arrived),
        "duplicates": sum(receiver.seen[k] - 1 for k in wanted if receiver.seen[k] > 1),
        "p50_s": percentile(late, 0.5),
        "p99_s": percentile(late, 0.99),
        "max_s": max(late) if late else float("nan"),
        "ack_p99_s": percentile([at - s.due for s, at in acks], 0.99),
        "ack_to_arrival_p50_s": percentile(after_ack, 0.5),
        "ack_to_arrival_p99_s": percentile(after_ack, 0.99),
        "send_lag_p99_s": percentile([s.sent - s.due for s in sent], 0.99),
    }


# ---------------------------------------------------------------- profiling


class Spy:
    """py-spy on the server for PROFILE_S seconds when `phase` is in BROOK_SAAS_PROFILE."""

    def __init__(self, phase: str, pid: int) -> None:
        self.phase = phase
        self.stacks = ROOT / ".bench" / "profiles" / f"saas-{phase}.txt"
        self.process: subprocess.Popen[bytes] | None = None
        if phase in PROFILE:
            self.stacks.parent.mkdir(parents=True, exist_ok=True)
            self.process = subprocess.Popen(
                [
                    PY_SPY,
                    "record",
                    "--gil",
                    "-r",
                    "200",
                    "-f",
                    "raw",
                    "-o",
                    str(self.stacks),
                    "--pid",
                    str(pid),
                    "--duration",
                    str(PROFILE_S),
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )

    def finish(self) -> str:
        if self.process is None:
            return ""
        self.process.wait(timeout=PROFILE_S + 60)
        text = top_functions(self.stacks.read_text())
        print(f"\nprofile of {self.phase} ({self.stacks}):\n{text}", file=sys.stderr, flush=True)
        return text


def top_functions(collapsed: str, top: int = 25) -> str:
    """The functions with the most samples of their own, and on the stack (inclusive)."""
    from benchmarks.profile import _FRAME, part_of

    own: Counter[str] = Counter()
    within: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        found = [
            _FRAME.match(f) for f in stack.split(";") if not f.startswith(("process ", "thread "))
        ]
        frames = [(m["function"], part_of(m["file"])) for m in found if m is not None]
        if not frames:
            continue
        n = int(count)
        total += n
        own["{} ({})".format(*frames[-1])] += n
        # Inclusive: Brook's own functions (the threads' and loops' plumbing is on
        # every stack and says nothing).
        for name in {f"{f} ({part})" for f, part in frames if part.startswith("brook.")}:
            within[name] += n
    lines = [f"{total:,} samples (GIL held) over {PROFILE_S} s at 200/s", "", "own:"]
    lines += [f"  {n / total:6.1%}  {name}" for name, n in own.most_common(top)]
    lines += ["", "inclusive (Brook's functions):"]
    lines += [f"  {n / total:6.1%}  {name}" for name, n in within.most_common(top)]
    return "\n".join(lines)


# ---------------------------------------------------------------- phases


@dataclass
class Run:
    served: Served
    receiver: Receiver
    results: dict[str, Any] = field(default_factory=dict)
    profiles: dict[str, str] = field(default_factory=dict)
    customers: int = ENDPOINTS

    def log(self, what: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)

    def existing_topics(self) -> list[str]:
        return [t for i in range(ENDPOINTS) for t in topics_of(i)]

    def first_events(self, topics: list[str], phase: str) -> dict[str, float]:
        """One event on each of `topics` (new ones), as fast as the producers go: all
        acknowledged and delivered."""
        spy = Spy(phase, self.served.pid)
        stream = Stream(self.served.url, 1e6, lambda k: topics[k], len(topics), THREADS)
        stream.join()
        assert self.receiver.wait_for(keys(stream.sent), 120), "first events not delivered"
        if text := spy.finish():
            self.profiles[phase] = text
        return tally(stream.sent, self.receiver)

    def setup(self) -> None:
        client = brook.connect(self.served.url)
        started = time.monotonic()
        for i in range(ENDPOINTS):
            endpoint(client, customer(i), self.receiver.url(i), f"events.{customer(i)}.*", i)
        took = time.monotonic() - started
        client.close()
        self.results["endpoints_created_per_s"] = ENDPOINTS / took
        self.log(f"{ENDPOINTS} endpoints in {took:.1f} s")
        first = self.first_events(self.existing_topics(), "topics")
        self.results["first_events"] = first
        self.log(f"{4 * ENDPOINTS} topics' first events: {first}")

    def steady(self, rate: int) -> None:
        topics = self.existing_topics()
        pids = {
            "broker": self.served.pid,
            "receiver": self.receiver.process.pid,
            "load": os.getpid(),
        }
        before = {name: cpu_s(pid) for name, pid in pids.items()}
        io_before = io_counts(self.served.pid)
        spy = Spy(f"steady-{rate}", self.served.pid)
        began = time.monotonic()
        stream = Stream(self.served.url, rate, uniform(topics, rate), int(rate * SECONDS), THREADS)
        stream.join()
        took = time.monotonic() - began
        cpu = {f"{name}_cpu": (cpu_s(pid) - before[name]) / took for name, pid in pids.items()}
        io_after = io_counts(self.served.pid)
        events = rate * SECONDS
        cpu["write_calls_per_event"] = (io_after["write_calls"] - io_before["write_calls"]) / events
        cpu["kb_written_per_event"] = (
            (io_after["written_bytes"] - io_before["written_bytes"]) / events / 1024
        )
        cpu["blkio_share"] = (io_after["blkio_s"] - io_before["blkio_s"]) / took
        self.receiver.wait_for(keys(stream.sent))
        found = {**tally(stream.sent, self.receiver), **cpu, "load": os.getloadavg()[0]}
        self.results[f"steady_{rate}"] = found
        if text := spy.finish():
            self.profiles[f"steady-{rate}"] = text
        self.log(f"steady {rate}/s: {found}")

    def onboarding(self) -> None:
        topics = self.existing_topics()
        stream = Stream(self.served.url, STREAM_RATE, uniform(topics, 7), 10**9, 4)
        time.sleep(BASELINE_S)
        spy = Spy("onboarding", self.served.pid)
        began = time.monotonic()
        news = list(range(ENDPOINTS, ENDPOINTS + NEW_CUSTOMERS))

        def take_on(i: int) -> list[Sent]:
            client = brook.connect(self.served.url)
            try:
                endpoint(client, customer(i), self.receiver.url(i), f"events.{customer(i)}.*", i)
                return [append(client, t, n, time.monotonic()) for n, t in enumerate(topics_of(i))]
            finally:
                client.close()

        with ThreadPoolExecutor(4) as pool:
            firsts = [s for made in pool.map(take_on, news) for s in made]
        made = time.monotonic()
        self.customers += NEW_CUSTOMERS
        delivered = self.receiver.wait_for(keys(firsts), 120)
        arrivals = [self.receiver.first.get((path_of(s.topic), s.wid)) for s in firsts]
        last = max((a for a in arrivals if a is not None), default=made)
        time.sleep(AFTER_ONBOARDING_S)
        stream.stop()
        self.receiver.wait_for(keys(stream.sent))
        if text := spy.finish():
            self.profiles["onboarding"] = text
        before = [s for s in stream.sent if stream.started + 1 <= s.due < began]
        during = [s for s in stream.sent if began <= s.due <= last]
        after = [s for s in stream.sent if s.due > last]
        got = [
            a - s.acked for a, s in zip(arrivals, firsts, strict=True) if a is not None and s.acked
        ]
        found = {
            "new_topics": len(firsts),
            "all_first_delivered": delivered,
            "made_s": made - began,
            "last_first_delivered_s": last - began,
            "first_after_append_p50_s": percentile(got, 0.5),
            "first_after_append_max_s": max(got) if got else float("nan"),
            "before": tally(before, self.receiver),
            "during": tally(during, self.receiver) if during else {},
            "after": tally(after, self.receiver) if after else {},
        }
        self.results["onboarding"] = found
        self.log(f"onboarding: {found}")

    def probe(self, started: float) -> dict[str, float]:
        """An event appended as soon as the server serves: seconds to its delivery."""
        client = brook.connect(self.served.url)
        topic = topics_of(ENDPOINTS // 2)[0]
        sent = append(client, topic, 0, time.monotonic())
        client.close()
        assert sent.acked is not None, sent.error
        assert self.receiver.wait_for(keys([sent]), 120), "probe not delivered"
        arrived = self.receiver.first[(path_of(topic), sent.wid)]
        return {
            "first_delivery_after_append_s": arrived - sent.acked,
            "first_delivery_after_start_s": arrived - started,
            "descriptors": descriptors(self.served.pid),
            "rss_mb": rss_mb(self.served.pid),
            **descriptor_kinds(self.served.pid),
        }

    def finish_start_profile(self, phase: str) -> None:
        self.log("the restart's log until it served:\n  " + "\n  ".join(self.served.startup))
        if self.served.spy is not None and (text := self.served.spy.finish()):
            self.profiles[phase] = text

    def restarts(self) -> None:
        pid = self.served.pid
        running = {"descriptors": descriptors(pid), "rss_mb": rss_mb(pid), **descriptor_kinds(pid)}
        spy = Spy("stop", pid)
        stopped_s = self.served.stop()
        if text := spy.finish():
            self.profiles["stop"] = text
        started = time.monotonic()
        serving_s = self.served.start("start")
        clean = {"stop_s": stopped_s, "serving_s": serving_s, **self.probe(started)}
        self.finish_start_profile("start")
        self.log(f"restart after SIGTERM: {clean}")
        stream = Stream(self.served.url, STREAM_RATE, uniform(self.existing_topics(), 9), 10**9, 4)
        time.sleep(3)
        self.served.stop(signal.SIGKILL)
        stream.stop()
        started = time.monotonic()
        serving_s = self.served.start("start-kill9")
        crash = {"serving_s": serving_s, **self.probe(started)}
        self.finish_start_profile("start-kill9")
        self.receiver.wait_for(keys(stream.sent))
        lost = tally(stream.sent, self.receiver)
        crash.update(acked_before_kill=lost["acked"], missing=lost["missing"])
        crash["descriptors_later"] = descriptors(self.served.pid)
        self.results["restart"] = {"running": running, "sigterm": clean, "kill9": crash}
        self.log(f"restart after kill -9: {crash}")

    def creation(self) -> None:
        have = 4 * self.customers
        extra = [f"events.{customer(i)}.order.shipped" for i in range(TOPICS_FOR_CREATION - have)]
        if extra:
            self.first_events(extra, "more-topics")
        client = brook.connect(self.served.url)
        count = sum(1 for t in client.topics() if t.name.startswith("events."))

        def second_endpoint(i: int, client: brook.RemoteBroker = client) -> None:
            endpoint(
                client,
                f"{customer(i)}-billing",
                self.receiver.url(i, "billing"),
                f"events.{customer(i)}.invoice.*",
                i,
            )

        spy = Spy("creation", self.served.pid)
        started = time.monotonic()
        for i in range(CREATED_ENDPOINTS):
            second_endpoint(i)
        one_s = time.monotonic() - started
        clients = threading.local()

        def from_pool(i: int) -> None:
            if not hasattr(clients, "c"):
                clients.c = brook.connect(self.served.url)
            second_endpoint(i, clients.c)

        started = time.monotonic()
        with ThreadPoolExecutor(CREATION_THREADS) as pool:
            list(pool.map(from_pool, range(CREATED_ENDPOINTS, 2 * CREATED_ENDPOINTS)))
        many_s = time.monotonic() - started
        if text := spy.finish():
            self.profiles["creation"] = text
        # They deliver: an invoice event of the first and of the last made.
        checks = []
        for i in (0, 2 * CREATED_ENDPOINTS - 1):
            sent = append(client, topics_of(i)[0], 0, time.monotonic())
            checks.append((f"/billing/{customer(i)}", sent.wid))
        client.close()
        found = {
            "topics": count,
            "one_at_a_time_per_s": CREATED_ENDPOINTS / one_s,
            "threads_per_s": CREATED_ENDPOINTS / many_s,
            "deliver": self.receiver.wait_for(checks, 60),
        }
        self.results["creation"] = found
        self.log(f"endpoint creation at {count} topics: {found}")


# ---------------------------------------------------------------- the report


def run() -> tuple[dict[str, Any], dict[str, str], float]:
    folder = scratch()
    receiver = Receiver(ENDPOINTS + NEW_CUSTOMERS + 1)
    served = None
    try:
        alone = receiver.alone()
        served = Served(folder)
        r = Run(served, receiver)
        r.results["receiver_alone_per_s"] = alone
        r.log(f"receiver alone: {alone:,.0f} requests/s; serving at {served.url}")
        r.setup()
        for rate in RATES:
            time.sleep(2)
            r.steady(rate)
        r.onboarding()
        r.restarts()
        r.creation()
        return r.results, r.profiles, alone
    finally:
        if served is not None and served.process is not None and served.process.poll() is None:
            served.stop()
        receiver.close()
        shutil.rmtree(folder, ignore_errors=True)


def _kinds(found: dict[str, Any]) -> str:
    return ", ".join(f"{found.get(k, 0):,} {k}" for k in ("sockets", "files", "other"))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.0f} ms"


def _met(ok: bool) -> str:
    return "met" if ok else "**missed**"


def main() -> str:
    load_before = os.getloadavg()
    results, profiles, alone = run()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Webhooks shaped like a SaaS (issue 50) — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before[0]:.2f}, after "
        f"{os.getloadavg()[0]:.2f}. `python -m benchmarks.saas`; Brook "
        f"{_commit()}.",
        f"- `brook serve` (defaults; `delivery_allow_private_networks = true`), {ENDPOINTS:,} "
        f"endpoints (one per customer, "
        + (
            f"tenant NOT set: the server refused it, {TENANTS['refused']}"
            if TENANTS["refused"]
            else "tenant set"
        )
        + ", pattern `events.cNNNN.*`), "
        f"{4 * ENDPOINTS:,} topics (4 event types per customer), JSON events of ~250 bytes. "
        f"Producers: {THREADS} threads, each its own `brook.connect`, one event per call, "
        f"open loop (sends scheduled at the rate). Receiver: one uvloop process (Brook's "
        f"HTTP stack) answering 200 at once, "
        + (
            "each customer its own host (127.10.x.y), so its own origin"
            if ORIGINS == "each"
            else "all customers on 127.0.0.1"
        )
        + f"; alone it takes {alone:,.0f} requests/s (wrk, 16 connections).",
        "- Latency: from each event's scheduled send to its first arrival at the receiver "
        "(ack to delivery: from its append's answer). Load: the load average at the end. "
        "CPU: share of one core over the sending window, from /proc/<pid>/stat (2 cores "
        "shared by the broker, the receiver and the producers); per event: the broker's CPU "
        "over the events acknowledged; writes from /proc/<pid>/io (syscw, write_bytes).",
        "",
        "| offered/s | acked/s | delivered/s | missing | duplicates | p50 | p99 | max "
        "| append ack p99 | ack to delivery p99 | broker CPU | per event | write calls "
        "per event | KiB written per event | receiver CPU | producers CPU | load |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for rate in RATES:
        s = results[f"steady_{rate}"]
        lines.append(
            f"| {rate:,} | {s['acked_per_s']:,.0f} | {s['delivered_per_s']:,.0f} | "
            f"{s['missing']:,} | {s['duplicates']:,} | {_ms(s['p50_s'])} | {_ms(s['p99_s'])} | "
            f"{_ms(s['max_s'])} | {_ms(s['ack_p99_s'])} | {_ms(s['ack_to_arrival_p99_s'])} | "
            f"{s['broker_cpu']:.0%} | {s['broker_cpu'] / s['acked_per_s'] * 1e3:.2f} ms | "
            f"{s['write_calls_per_event']:.1f} | {s['kb_written_per_event']:.1f} | "
            f"{s['receiver_cpu']:.0%} | {s['load_cpu']:.0%} | "
            f"{s['load']:.1f} |"
        )
    top = results[f"steady_{max(RATES)}"]
    steady_ok = (
        top["acked_per_s"] >= 0.98 * max(RATES) >= 1000
        and top["missing"] == 0
        and top["p99_s"] <= 1.0
    )
    o = results["onboarding"]
    base, during = o["before"]["p99_s"], (o["during"] or {}).get("p99_s", float("nan"))
    c = results["creation"]
    rs = results["restart"]
    first = results["first_events"]
    lines += [
        "",
        "| measure | result | target | |",
        "| --- | --- | --- | --- |",
        f"| steady {max(RATES):,}/s: acked/s, every delivery made, p99 | "
        f"{top['acked_per_s']:,.0f}/s, {top['missing']} missing, {_ms(top['p99_s'])} | "
        f">= 1,000/s, 0 missing, p99 <= 1 s | {_met(steady_ok)} |",
        f"| {ENDPOINTS:,} endpoints made (PUT one at a time, no topics yet) | "
        f"{results['endpoints_created_per_s']:,.0f}/s | | |",
        f"| {4 * ENDPOINTS:,} topics made by their first event ({THREADS} producers, as fast "
        f"as they go) | {first['acked_per_s']:,.0f} topics/s; {first['missing']} missing; append "
        f"to delivery p50 {_ms(first['ack_to_arrival_p50_s'])}, p99 "
        f"{_ms(first['ack_to_arrival_p99_s'])} | | |",
        f"| onboarding {NEW_CUSTOMERS} customers x 4 topics under {STREAM_RATE}/s: stream p99 "
        f"during over before | {during / base:.2f}x ({_ms(during)} over {_ms(base)}; "
        f"{o['during'].get('acked', 0) if o['during'] else 0} events during) | <= 1.5x | "
        f"{_met(during / base <= 1.5)} |",
        f"| onboarding: the {o['new_topics']} new topics' first events | made in "
        f"{o['made_s']:.1f} s; last delivered {o['last_first_delivered_s']:.1f} s after "
        f"onboarding began; append to delivery p50 {_ms(o['first_after_append_p50_s'])}, "
        f"max {_ms(o['first_after_append_max_s'])} | | |",
        f"| endpoint creation at {c['topics']:,} topics (PUT, pattern matching 2 topics) | "
        f"{c['one_at_a_time_per_s']:,.0f}/s one at a time; {c['threads_per_s']:,.0f}/s from "
        f"{CREATION_THREADS} threads | >= 150/s | "
        f"{_met(min(c['one_at_a_time_per_s'], c['threads_per_s']) >= 150)} |",
    ]
    for kind, label in (("sigterm", "SIGTERM (clean stop)"), ("kill9", "kill -9 under 50/s")):
        r = rs[kind]
        extra = f"stopped in {r['stop_s']:.1f} s; " if "stop_s" in r else ""
        if kind == "kill9":
            extra += f"{r['missing']} of {r['acked_before_kill']} acknowledged events lost; "
        lines.append(
            f"| restart after {label}, {ENDPOINTS + NEW_CUSTOMERS:,} endpoints, "
            f"{4 * (ENDPOINTS + NEW_CUSTOMERS):,} topics: first delivery of an event appended "
            f"once serving | {extra}serving {r['serving_s']:.1f} s after start; delivered "
            f"{r['first_delivery_after_append_s']:.2f} s after its append "
            f"({r['first_delivery_after_start_s']:.1f} s after start); "
            f"{r['descriptors']:,} descriptors ({_kinds(r)}), {r['rss_mb']:,.0f} MiB resident "
            "| <= 5 s | "
            f"from the append {_met(r['first_delivery_after_append_s'] <= 5)}; from the "
            f"start {_met(r['first_delivery_after_start_s'] <= 5)} |"
        )
    lines.append(
        f"\nBefore the restarts the server held {rs['running']['descriptors']:,} descriptors "
        f"({_kinds(rs['running'])}) "
        f"and {rs['running']['rss_mb']:,.0f} MiB resident; after the kill -9 restart, once "
        f"the stream's events were delivered, {rs['kill9']['descriptors_later']:,} descriptors."
    )
    for phase, text in profiles.items():
        lines += ["", f"py-spy --gil on the server during {phase}:", "", "```", text, "```"]
    print(json.dumps(results, indent=1, default=str), file=sys.stderr)
    return "\n".join(lines)


def _commit() -> str:
    """What Brook ran: BROOK_SAAS_BUILD when given (a snapshot elsewhere on
    PYTHONPATH, say), else this checkout's `git describe`."""
    if given := os.environ.get("BROOK_SAAS_BUILD"):
        return given
    found = subprocess.run(
        ["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=ROOT
    )
    return found.stdout.strip() or "unknown"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--receiver":
        import uvloop

        uvloop.run(_receive(sys.argv[2].split(",")))
    else:
        report = main()
        print(report)
        if os.environ.get("BROOK_SAAS_RECORD") == "0":
            sys.exit(0)
        with open(Path(__file__).parent / "RESULTS.md", "a") as out:
            out.write("\n" + report + "\n")
