"""The `brook` command line: one module per command group.

Every option can also come from a BROOK_* environment variable (for example
BROOK_DATA=/var/lib/brook) and from brook.toml; `brook serve`'s options are declared
once, in brook.settings.
"""

from __future__ import annotations

from typing import Any

import click

import brook
from brook import config
from brook.cli.bench import bench
from brook.cli.doctor import DoctorsNote, doctor
from brook.cli.endpoints import endpoints
from brook.cli.event_types import event_types
from brook.cli.keys import keys
from brook.cli.lake import lake
from brook.cli.portal import portal
from brook.cli.queues import queue
from brook.cli.records import consume, produce
from brook.cli.schedules import schedules
from brook.cli.serve import serve
from brook.cli.spark import spark
from brook.cli.timers import timers
from brook.cli.topics import topics
from brook.cli.worker import worker
from brook.errors import BadRequest, BrookError

__all__ = ["main"]


def _option_names(command: click.Command) -> set[str]:
    """Every option name of `command` and its subcommands: what brook.toml may set."""
    names = {p.name for p in command.params if isinstance(p, click.Option) and p.name}
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            names |= _option_names(sub)
    return names - {"config_path"}


def _options_named(command: click.Command, name: str) -> list[click.Option]:
    found = [p for p in command.params if isinstance(p, click.Option) and p.name == name]
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            found += _options_named(sub, name)
    return found


def _check_values(loaded: config.Config, path: str) -> None:
    """BadRequest naming the file's setting whose value its option refuses: left to
    click, the error would blame the option's environment variable instead."""
    for name, value in sorted(loaded.options.items()):
        for option in _options_named(main, name):
            try:
                if option.multiple:
                    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                        raise click.BadParameter('give a list of strings: ["a", "b-*"]')
                    continue
                if isinstance(option.type, click.types.IntParamType) and isinstance(value, float):
                    raise click.BadParameter(f"{value!r} is not a whole number.")
                option.type.convert(value, option, None)
            except click.BadParameter as exc:
                raise BadRequest(f"{path}: {name} = {value!r}: {exc.message}") from None


def _loaded(config_path: str | None) -> config.Config:
    """The config file (or ./brook.toml when present), checked: BrookError saying what is wrong."""
    loaded = config.load(config_path)
    config.check_names(loaded, _option_names(main), config_path or config.DEFAULT_FILE)
    _check_values(loaded, config_path or config.DEFAULT_FILE)
    return loaded


def _config_here(ctx: click.Context, param: click.Parameter, path: str | None) -> None:
    """`brook serve --config FILE` (SPEC §5) as `brook --config FILE serve`: read first
    (the option is eager), so the file's options are the command's defaults."""
    if path is None:
        return
    try:
        loaded = _loaded(path)
    except BrookError as exc:
        raise click.ClickException(exc.message) from None
    ctx.obj = loaded
    ctx.default_map = _defaults_for(ctx.command, loaded.options)
    ctx.find_root().params["config_path"] = path  # (a worker's children are given it)


def _defaults_for(command: click.Command, options: dict[str, Any]) -> dict[str, Any]:
    """click's default_map for `command` and its subcommands: the config file's options."""
    if isinstance(command, click.Group):
        return {name: _defaults_for(sub, options) for name, sub in command.commands.items()}
    return dict(options)


@click.group()
@click.version_option(brook.__version__, prog_name="brook")
@click.option(
    "--config",
    "config_path",
    default=None,
    envvar="BROOK_CONFIG",
    show_envvar=True,
    help=f"Config file (default: ./{config.DEFAULT_FILE} when present).",
)
@click.pass_context
def main(ctx: click.Context, config_path: str | None) -> None:
    """Brook: a durable event broker, job queue and timer service."""
    try:
        loaded = _loaded(config_path)
    except BrookError as exc:
        if ctx.invoked_subcommand != "doctor":
            raise click.ClickException(exc.message) from None
        ctx.obj = DoctorsNote(exc.message)  # the doctor reports it, beside its other checks
        return
    ctx.obj = loaded
    ctx.default_map = _defaults_for(main, loaded.options)


for command in (serve, worker):
    command.params.insert(
        0,
        click.Option(
            ["--config", "config_path"],
            default=None,
            is_eager=True,
            expose_value=False,
            callback=_config_here,
            help=f"Config file (default: ./{config.DEFAULT_FILE} when present); the same as "
            "`brook --config FILE ...`.",
        ),
    )

for command in (
    serve,
    keys,
    topics,
    timers,
    schedules,
    queue,
    endpoints,
    event_types,
    lake,
    portal,
    produce,
    consume,
    bench,
    doctor,
    worker,
):
    main.add_command(command)
main.add_command(spark)
