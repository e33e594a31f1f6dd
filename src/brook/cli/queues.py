"""`brook queue`: look into a queue group, lease, list its dead records, redrive."""

from __future__ import annotations

from typing import Any

import click

from brook import limits
from brook.cli.common import (
    backoff_given,
    backoff_options,
    broker_options,
    connect,
    plural,
    read_all,
    shown,
)
from brook.cli.errors import friendly


@click.group()
def queue() -> None:
    """Look into a queue group: counts, leases, dead records and their errors, redrive, cancel."""


@queue.command("stats")
@click.argument("topic")
@click.argument("group")
@broker_options
@friendly
def queue_stats(topic: str, group: str, data: str, url: str | None, api_key: str | None) -> None:
    """Print the group's settings and its records by state."""
    with connect(data, url, api_key, read_only=True) as b:
        q = b.queue(topic, group, create=False)
        for name, value in q.stats().items():
            click.echo(f"{name}: {value}")
        for name, value in q.settings().items():
            click.echo(f"setting {name}: {shown(value)}")


@queue.command("configure")
@click.argument("topic")
@click.argument("group")
@click.option("--visibility-timeout-ms", type=click.IntRange(1), default=None)
@click.option("--max-attempts", type=click.IntRange(1), default=None)
@click.option("--ordering", type=click.Choice(["none", "key"]), default=None)
@click.option("--dead-letter-topic", default=None)
@click.option(
    "--expire-after-ms",
    type=click.IntRange(0),
    default=None,
    help="Records not finished within this long are dead (0: never).",
)
@backoff_options
@click.option(
    "--concurrency-per-key",
    type=click.IntRange(0),
    default=None,
    help="Most records of one key leased at once (0: no limit).",
)
@click.option(
    "--key-rate-limit",
    "key_rate_limit_per_s",
    type=click.FloatRange(0),
    default=None,
    help="Most leases a second per key (0: no limit).",
)
@click.option(
    "--rate-limit",
    "rate_limit_per_s",
    type=click.FloatRange(0),
    default=None,
    help="Most leases a second for the whole group (0: no limit).",
)
@click.option(
    "--lower-priority-share",
    type=click.FloatRange(0, 1),
    default=None,
    help="Share of leases lower priorities get while higher ones wait (0: strict).",
)
@broker_options
@friendly
def queue_configure(
    topic: str,
    group: str,
    backoff_min_ms: int | None,
    backoff_max_ms: int | None,
    backoff_factor: float | None,
    data: str,
    url: str | None,
    api_key: str | None,
    **settings: Any,
) -> None:
    """Create the queue group, or change its settings; print them. Settings not
    given keep their stored values."""
    with connect(data, url, api_key) as b:
        q = b.queue(topic, group)
        stored = q.settings()["backoff"]
        backoff = backoff_given(stored, backoff_min_ms, backoff_max_ms, backoff_factor)
        q = b.queue(topic, group, backoff=backoff, **settings)
        for name, value in q.settings().items():
            click.echo(f"{name}: {shown(value)}")


