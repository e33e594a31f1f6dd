"""The soak (soak.py) for BROOK_SOAK_S seconds (15 in `make test`, 1800 in `make
reliability`): no error anywhere, everything drained at the end, and the server's
resident memory and open files flat once warmed up. With BROOK_SOAK_PNG the run is
plotted there (docs/soak.png is the 30-minute run)."""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from tests.soak.soak import plot, run

SECONDS = float(os.environ.get("BROOK_SOAK_S", "15"))


def test_mixed_load_for_a_long_time(tmp_path: Path) -> None:
    soak = run(SECONDS, tmp_path)
    if os.environ.get("BROOK_SOAK_PNG"):
        plot(soak, Path(os.environ["BROOK_SOAK_PNG"]))
    assert soak.errors == [], soak.errors[:10]
    orders = soak.produced - soak.events
    assert soak.produced > SECONDS * 100, f"only {soak.produced} records in {SECONDS} s"
    assert soak.fired == soak.timers - soak.cancelled > 0
    assert soak.delivered == soak.events > 0
    stats = soak.queue_stats
    assert stats["acked"] + stats["dead"] == orders, stats
    assert stats["ready"] == stats["leased"] == stats["retrying"] == 0, stats
    warm = soak.samples[len(soak.samples) // 4 :]  # the first quarter warms up
    assert len(warm) >= 3, "too short to tell"
    half = len(warm) // 2
    early = statistics.mean(s.rss_mb for s in warm[:half])
    late = statistics.mean(s.rss_mb for s in warm[half:])
    assert late <= early * 1.15 + 16, f"resident memory grew from {early:.0f} to {late:.0f} MiB"
    files = [s.open_files for s in warm]
    assert max(files) - min(files) <= 16, f"open files went from {min(files)} to {max(files)}"
    p99 = max(s.p99_ms for s in warm)
    print(
        f"soak {SECONDS:.0f} s: {soak.produced} records produced, {soak.consumed} consumed, "
        f"{stats['acked']} acked, {stats['dead']} dead, {soak.nacked} nacks, "
        f"{soak.fired} timers fired ({soak.cancelled} cancelled), {soak.delivered} delivered "
        f"to a flapping endpoint; resident {early:.0f} -> {late:.0f} MiB, open files "
        f"{min(files)}-{max(files)}, worst p99 {p99:.1f} ms; no error"
    )
