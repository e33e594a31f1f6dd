"""`brook event-types`: the catalog of the event types records carry (SPEC §11)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from brook.cli.common import broker_options, connect
from brook.cli.errors import friendly

if TYPE_CHECKING:
    from brook.models import EventTypeInfo


@click.group("event-types")
def event_types() -> None:
    """Document the event types records carry (brook.event-type): put, list, show, delete."""


def _show(info: EventTypeInfo) -> None:
    click.echo(f"name: {info.name}\ndescription: {info.description}")
    if info.schema is not None:
        click.echo(f"schema: {json.dumps(info.schema, sort_keys=True)}")


@event_types.command("put")
@click.argument("name")
@click.option("--description", default=None, help="What an event of this type means.")
@click.option(
    "--schema",
    "schema_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A file holding a JSON Schema of the events' bodies (documentation, not enforced).",
)
@broker_options
@friendly
def event_types_put(
    name: str,
    description: str | None,
    schema_file: Path | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Add event type NAME to the catalog, or change what is given of it."""
    schema = None
    if schema_file is not None:
        try:
            schema = json.loads(schema_file.read_text())
        except (OSError, ValueError) as exc:
            raise click.ClickException(f"{schema_file}: not a JSON file ({exc})") from None
    with connect(data, url, api_key) as b:
        _show(b.put_event_type(name, description, schema))


@event_types.command("list")
@broker_options
@friendly
def event_types_list(data: str, url: str | None, api_key: str | None) -> None:
    """One line per event type: its name and description."""
    with connect(data, url, api_key, read_only=True) as b:
        for info in b.event_types():
            click.echo(f"{info.name}\t{info.description}")


@event_types.command("show")
@click.argument("name")
@broker_options
@friendly
def event_types_show(name: str, data: str, url: str | None, api_key: str | None) -> None:
    """One event type: its description and schema."""
    with connect(data, url, api_key, read_only=True) as b:
        _show(b.event_type(name))


@event_types.command("delete")
@click.argument("name")
@broker_options
@friendly
def event_types_delete(name: str, data: str, url: str | None, api_key: str | None) -> None:
    """Remove event type NAME from the catalog (records carrying it are not touched)."""
    with connect(data, url, api_key) as b:
        b.delete_event_type(name)
        click.echo(f"deleted {name}")