@queue.command("job")
@click.argument("topic")
@click.argument("group")
@click.argument("partition", type=click.IntRange(0))
@click.argument("offset", type=click.IntRange(0))
@broker_options
@friendly
def queue_job(
    topic: str,
    group: str,
    partition: int,
    offset: int,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Print where the record at PARTITION/OFFSET stands: state, attempts, last
    error, the result its ack gave."""
    with connect(data, url, api_key, read_only=True) as b:
        info = b.queue(topic, group, create=False).job(partition, offset)
        click.echo(f"state: {info.state}\nattempt: {info.attempt}")
        if info.error:
            click.echo(f"error: {info.error}")
        if info.due_ms is not None:
            click.echo(f"due_ms: {info.due_ms}")
        if info.acked_ms is not None:
            click.echo(f"acked_ms: {info.acked_ms}")
        if info.result is not None:
            click.echo(f"result: {info.result.decode(errors='replace')}")


@queue.command("lease")
@click.argument("topic")
@click.argument("group")
@click.option(
    "-n", "count", type=click.IntRange(1), default=10, show_default=True, help="Most records."
)
@click.option("--wait", type=float, default=0.0, show_default=True, help="Seconds to wait.")
@click.option(
    "--ack", "then_ack", is_flag=True, help="Ack what was leased (take it off the queue)."
)
@broker_options
@friendly
def queue_lease(
    topic: str,
    group: str,
    count: int,
    wait: float,
    then_ack: bool,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Lease up to N records and print them (partition, offset, attempt, receipt, value).

    Unless --ack is given they stay leased until their visibility timeout ends.
    """
    with connect(data, url, api_key) as b:
        q = b.queue(topic, group)
        jobs = q.lease(max_records=count, timeout=wait)
        for job in jobs:
            r = job.record
            value = r.value.decode(errors="replace")
            click.echo(f"{r.partition}\t{r.offset}\tattempt={job.attempt}\t{job.receipt}\t{value}")
        if then_ack and jobs:
            q.ack(jobs)
            click.echo(f"acked {plural(len(jobs), 'record')}", err=True)


@queue.command("dead")
@click.argument("topic")
@click.argument("group")
@click.option("-n", "count", type=click.IntRange(1), default=None, help="Stop after N records.")
@broker_options
@friendly
def queue_dead(
    topic: str, group: str, count: int | None, data: str, url: str | None, api_key: str | None
) -> None:
    """Print the group's records in its dead-letter topic: origin, attempts, error, value.

    The dead-letter topic is a log: records redriven since still appear in it.
    """
    with connect(data, url, api_key, read_only=True) as b:
        target = b.queue(topic, group, create=False).settings()["dead_letter_topic"]
        if target is None:
            click.echo(
                "this group keeps its dead records in place (see brook queue stats)", err=True
            )
            return
        if target not in {info.name for info in b.topics()}:
            click.echo(f"no dead records yet ({target} is empty)", err=True)
            return
        shown = 0
        for record in read_all(b, target, None):
            headers = record.headers or {}
            if headers.get("brook.group", b"").decode() != group:
                continue
            if headers.get("brook.origin.topic", b"").decode() != topic:
                continue
            origin = (
                f"{headers['brook.origin.partition'].decode()}/"
                f"{headers['brook.origin.offset'].decode()}"
            )
            attempts = headers.get("brook.attempts", b"?").decode()
            error = headers.get("brook.error", b"").decode(errors="replace")
            value = record.value.decode(errors="replace")
            click.echo(f"{origin}\tattempts={attempts}\terror={error!r}\t{value}")
            shown += 1
            if count is not None and shown >= count:
                break


@queue.command("errors")
@click.argument("topic")
@click.argument("group")
@click.option("--error", default=None, help="List the dead records of this error group.")
@click.option(
    "--after",
    default=None,
    metavar="PARTITION/OFFSET",
    help="With --error: the records after this one (the last line's, for the next page).",
)
@click.option("-n", "count", type=click.IntRange(1), default=100, show_default=True)
@broker_options
@friendly
def queue_errors(
    topic: str,
    group: str,
    error: str | None,
    after: str | None,
    count: int,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Print what the group's dead records died of, grouped, most first (the count and the
    first line of one error); with --error, the dead records of that group, N at a time."""
    if after is not None and error is None:
        raise click.UsageError("--after pages through one group's records: give --error too")
    place = None if after is None else _position(after, "--after")
    with connect(data, url, api_key, read_only=True) as b:
        q = b.queue(topic, group, create=False)
        if error is None:
            for found in q.dead_errors()[:count]:
                click.echo(f"{found.dead}\t{found.group}\t{found.example.partition(chr(10))[0]}")
            return
        for dead in q.dead_records(error, place, count):
            click.echo(
                f"{dead.partition}/{dead.offset}\tattempts={dead.attempts}\t"
                f"redriven={dead.redriven}\terror={dead.error.partition(chr(10))[0]!r}"
            )


@queue.command("redrive")
@click.argument("topic")
@click.argument("group")
@click.option(
    "--limit", type=click.IntRange(1), default=None, help="Most records (default: all dead)."
)
@click.option(
    "--error",
    default=None,
    help="Only the dead records of this error group (as `brook queue errors` names it).",
)
@broker_options
@friendly
def queue_redrive(
    topic: str,
    group: str,
    limit: int | None,
    error: str | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Put dead records back to work, their attempts counted afresh: all of them, or
    those that died of one error (once what caused it is mended)."""
    with connect(data, url, api_key) as b:
        q = b.queue(topic, group, create=False)
        count = q.redrive(limit=limit) if error is None else _redrive_group(q, error, limit)
        click.echo(f"redriven: {plural(count, 'record')}")


def _redrive_group(q: Any, error: str, limit: int | None) -> int:
    """Redrive the dead records of error group `error`, a page at a time (by place, so
    a page goes on after the last even once it is redriven)."""
    count, after = 0, None
    while limit is None or count < limit:
        page_size = limits.dead_records_page_default
        if limit is not None:
            page_size = min(page_size, limit - count)
        page = q.dead_records(error, after, page_size)
        if not page:
            break
        count += q.redrive(records=[(d.partition, d.offset) for d in page])
        after = (page[-1].partition, page[-1].offset)
    return count


@queue.command("cancel")
@click.argument("topic")
@click.argument("group")
@click.option(
    "--record",
    "records",
    multiple=True,
    metavar="PARTITION/OFFSET",
    help="A record to cancel (again for more).",
)
@click.option("--key", default=None, help="Cancel every waiting record of this key.")
@click.option("--reason", default="cancelled", show_default=True)
@broker_options
@friendly
def queue_cancel(
    topic: str,
    group: str,
    records: tuple[str, ...],
    key: str | None,
    reason: str,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Cancel waiting records (ready, delayed, retrying): dead at once with the reason,
    never delivered unless redriven. Records leased or finished are left as they are."""
    if bool(records) == (key is not None):
        raise click.UsageError("give --record PARTITION/OFFSET (one or more) or --key, one of them")
    positions = [_position(text, "--record") for text in records] or None
    with connect(data, url, api_key) as b:
        q = b.queue(topic, group, create=False)
        if positions is not None:
            done = q.cancel(records=positions, reason=reason)
        else:
            done = q.cancel(key=key, reason=reason)
        click.echo(f"cancelled: {plural(len(done), 'record')}")
        for partition, offset in done:
            click.echo(f"  {partition}/{offset}")


def _position(text: str, option: str) -> tuple[int, int]:
    partition, _, offset = text.partition("/")
    if not (partition.isdigit() and offset.isdigit()):
        raise click.BadParameter(
            f"{text!r} is not PARTITION/OFFSET (such as 0/42)", param_hint=option
        )
    return int(partition), int(offset)
