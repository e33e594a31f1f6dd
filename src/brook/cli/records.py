"""`brook produce` and `brook consume`: records in and out from a shell."""

from __future__ import annotations

import sys

import click

import brook
from brook import limits, scheduling
from brook.cli.common import broker_options, connect, plural, read_all
from brook.cli.errors import friendly


def _headers(pairs: tuple[str, ...]) -> dict[str, bytes]:
    headers = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--header")
        headers[name] = value.encode()
    return headers


@click.command()
@click.argument("topic")
@click.argument("value", required=False)
@click.option("--key", default=None, help="Key for every record (UTF-8).")
@click.option(
    "--header",
    "header_pairs",
    multiple=True,
    metavar="NAME=VALUE",
    help="A header for every record (repeat for more), e.g. content-type=application/json.",
)
@click.option(
    "--priority",
    type=click.IntRange(limits.priority_min, limits.priority_max),
    default=None,
    help="Queue groups lease higher priorities first (header brook.priority).",
)
@click.option(
    "--delay-ms",
    type=click.IntRange(0, limits.timer_horizon_ms_max),
    default=None,
    help="No queue group leases the records before this long after they are appended.",
)
@broker_options
@friendly
def produce(
    topic: str,
    value: str | None,
    key: str | None,
    header_pairs: tuple[str, ...],
    priority: int | None,
    delay_ms: int | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Append VALUE, or each line of standard input, to TOPIC."""
    headers = _headers(header_pairs)
    headers.update(scheduling.headers(priority=priority, delay_ms=delay_ms))
    with connect(data, url, api_key) as b:
        t = b.topic(topic)
        key_bytes = key.encode() if key is not None else None
        if value is not None:
            ack = t.append(value.encode(), key=key_bytes, headers=headers or None)
            click.echo(f"partition={ack.partition} offset={ack.offset}")
            return
        lines = [
            brook.Record(line.rstrip("\n").encode(), key=key_bytes, headers=headers or None)
            for line in sys.stdin
        ]
        for start in range(0, len(lines), 1000):
            t.append_many(lines[start : start + 1000])
        click.echo(f"appended {plural(len(lines), 'record')}", err=True)


@click.command()
@click.argument("topic")
@click.option("--group", default=None, help="Stream group; its position is committed.")
@click.option(
    "--from-beginning", is_flag=True, help="Without --group: print every retained record."
)
@click.option("-n", "count", type=click.IntRange(1), default=None, help="Stop after N records.")
@broker_options
@friendly
def consume(
    topic: str,
    group: str | None,
    from_beginning: bool,
    count: int | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Print records of TOPIC, one value per line, until none are left (or -n are printed).

    With --group, from the group's position, committing as it goes. Without, nothing is
    recorded anywhere: --from-beginning reads every partition from its oldest record.
    """
    if group is None and not from_beginning:
        raise click.UsageError(
            "say where to start: --group G (from the group's position, committing as it goes) "
            "or --from-beginning (every retained record, nothing recorded)"
        )
    if group is not None and from_beginning:
        raise click.UsageError("--from-beginning is for reading without a group; drop one of them")
    with connect(data, url, api_key, read_only=group is None) as b:
        if group is None:
            for record in read_all(b, topic, count):
                click.echo(record.value.decode(errors="replace"))
            return
        consumer = b.consumer(topic, group)
        printed = 0
        while count is None or printed < count:
            want = 500 if count is None else min(500, count - printed)
            polled = consumer.poll(max_records=want, timeout=0)
            if not polled:
                break
            for record in polled:
                click.echo(record.value.decode(errors="replace"))
            printed += len(polled)
            consumer.commit()
