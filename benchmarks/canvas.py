"""The Celery user's toolbox (issue 52): how soon `app.result` answers after a job's
ack is durable, how long a chain takes, and how soon a chord's callback starts after
its last member's ack, through `brook serve` and one `brook worker`.

Result latency: one no-op job at a time to an idle worker; the app waits with
`app.result(ref)` (one long-poll). The task writes the time it returns, and the worker's
`on_success` hook the time its ack call returned (durable). The ack became durable
between the two, so `app.result`'s answer after the task returned bounds its latency
after the durable ack from above, and after the hook from below. The baseline, measured
in the same run: a client polling `app.job(ref)` every 50 ms, as the user of issue 52 did.

Chain: `chain(link.s(0), link.s(), link.s())` of no-op links, from before `enqueue()`
to the return of `app.result(ref)`; the baseline is one no-op job enqueued and waited
for the same way (a chain of three costs at least three of those). Chord: a thousand
no-op members and a callback that notes when it starts; each member's `on_success`
hook notes when its ack call returned; the callback's start after the last of those.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.run import machine, scratch, section_main
from benchmarks.server import brook_serve, stop

TRIALS = 3
RESULT_JOBS = 200
POLL_S = 0.05
CHAINS = 100
CHORD_MEMBERS = 1000
CHORDS = 2

APP = """
import os, time
import brook

app = brook.App(os.environ["BROOK_URL"])
ACKED = os.environ["ACKED_FILE"]


ENDED = os.environ["ENDED_FILE"]


@app.task
def noop(n):
    job = brook.current_job()
    with open(ENDED, "a") as f:
        f.write(f"{job.ref} {time.time()}\\n")
    return n


@noop.on_success
def landed(job, result):
    with open(ACKED, "a") as f:
        f.write(f"{job.ref} {time.time()}\\n")


@app.task
def link(n=0):
    return n + 1


@app.task
def member(chord, i):
    return i


@member.on_success
def member_acked(job, result):
    with open(ACKED, "a") as f:
        f.write(f"member {time.time()}\\n")


@app.task
def gathered(results, chord):
    with open(ENDED, "a") as f:
        f.write(f"callback-{chord} {time.time()}\\n")
    return len(results)
"""


def _time_of(path: Path, ref: str, timeout_s: float = 10) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in path.read_text().splitlines() if path.exists() else []:
            parts = line.split()
            if len(parts) == 2 and parts[0] == ref:  # (a line being written is cut short)
                return float(parts[1])
        time.sleep(0.005)
    raise RuntimeError(f"the worker never wrote {ref} to {path.name}")


def result_trial() -> tuple[float, ...]:
    """p50 and p99 (ms) of: app.result's answer after the task returned; a 50 ms
    polling loop's; app.result's after the worker's ack call returned."""
    folder = scratch().resolve()
    (folder / "bench_canvas.py").write_text(APP)
    server, port = brook_serve(folder / "data")
    url = f"http://127.0.0.1:{port}"
    acked, ended = folder / "acked.txt", folder / "ended.txt"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]),
        "BROOK_URL": url,
        "ACKED_FILE": str(acked),
        "ENDED_FILE": str(ended),
    }
    saved = dict(os.environ)
    os.environ.update(BROOK_URL=url, ACKED_FILE=str(acked), ENDED_FILE=str(ended))
    sys.path.insert(0, str(folder))
    worker = None
    try:
        import bench_canvas

        os.environ.clear()
        os.environ.update(saved)
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "brook.cli",
                "worker",
                "bench_canvas:app",
                "--log-level",
                "warning",
                "--concurrency",
                "8",
            ],
            cwd=folder,
            env=env,
        )
        app, noop = bench_canvas.app, bench_canvas.noop
        app.result(noop.enqueue(-1), timeout=60)  # the worker is up and has claimed its queue
        after_ack, after_end, polled = [], [], []
        for n in range(RESULT_JOBS):
            ref = noop.enqueue(n)
            assert app.result(ref, timeout=30) == n
            answered = time.time()
            after_ack.append((answered - _time_of(acked, str(ref))) * 1000)
            after_end.append((answered - _time_of(ended, str(ref))) * 1000)
            ref = noop.enqueue(n)
            while not app.job(ref).done:
                time.sleep(POLL_S)
            polled.append((time.time() - _time_of(ended, str(ref))) * 1000)
        chained, single = _chains(bench_canvas)
        chord_lags = [_chord_lag(bench_canvas, c, acked, ended) for c in range(CHORDS)]
        app.close()
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if worker is not None:
            worker.terminate()
            worker.wait(timeout=60)
        stop(server)
        sys.modules.pop("bench_canvas", None)
        sys.path.remove(str(folder))
        shutil.rmtree(folder, ignore_errors=True)
    return (
        *_p50_p99(after_end),
        *_p50_p99(polled),
        *_p50_p99(after_ack),
        *_p50_p99(chained),
        *_p50_p99(single),
        statistics.median(chord_lags),
    )


