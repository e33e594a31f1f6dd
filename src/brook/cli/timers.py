"""`brook timers`: schedule, cancel and show timers."""

from __future__ import annotations

import datetime

import click

from brook.cli.common import broker_options, connect
from brook.cli.errors import friendly


@click.group()
def timers() -> None:
    """Schedule, cancel and show timers."""


def _at_ms(text: str) -> int:
    """--at as ms since the epoch, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither ms since the epoch nor an ISO 8601 time", param_hint="--at"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


@timers.command("schedule")
@click.argument("topic")
@click.argument("value")
@click.option(
    "--delay-ms", type=click.IntRange(0), default=None, help="Fire this many ms from now (0: now)."
)
@click.option("--at", "at", default=None, help="Fire at this time: ms since the epoch or ISO 8601.")
@click.option("--key", default=None, help="The record's key (UTF-8).")
@click.option("--id", "timer_id", default=None, help="The timer's id (default: a new one).")
@broker_options
@friendly
def timers_schedule(
    topic: str,
    value: str,
    delay_ms: int | None,
    at: str | None,
    key: str | None,
    timer_id: str | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Schedule VALUE to be appended to TOPIC later (--at or --delay-ms); prints its id."""
    if (at is None) == (delay_ms is None):
        raise click.UsageError(
            "give --at TIME (ms since the epoch or ISO 8601) or --delay-ms MS, exactly one"
        )
    due = None if at is None else _at_ms(at)
    with connect(data, url, api_key) as b:
        click.echo(
            b.schedule(
                topic,
                value.encode(),
                at=due,
                delay_ms=delay_ms,
                key=None if key is None else key.encode(),
                timer_id=timer_id,
            )
        )


@timers.command("cancel")
@click.argument("timer_id")
@broker_options
@friendly
def timers_cancel(timer_id: str, data: str, url: str | None, api_key: str | None) -> None:
    """Cancel a pending timer (exit status 1 if it is not pending)."""
    with connect(data, url, api_key) as b:
        if not b.cancel_timer(timer_id):
            info = b.timer(timer_id)
            if info is None:
                raise click.ClickException(f"timer {timer_id} is not known")
            if info.state == "fired":
                what = f"it fired, to {info.topic} partition {info.partition} offset {info.offset}"
            else:
                what = f"it was {info.state}"
            raise click.ClickException(f"timer {timer_id} is not pending: {what}")
        click.echo(f"cancelled {timer_id}")


@timers.command("show")
@click.argument("timer_id")
@broker_options
@friendly
def timers_show(timer_id: str, data: str, url: str | None, api_key: str | None) -> None:
    """Print a timer's state: pending, fired (where) or cancelled."""
    with connect(data, url, api_key, read_only=True) as b:
        info = b.timer(timer_id)
        if info is None:
            raise click.ClickException(f"timer {timer_id} is not known")
        due = datetime.datetime.fromtimestamp(info.due_ms / 1000, datetime.UTC).isoformat()
        click.echo(f"timer: {info.timer_id}\nstate: {info.state}\ntopic: {info.topic}\ndue: {due}")
        if info.state == "fired":
            click.echo(f"partition: {info.partition}\noffset: {info.offset}")
