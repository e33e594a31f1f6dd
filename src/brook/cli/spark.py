"""`brook spark ...`: the pipeline jobs of brook.spark.jobs on the command line.

Spark is imported only when a command runs, so the rest of the CLI works
without the `spark` extra; without it these commands say how to install it.
"""

from __future__ import annotations

import contextlib
import datetime
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from brook import layout
from brook.cli.errors import friendly, spark_error_message
from brook.errors import BadRequest, NotFound


def storage_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--data (read directly: a broker may be running) and the S3 options."""
    fn = click.option(
        "--region", default=None, envvar="BROOK_REGION", show_envvar=True, help="For s3://."
    )(fn)
    fn = click.option(
        "--endpoint-url",
        default=None,
        envvar="BROOK_ENDPOINT_URL",
        show_envvar=True,
        help="For s3://.",
    )(fn)
    return click.option(
        "--data",
        default="./brook-data",
        show_default=True,
        envvar="BROOK_DATA",
        show_envvar=True,
        help="The broker's directory or s3://bucket/prefix, read directly (a broker may be "
        "running).",
    )(fn)


def master_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--master", default="local[*]", show_default=True, help="Spark master.")(fn)


def _options(endpoint_url: str | None, region: str | None) -> dict[str, str]:
    given = (("endpoint_url", endpoint_url), ("region", region))
    return {name: value for name, value in given if value is not None}


@contextlib.contextmanager
def _session(app: str, master: str) -> Iterator[Any]:
    """A local SparkSession for one command; Spark's failures become one line."""
    try:
        from pyspark.errors import PySparkException

        from brook.spark.session import local_session
    except ImportError as exc:
        raise click.ClickException(
            f"Spark is not installed ({exc.name}): pip install 'brook-broker[spark]'"
        ) from None
    with _progress() as bar:  # Spark takes its time to start: say so
        bar.add_task("starting Spark (10 to 20 s)", total=None)
        session = local_session(app, master=master, **{"spark.ui.showConsoleProgress": "false"})
    try:
        yield session
    except PySparkException as exc:
        raise click.ClickException(spark_error_message(exc)) from None
    finally:
        session.stop()


def _edge(text: str) -> str | datetime.datetime:
    """--from / --to: offsets (earliest, latest, JSON), or a time (UTC unless it says)."""
    from brook.spark.options import parse_offsets

    if text in ("earliest", "latest") or text.lstrip().startswith("{"):
        parse_offsets(text)
        return text
    try:
        return datetime.datetime.fromisoformat(text)
    except ValueError:
        raise BadRequest(
            f'{text!r} is neither "earliest", "latest", offsets as JSON like {{"0": 12}}, '
            "nor a time like 2026-11-21T06:00"
        ) from None


def _check_export(
    data: str,
    topic: str,
    output: str,
    edges: tuple[str | datetime.datetime, str | datetime.datetime],
    mode: str,
    options: dict[str, str],
) -> None:
    """The mistakes people make most (an output that exists, a wrong --data, an unknown
    topic or partition), found from storage in a moment instead of after Spark's start-up.
    Raises BadRequest, TopicNotFound, StorageError."""
    from brook.log.view import TopicView
    from brook.spark.options import parse_offsets, resolve
    from brook.storage.location import open_reader

    if mode == "errorifexists" and "://" not in output and Path(output).exists():
        raise BadRequest(
            f"{output} already exists: choose another OUTPUT, or give --mode append|overwrite"
        )
    storage = open_reader(data, options)
    try:
        bounds = TopicView(storage, topic).bounds()
    finally:
        storage.close()
    for edge, what in zip(edges, ("startingOffsets", "endingOffsets"), strict=True):
        if isinstance(edge, str):
            resolve(parse_offsets(edge), bounds, "earliest", what)


def _check_queue(data: str, topic: str, group: str, options: dict[str, str]) -> None:
    """An unknown topic or group, or a wrong --data, found from storage in a moment
    instead of after Spark's start-up. Raises NotFound, TopicNotFound, BadRequest,
    StorageError."""
    from brook.log.view import TopicView
    from brook.storage.location import open_reader

    storage = open_reader(data, options)
    try:
        TopicView(storage, topic)
        if storage.read_all(layout.queue_settings(topic, group)) is None:
            raise NotFound(f"topic {topic} has no queue group {group!r}")
    finally:
        storage.close()