def _chains(module: Any) -> tuple[list[float], list[float]]:
    """Enqueue-to-result times (ms) of chains of three no-op links, and of single jobs."""
    import brook

    app, link = module.app, module.link
    chained, single = [], []
    for _ in range(CHAINS):
        started = time.perf_counter()
        ref = brook.chain(link.s(0), link.s(), link.s()).enqueue()
        assert app.result(ref, timeout=30) == 3
        chained.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        assert app.result(link.enqueue(0), timeout=30) == 1
        single.append((time.perf_counter() - started) * 1000)
    return chained, single


def _chord_lag(module: Any, chord: int, acked: Path, ended: Path) -> float:
    """How long (ms) after the last member's ack call returned the callback started."""
    import brook

    app = module.app
    acked.write_text("")
    header = brook.group(module.member.s(chord, i) for i in range(CHORD_MEMBERS))
    ref = brook.chord(header, module.gathered.s(chord)).enqueue()
    assert app.result(ref, timeout=300) == CHORD_MEMBERS
    last_ack = max(
        float(parts[1])
        for line in acked.read_text().splitlines()
        if len(parts := line.split()) == 2
    )
    return (_time_of(ended, f"callback-{chord}") - last_ack) * 1000


def _p50_p99(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99) - 1]


def main() -> str:
    load_before = os.getloadavg()[0]
    trials = []
    for _ in range(TRIALS):
        trial = result_trial()
        trials.append(trial)
        print(
            f"canvas: app.result after the task returned p50 {trial[0]:.1f} ms p99 "
            f"{trial[1]:.1f} ms; polling every {POLL_S * 1000:.0f} ms p50 {trial[2]:.1f} ms "
            f"p99 {trial[3]:.1f} ms; after the ack call returned p50 {trial[4]:.1f} ms; "
            f"chain of 3 p50 {trial[6]:.1f} ms (one job {trial[8]:.1f} ms); chord callback "
            f"{trial[10]:.0f} ms after the last ack",
            flush=True,
        )

    def median(i: int) -> float:
        return statistics.median(t[i] for t in trials)

    def runs(i: int) -> str:
        return ", ".join(f"{t[i]:.1f}" for t in trials)

    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        f"## Canvas and results — {stamp}",
        "",
        f"- Machine: {machine()}; load average before {load_before:.2f}, after "
        f"{os.getloadavg()[0]:.2f}.",
        f"- `brook serve` and one `brook worker`; {RESULT_JOBS} no-op jobs one at a time. "
        "From the moment the task returned (before its ack was sent: an upper bound on the "
        "time after the durable ack) to the return of `app.result(ref)` (one long-poll) in "
        "the producer; and from the worker's `on_success` hook (its ack call returned: a "
        f"lower bound). The baseline polls `app.job(ref)` every {POLL_S * 1000:.0f} ms. "
        f"Medians of {TRIALS} trials.",
        "",
        "| measure | median | trials | target |",
        "| --- | ---: | --- | --- |",
        f"| app.result after the task returned, p50 (ms) | {median(0):.1f} | {runs(0)} | <= 20 |",
        f"| app.result after the task returned, p99 (ms) | {median(1):.1f} | {runs(1)} | |",
        f"| app.result after the ack call returned, p50 (ms) | {median(4):.1f} | {runs(4)} | |",
        f"| polling every {POLL_S * 1000:.0f} ms, p50 (ms) | {median(2):.1f} | {runs(2)} | |",
        f"| polling every {POLL_S * 1000:.0f} ms, p99 (ms) | {median(3):.1f} | {runs(3)} | |",
        f"| chain of 3 no-op links, enqueue to result, p50 (ms) | {median(6):.1f} | {runs(6)} "
        "| <= 30 |",
        f"| chain of 3, p99 (ms) | {median(7):.1f} | {runs(7)} | |",
        f"| baseline: one no-op job, enqueue to result, p50 (ms) | {median(8):.1f} | {runs(8)} | |",
        f"| chord of {CHORD_MEMBERS}: callback started after the last member's ack (ms; "
        f"median of {CHORDS} a trial) | {median(10):.0f} | {runs(10)} | <= 2000 |",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    section_main(main)
