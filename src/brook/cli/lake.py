"""`brook lake`: write the lake now, and show where it stands."""

from __future__ import annotations

from typing import Any

import click

from brook.cli.common import broker_options, connect_given, plural, storage_options
from brook.cli.errors import friendly
from brook.errors import Unavailable


@click.group()
def lake() -> None:
    """Topics as Parquet tables under the location's lake/ (brook serve --lake)."""


@lake.command("sync")
@click.option("--topic", default=None, help="Only this topic (default: every topic).")
@broker_options
@storage_options
@friendly
def lake_sync(topic: str | None, **given: Any) -> None:
    """Write every acknowledged record not yet in the lake as Parquet, and return once
    it is durable. Through a running broker with --url; else on --data (a directory)
    or --storage (s3://bucket/prefix) when no broker serves it."""
    with connect_given(given, lake=True) as b:
        if given["url"] is None:
            _show(b.lake_sync(topic))
            return
        before = b.lake_status(topic)  # what the lake holds, should the broker stop
        try:
            synced = b.lake_sync(topic)
        except Unavailable as exc:
            rows = sum(s.rows for s in before)
            raise Unavailable(
                f"the lake's sync was cut short: {exc.message.rstrip('.')}. The lake holds whole "
                f"files only: {rows} rows of {plural(len(before), 'topic')} before this sync, and "
                "whatever the sync finished meanwhile. Run `brook lake sync` again once a "
                "broker serves (`brook lake status` says how far the lake reaches)"
            ) from None
        _show(synced)


@lake.command("status")
@click.option("--topic", default=None, help="Only this topic (default: every topic).")
@broker_options
@storage_options
@friendly
def lake_status(topic: str | None, **given: Any) -> None:
    """Each topic's lake: its files, and per partition how far it reaches, how many
    records are not in it yet and how long the oldest has waited. Read-only: works
    beside the broker that writes it."""
    with connect_given(given, read_only=True) as b:
        _show(b.lake_status(topic))


def _show(statuses: list[Any]) -> None:
    if not statuses:
        click.echo("no topics")
    for status in statuses:
        click.echo(
            f"{status.topic}\t{plural(status.files, 'file')}\t{status.rows} rows\t"
            f"{status.bytes} bytes\tpending={status.pending}\tlag={status.lag_ms / 1000:.1f}s"
        )
        for p in status.partitions:
            click.echo(
                f"  partition {p.partition}\tlake={p.lake_offset}\tend={p.end_offset}\t"
                f"pending={p.pending}\tlag={p.lag_ms / 1000:.1f}s"
            )
        for h in status.histories:
            click.echo(
                f"  queue group {h.group}\t{plural(h.files, 'file')}\t{h.rows} transitions\t"
                f"lake={h.lake_offset}\tend={h.end_offset}\tpending={h.pending}"
            )
