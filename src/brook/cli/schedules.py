"""`brook schedules`: periodic schedules stored in the broker (brook/schedules)."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

import click

from brook.cli.common import broker_options, connect, shown
from brook.cli.errors import friendly

if TYPE_CHECKING:
    from brook.models import ScheduleInfo


@click.group()
def schedules() -> None:
    """Create, list, pause, resume and delete periodic schedules."""


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _timing(info: ScheduleInfo) -> str:
    if info.cron is not None:
        return f"cron {info.cron!r} {info.tz}"
    return f"every {info.every_ms} ms"


def _show(info: ScheduleInfo) -> None:
    fields = {
        "name": info.name,
        "topic": info.topic,
        "timing": _timing(info),
        "missed": info.missed,
        "paused": info.paused,
        "next": _when(info.next_ms),
        "last": _when(info.last_slot_ms),
        "fired": info.fired,
        "skipped": info.skipped,
        "value": info.value.decode(errors="replace"),
    }
    for name, value in fields.items():
        click.echo(f"{name}: {shown(value)}")


@schedules.command("create")
@click.argument("name")
@click.argument("topic")
@click.argument("value", default="")
@click.option("--cron", default=None, help="Five-field cron expression, e.g. '*/5 * * * *'.")
@click.option("--every-ms", type=click.IntRange(1), default=None, help="A fixed interval.")
@click.option("--tz", default="UTC", show_default=True, help="The cron expression's time zone.")
@click.option(
    "--missed",
    type=click.Choice(["skip", "run_once"]),
    default="skip",
    show_default=True,
    help="What slots the broker was down over get.",
)
@click.option("--key", default=None, help="The records' key (UTF-8).")
@broker_options
@friendly
def schedules_create(
    name: str,
    topic: str,
    value: str,
    cron: str | None,
    every_ms: int | None,
    tz: str,
    missed: str,
    key: str | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Append VALUE to TOPIC once per slot (--cron or --every-ms); creates NAME or
    replaces its definition."""
    if (cron is None) == (every_ms is None):
        raise click.UsageError("give --cron EXPRESSION or --every-ms MS, exactly one")
    with connect(data, url, api_key) as b:
        info = b.put_schedule(
            name,
            topic,
            value.encode(),
            cron=cron,
            every_ms=every_ms,
            tz=tz,
            missed=missed,
            key=None if key is None else key.encode(),
        )
        _show(info)


@schedules.command("list")
@broker_options
@friendly
def schedules_list(data: str, url: str | None, api_key: str | None) -> None:
    """Every schedule: name, topic, timing, next and last slot, slots fired."""
    with connect(data, url, api_key, read_only=True) as b:
        found = b.list_schedules()
    if not found:
        click.echo("no schedules", err=True)
        return
    click.echo("NAME\tTOPIC\tTIMING\tNEXT\tLAST\tFIRED\tSTATE")
    for info in found:
        state = "paused" if info.paused else "active"
        click.echo(
            f"{info.name}\t{info.topic}\t{_timing(info)}\t{_when(info.next_ms)}\t"
            f"{_when(info.last_slot_ms)}\t{info.fired}\t{state}"
        )


@schedules.command("show")
@click.argument("name")
@broker_options
@friendly
def schedules_show(name: str, data: str, url: str | None, api_key: str | None) -> None:
    """One schedule's definition and where it stands."""
    with connect(data, url, api_key, read_only=True) as b:
        _show(b.get_schedule(name))


@schedules.command("pause")
@click.argument("name")
@broker_options
@friendly
def schedules_pause(name: str, data: str, url: str | None, api_key: str | None) -> None:
    """Fire no slot until resumed."""
    with connect(data, url, api_key) as b:
        _show(b.pause_schedule(name))


@schedules.command("resume")
@click.argument("name")
@broker_options
@friendly
def schedules_resume(name: str, data: str, url: str | None, api_key: str | None) -> None:
    """Fire again from the next slot after now."""
    with connect(data, url, api_key) as b:
        _show(b.resume_schedule(name))


@schedules.command("delete")
@click.argument("name")
@broker_options
@friendly
def schedules_delete(name: str, data: str, url: str | None, api_key: str | None) -> None:
    """Delete the schedule (records it appended stay in their topic)."""
    with connect(data, url, api_key) as b:
        if not b.delete_schedule(name):
            raise click.ClickException(f"no schedule named {name!r}: see brook schedules list")
        click.echo(f"deleted {name}")
