"""`make profile`: where the time goes on the hot paths, sampled by py-spy.

    python -m benchmarks.profile [SCENARIO ...]      (all of them by default)

Each scenario drives the load of one of the benchmarks (wrk, or the queue
workers of benchmarks/queues.py) at a `brook serve`, and `py-spy record --gil`
attaches to the server for the load's duration only (not its start), sampling
only while a thread holds the GIL: with one interpreter per process, that is
the time the server can spend on nothing else. The embedded scenario samples
the benchmark's own process. Written to .bench/profiles/: `<scenario>.txt`, the
collapsed stacks (open them in speedscope.app, or flamegraph.pl for an SVG),
and `<scenario>.md`, the summary printed here: the share of the run the GIL
was held, the functions with the most samples of their own, and the time spent
inside each part of the code (Brook's modules, the libraries, the standard
library). docs/PERFORMANCE.md says what these showed and what was done about it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import queues, server
from benchmarks.server import brook_serve, scratch, stop

ROOT = Path(__file__).parents[1]
RATE = 250
"""Samples per second."""
TOP = 15
PY_SPY = str(Path(sys.executable).with_name("py-spy"))


SERVED: dict[str, tuple[str, Callable[[int, Path], float]]] = {
    "http_single": (
        "HTTP, one 1 KB record per request, 64 connections",
        server.post_single_records,
    ),
    "http_json32": (
        "HTTP, JSON batches of 32 x 1 KB, 64 connections",
        lambda port, folder: server.post_json_batches(port, folder, 32, server.CONNECTIONS),
    ),
    "http_json32_b64": (
        "HTTP, JSON batches of 32 x 1 KB as value_b64, 64 connections",
        lambda port, folder: server.post_json_batches(port, folder, 32, server.CONNECTIONS, True),
    ),
    "http_binary32": (
        "HTTP, binary batches of 32 x 1 KB, 64 connections",
        lambda port, folder: server.post_binary_batches(port, folder, 32, server.CONNECTIONS),
    ),
    "queue_served": (
        "queue lease + ack through the server",
        lambda port, folder: queues.served_work(port),
    ),
}
EMBEDDED = {
    "threads": ("embedded, 64 threads x one record per call", "run.brook_threads_single_append()"),
}
SCENARIOS = [*SERVED, *EMBEDDED]

_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")


@dataclass
class Profile:
    samples: int = 0
    own: Counter[str] = field(default_factory=Counter)
    """Samples by the function at the top of the stack."""
    within: Counter[str] = field(default_factory=Counter)
    """Samples by each part of the code on the stack (counted once per sample)."""


def part_of(file: str) -> str:
    """Which part of the code a frame's file is (py-spy names files by module path):
    a Brook module, a library or a standard module."""
    path = file.removesuffix(".py").removesuffix("/__init__")
    if path.startswith("brook/"):
        return path.replace("/", ".")
    if path.startswith("<frozen"):
        return "imports"
    return path.split("/", 1)[0]


def summarize(collapsed: str) -> Profile:
    """The samples of py-spy's collapsed stacks: by function, and by part of the code."""
    profile = Profile()
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        found = [_FRAME.match(f) for f in stack.split(";") if not f.startswith("process ")]
        named = [(m["function"], m["file"]) for m in found if m is not None]
        if not named:
            continue
        n = int(count)
        profile.samples += n
        function, file = named[-1]
        profile.own[f"{function} ({part_of(file)})"] += n
        for part in {part_of(file) for _, file in named}:
            profile.within[part] += n
    return profile


def report(name: str, title: str, profile: Profile, seconds: float, result: float) -> str:
    held = profile.samples / (RATE * seconds)
    lines = [
        f"### {name}: {title}",
        "",
        f"{result:,.0f}/s under the profiler; the GIL held {held:.0%} of the {seconds:.1f} s "
        f"sampled ({profile.samples:,} samples).",
        "",
        "| own samples | function |",
        "| ---: | --- |",
    ]
    for function, n in profile.own.most_common(TOP):
        lines.append(f"| {n / profile.samples:.1%} | `{function}` |")
    lines += ["", "| within | part of the code |", "| ---: | --- |"]
    for part, n in profile.within.most_common(TOP):
        lines.append(f"| {n / profile.samples:.1%} | `{part}` |")
    return "\n".join(lines) + "\n"


def _py_spy(stacks: Path, target: list[str]) -> subprocess.Popen[bytes]:
    command = [PY_SPY, "record", "--gil", "--rate", str(RATE), "--format", "raw"]
    return subprocess.Popen(
        [*command, "--output", str(stacks), *target],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finish(spy: subprocess.Popen[bytes], stacks: Path) -> None:
    _, errors = spy.communicate(timeout=120)
    if not stacks.exists():
        sys.exit(f"py-spy wrote nothing: {errors.decode().strip()[-2000:]}")


def profile_served(name: str, out: Path) -> tuple[Profile, float, float]:
    """The load against a `brook serve`, py-spy attached for the load only."""
    _, load = SERVED[name]
    folder = scratch()
    stacks = out / f"{name}.txt"
    process, port = brook_serve(folder / "data")
    try:
        time.sleep(0.5)
        spy = _py_spy(stacks, ["--nonblocking", "--pid", str(process.pid)])
        time.sleep(0.5)  # attached
        started = time.monotonic()
        result = load(port, folder)
        seconds = time.monotonic() - started
        spy.send_signal(signal.SIGINT)
        _finish(spy, stacks)
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)
    return summarize(stacks.read_text()), seconds, result


def profile_embedded(name: str, out: Path) -> tuple[Profile, float, float]:
    """The benchmark's own process, from its start (imports are a small share)."""
    _, expression = EMBEDDED[name]
    stacks = out / f"{name}.txt"
    code = f"from benchmarks import run\nprint('RESULT', float({expression}))\n"
    started = time.monotonic()
    spy = subprocess.Popen(
        [
            PY_SPY,
            "record",
            "--gil",
            "--rate",
            str(RATE),
            "--format",
            "raw",
            "--output",
            str(stacks),
            "--",
            sys.executable,
            "-c",
            code,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    output, errors = spy.communicate(timeout=300)
    seconds = time.monotonic() - started
    found = [ln for ln in output.decode().splitlines() if ln.startswith("RESULT ")]
    if not found or not stacks.exists():
        sys.exit(f"{name} failed under py-spy: {errors.decode().strip()[-2000:]}")
    return summarize(stacks.read_text()), seconds, float(found[0].split()[1])


def profile(name: str, out: Path) -> str:
    if name in SERVED:
        title = SERVED[name][0]
        sampled = profile_served(name, out)
    else:
        title = EMBEDDED[name][0]
        sampled = profile_embedded(name, out)
    text = report(name, title, *sampled)
    (out / f"{name}.md").write_text(text)
    return text


def main(names: list[str]) -> None:
    out = ROOT / ".bench" / "profiles"
    out.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.2f}; stacks and summaries in {out}\n")
    for name in names:
        print(profile(name, out), flush=True)


if __name__ == "__main__":
    chosen = sys.argv[1:] or SCENARIOS
    unknown = [n for n in chosen if n not in SCENARIOS]
    if unknown:
        sys.exit(f"unknown scenario(s) {unknown}: choose from {', '.join(SCENARIOS)}")
    main(chosen)
