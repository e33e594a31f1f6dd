"""contrib/grafana/brook.json queries only what `GET /metrics` serves (and, in its task
workers' row, what `brook worker --metrics-port` serves): a broker on S3
(moto) with a stream group, a queue group, a timer and an endpoint, so every family
is there, and every metric and label the dashboard's queries name must be in it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest

import brook
from brook.tasks.metrics import WorkerMetrics
from tests.delivery.receivers import Receiver, wait_for
from tests.s3server import MotoServer
from tests.served import Served

DASHBOARD = Path(__file__).parents[1] / "contrib" / "grafana" / "brook.json"


def _worker_metrics() -> str:
    """What `brook worker --metrics-port` serves, with a run of each outcome."""
    metrics = WorkerMetrics(["charge"], 4, lambda: (1, {"charge": 1}))
    for outcome in ("success", "retry", "dead"):
        metrics.observe("charge", 12.0, outcome, timed_out=outcome == "dead")
    return generate_latest(metrics.registry).decode()


SUFFIXES = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"]}


def exposition(text: str) -> dict[str, set[str] | None]:
    """Each metric name served, with the label names its samples carry (None when it
    has no sample now, as a count of failing loops while none fails)."""
    found: dict[str, set[str] | None] = {}
    for line in text.splitlines():
        declared = re.match(r"# TYPE (\w+) (\w+)", line)
        if declared:
            family, kind = declared.groups()
            found.setdefault(family, None)
            for suffix in SUFFIXES.get(kind, []):
                if not family.endswith(suffix):
                    found.setdefault(family + suffix, None)
            continue
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition("{")
        name = name.split(" ")[0]
        labels = set(re.findall(r'(\w+)="', rest.partition("}")[0])) if rest else set()
        found[name] = (found.get(name) or set()) | labels
    return found


def test_every_query_of_the_dashboard_names_a_served_metric(
    moto: MotoServer, tmp_path: Path
) -> None:
    config = tmp_path / "brook.toml"
    config.write_text("delivery_allow_private_networks = true\n")
    served = Served(
        tmp_path / "unused",
        "--storage",
        moto.fresh_url(),
        "--endpoint-url",
        moto.endpoint,
        "--cache-dir",
        str(tmp_path / "cache"),
        config=config,
    )
    try:
        with Receiver() as receiver, brook.connect(f"http://127.0.0.1:{served.port}") as b:
            b.create_endpoint("hook", receiver.url, ["t"])
            b.topic("t").append(b"one")
            b.consumer("t", "readers").poll(timeout=1)
            queue = b.queue("t", "workers")
            queue.ack(queue.lease(1, timeout=1))
            b.schedule("t", b"later", delay_ms=1)
            wait_for(lambda: b.endpoint("hook").stats().acked == 1)
            wait_for(lambda: len(b.topic("t").read(0, 0, 10)) == 2)  # the timer fired
        _, metrics = served.request("GET", "/metrics")
    finally:
        served.close()
    served_names = exposition(metrics)
    served_names.update(exposition(_worker_metrics()))  # the task workers' row
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel["targets"]]
    assert any("brook_task_" in expr for expr in exprs)
    assert len(exprs) >= 20
    missing = []
    for expr in exprs:
        for name in re.findall(r"\bbrook_[a-z_]+", expr):
            if name not in served_names:
                missing.append(f"{name} (in {expr})")
                continue
            labels = set(re.findall(r"by \(([^)]*)\)", expr))
            used = {label.strip() for group in labels for label in group.split(",")} - {"le"}
            used |= set(re.findall(r"\{(\w+)[!=]", expr))
            carried = served_names[name]
            if carried is None:
                continue  # no sample now: its labels cannot be seen
            unknown = used - carried
            assert not unknown, f"{expr} groups by {unknown}, which {name} does not carry"
    assert not missing, "the dashboard queries metrics /metrics does not serve: " + "; ".join(
        missing
    )