def _progress() -> Any:
    """A progress display on a terminal (Spark's start-up, then its tasks); nothing
    when standard error is not one."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn

    return Progress(
        SpinnerColumn(),
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        transient=True,
        disable=not sys.stderr.isatty(),
    )


@click.group()
def spark() -> None:
    """Spark jobs over topics (needs the spark extra: pip install 'brook-broker[spark]')."""


@spark.command("export")
@click.argument("topic")
@click.argument("output")
@storage_options
@click.option(
    "--from",
    "starting",
    default="earliest",
    show_default=True,
    help='Where to start: earliest, offsets as JSON like {"0": 120}, or a UTC time like '
    "2026-11-21 or 2026-11-21T06:00.",
)
@click.option(
    "--to",
    "ending",
    default="latest",
    show_default=True,
    help='Where to stop (exclusive): latest, offsets as JSON like {"0": 500}, or a UTC time.',
)
@click.option(
    "--mode",
    type=click.Choice(["errorifexists", "append", "overwrite"]),
    default="errorifexists",
    show_default=True,
    help="What to do when OUTPUT exists.",
)
@master_option
@friendly
def spark_export(
    topic: str,
    output: str,
    data: str,
    endpoint_url: str | None,
    region: str | None,
    starting: str,
    ending: str,
    mode: str,
    master: str,
) -> None:
    """Export a range of TOPIC to Parquet under OUTPUT, one folder per day (UTC)."""
    first, stop = _edge(starting), _edge(ending)  # bad input fails here, before Spark starts
    _check_export(data, topic, output, (first, stop), mode, _options(endpoint_url, region))
    from brook.spark import jobs

    with _session("brook-export", master) as session, _progress() as bar:
        task = bar.add_task(f"exporting {topic}: Spark tasks done", total=None)
        result = jobs.export(
            session,
            data,
            topic,
            output,
            first,
            stop,
            mode,
            _options(endpoint_url, region),
            progress=lambda done, total: bar.update(task, completed=done, total=total),
        )
    days = f"{len(result.dates)} day{'' if len(result.dates) == 1 else 's'}"
    click.echo(
        f"exported {result.rows:,} record{'' if result.rows == 1 else 's'} of {topic} to "
        f"{output} ({days}: {', '.join(result.dates) or 'none'})"
    )


@spark.command("queue")
@click.argument("topic")
@click.argument("group")
@storage_options
@click.option(
    "--where",
    default="state = 'dead'",
    show_default=True,
    help="Which records: a SQL condition over the columns (state, attempts, error, "
    "changed_at, key, value, ...); see docs/SPARK.md.",
)
@click.option(
    "--show", type=click.IntRange(0), default=20, show_default=True, help="Most records listed."
)
@click.option(
    "--redrive",
    is_flag=True,
    help="Put the dead records among those chosen back to work (through --url, or "
    "embedded on --data when no broker runs there).",
)
@click.option(
    "--url",
    default=None,
    envvar="BROOK_URL",
    show_envvar=True,
    help="A running brook serve, to redrive.",
)
@click.option(
    "--api-key", default=None, envvar="BROOK_API_KEY", show_envvar=True, help="API key for --url."
)
@master_option
@friendly
def spark_queue(
    topic: str,
    group: str,
    data: str,
    endpoint_url: str | None,
    region: str | None,
    where: str,
    show: int,
    redrive: bool,
    url: str | None,
    api_key: str | None,
    master: str,
) -> None:
    """Look into queue GROUP of TOPIC with SQL: records by state, the chosen ones
    listed with why they stand where they do, and optionally redriven."""
    from brook.spark import jobs

    _check_queue(data, topic, group, _options(endpoint_url, region))
    with _session("brook-queue", master) as session:
        from pyspark.sql import functions as F

        table = jobs.queue_table(session, data, topic, group, _options(endpoint_url, region))
        table = table.cache()
        counts = {r["state"]: r["count"] for r in table.groupBy("state").count().collect()}
        click.echo(
            "  ".join(
                f"{state}={counts.get(state, 0)}"
                for state in ("ready", "leased", "retrying", "acked", "dead")
            )
        )
        chosen = table.where(where)
        found = chosen.count()
        click.echo(f"{found} record(s) where {where}")
        utc = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"  # the session's time zone is UTC (local_session)
        shown = (
            chosen.orderBy("partition", "offset")
            .limit(show)
            .select(
                "partition",
                "offset",
                "state",
                "attempts",
                "error",
                F.date_format("changed_at", utc).alias("changed"),
                F.date_format("due_at", utc).alias("due"),
                F.col("value").cast("string").alias("value"),
            )
        )
        for row in shown.collect():
            due = f"\tdue={row['due']}" if row["due"] else ""
            click.echo(
                f"{row['partition']}/{row['offset']}\t{row['state']}\t"
                f"attempts={row['attempts']}\tchanged={row['changed'] or '-'}{due}\t"
                f"error={row['error']!r}\t{(row['value'] or '')[:80]}"
            )
        if redrive:
            if url:
                count = jobs.redrive(chosen, topic, group, url=url, api_key=api_key)
            else:
                count = jobs.redrive(chosen, topic, group, path=data)
            click.echo(f"redriven: {count:,} record{'' if count == 1 else 's'}")
