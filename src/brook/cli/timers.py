"""`brook timers`: schedule, list, cancel and show timers."""

from __future__ import annotations

import datetime

import click

from brook import limits
from brook.cli.common import broker_options, connect, time_ms
from brook.cli.errors import friendly


@click.group()
def timers() -> None:
    """Schedule, list, cancel and show timers."""


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
    due = None if at is None else time_ms(at, "--at")
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


@timers.command("list")
@click.option("--topic", default=None, help="Only this topic's timers.")
@click.option("--due-from", default=None, help="Only timers due at or after (ms or ISO 8601).")
@click.option("--due-to", default=None, help="Only timers due before (ms or ISO 8601).")
@click.option("--after", default=None, help="Where to go on from: the cursor a page ends with.")
@click.option(
    "--limit",
    type=click.IntRange(1, limits.timers_page_max),
    default=limits.timers_page_default,
    show_default=True,
)
@broker_options
@friendly
def timers_list(
    topic: str | None,
    due_from: str | None,
    due_to: str | None,
    after: str | None,
    limit: int,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Pending timers, earliest due first: one page, and the command for the next."""
    low = None if due_from is None else time_ms(due_from, "--due-from")
    high = None if due_to is None else time_ms(due_to, "--due-to")
    with connect(data, url, api_key, read_only=True) as b:
        page = b.list_timers(topic, low, high, after, limit)
    if not page.timers:
        click.echo("no pending timers", err=True)
        return
    click.echo("timer\ttopic\tdue")
    for info in page.timers:
        due = datetime.datetime.fromtimestamp(info.due_ms / 1000, datetime.UTC).isoformat()
        click.echo(f"{info.timer_id}\t{info.topic}\t{due}")
    if page.next is not None:
        click.echo(
            f"more: brook timers list --after '{page.next}' (and the same filters)", err=True
        )


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
