"""`brook bench`: append as fast as durability allows, and say how fast that was."""

from __future__ import annotations

import secrets

import click

from brook import limits
from brook.cli.common import broker_options, connect
from brook.cli.errors import friendly


@click.command()
@click.option(
    "--topic",
    default=None,
    help="Append to this topic, and keep it (default: a new topic bench.<random>, deleted after).",
)
@click.option("--keep", is_flag=True, help="Keep the topic made for the run.")
@click.option("--records", "count", default=100_000, show_default=True, type=click.IntRange(1))
@click.option(
    "--size",
    default=1024,
    show_default=True,
    type=click.IntRange(0, limits.record_bytes_max_default),
)
@click.option(
    "--batch",
    default=1,
    show_default=True,
    type=click.IntRange(1, 10_000),
    help="Records per call.",
)
@click.option(
    "--producers", default=8, show_default=True, type=click.IntRange(1, 1024), help="Threads."
)
@broker_options
@friendly
def bench(
    topic: str | None,
    keep: bool,
    count: int,
    size: int,
    batch: int,
    producers: int,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Append records as fast as durability allows; report records/s and latency. Unless
    given --topic, it appends to a topic of its own and deletes it after."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    from brook import loadgen

    own = topic is None
    name = topic or f"bench.{secrets.token_hex(4)}"
    with (
        connect(data, url, api_key) as b,
        Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            transient=True,
            console=None,
        ) as bar,
    ):
        task = bar.add_task(f"appending to {name}", total=count)
        # An embedded broker on S3 counts its requests; a remote one is the server's business.
        storage_stats = getattr(b, "storage_stats", None)
        before = storage_stats().requests if storage_stats is not None else {}
        try:
            result = loadgen.run(
                b, name, count, size, batch, producers, lambda n: bar.advance(task, n)
            )
            after = storage_stats().requests if storage_stats is not None else {}
        finally:
            if own and not keep and name in {t.name for t in b.topics()}:
                b.delete_topic(name)
    click.echo(result.summary(size))
    if own and keep:
        click.echo(f"kept topic {name}")
    if after and result.records:
        used = {kind: after[kind] - before.get(kind, 0) for kind in after}
        per_thousand = ", ".join(
            f"{kind.upper()} {count * 1000 / result.records:.1f}"
            for kind, count in used.items()
            if count
        )
        click.echo(f"object store requests per 1,000 records: {per_thousand}")
