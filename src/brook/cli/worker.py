"""`brook worker MODULE:APP`: run an app's tasks (brook.tasks.worker).

With `--processes P` it runs P worker processes (the same command with
`--processes 1`) under a `brook.processes.ProcessSupervisor`: a child that dies is
started again (with a pause that grows while children die young) and logged; SIGTERM
and SIGINT are passed on to them (they drain) and it exits once they all have, with
the worst of their exit statuses; the children die with it (even by kill -9). A child
that fails in a way starting again cannot mend (bad settings, the broker unreachable
past --connect-timeout) exits with EXIT_NO_RESTART, and the supervisor gives up.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING

import click

from brook import limits, logs
from brook.errors import BrookError
from brook.processes import EXIT_NO_RESTART, ProcessSupervisor, die_with_parent

if TYPE_CHECKING:
    from brook.tasks import App


def load_app(spec: str) -> App:
    """The App named by `module:attribute` (the module imported from the working
    directory as Python would); click errors saying what is wrong."""
    from brook.tasks import App  # here: the other commands need not load the task runtime

    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise click.BadParameter(f"{spec!r} is not MODULE:APP (for example myapp.tasks:app)")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise click.BadParameter(
                f"no module {module_name!r} here ({os.getcwd()}): run from its directory"
            ) from None
        raise
    app = getattr(module, attribute, None)
    if not isinstance(app, App):
        found = "nothing" if app is None else type(app).__name__
        raise click.BadParameter(f"{spec}: {attribute} is {found}, not a brook.App")
    return app


@click.command()
@click.argument("app_spec", metavar="MODULE:APP")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 10_000),
    default=8,
    show_default=True,
    help="Jobs run at once per process (threads for sync tasks, one event loop for async).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Worker processes (use more than one to use more cores).",
)
@click.option("--tasks", default=None, help="Only these tasks, comma-separated (default: all).")
@click.option(
    "--connect-timeout",
    type=click.FloatRange(min=0),
    default=limits.worker_connect_timeout_ms_default / 1000,
    show_default=True,
    metavar="SECONDS",
    help="At start, how long to keep trying to reach the broker before exiting 1 (0: for ever).",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(1, 65535),
    default=None,
    help="Serve this worker's Prometheus series (per task: run times, outcomes, in flight; "
    "slots busy) at http://HOST:PORT/metrics; with --processes N, process i uses PORT+i.",
)
@click.option(
    "--metrics-host",
    default="127.0.0.1",
    show_default=True,
    help="The address --metrics-port listens on (0.0.0.0: every interface).",
)
@click.option(
    "--api-key",
    envvar="BROOK_API_KEY",
    show_envvar=True,
    default=None,
    help="The key for a remote broker, when the App's code gives none (passed to the "
    "--processes children by their environment, never on their command line).",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="info logs one line per job.",
)
def worker(
    app_spec: str,
    concurrency: int,
    processes: int,
    tasks: str | None,
    connect_timeout: float,
    metrics_port: int | None,
    metrics_host: str,
    api_key: str | None,
    log_level: str,
) -> None:
    """Run the tasks of the brook.App at MODULE:APP until SIGTERM (which drains:
    held jobs finish, then it exits 0). A second Ctrl-C stops at once."""
    supervised = die_with_parent()  # a child of `--processes`: it ends with its parent
    if api_key:
        os.environ["BROOK_API_KEY"] = api_key  # the App's, and the children's
    logs.setup(log_level)
    if processes > 1:
        if metrics_port is not None and metrics_port + processes - 1 > 65535:
            raise click.BadParameter(
                f"ports {metrics_port} to {metrics_port + processes - 1} do not all exist",
                param_hint="--metrics-port",
            )
        one = ["worker", app_spec, "--concurrency", str(concurrency)]
        one += ["--connect-timeout", f"{connect_timeout:g}", "--log-level", log_level]
        one += ["--metrics-host", metrics_host]
        if tasks:
            one += ["--tasks", tasks]
        config_path = click.get_current_context().find_root().params.get("config_path")
        command = ["--config", config_path, *one] if config_path else one
        sys.exit(_supervise(processes, command, metrics_port))
    try:
        sys.exit(
            _run_one(
                app_spec, concurrency, tasks, connect_timeout, log_level, metrics_port, metrics_host
            )
        )
    except click.ClickException as exc:
        if not supervised:
            raise
        raise _CannotRun(exc.format_message()) from None


class _CannotRun(click.ClickException):
    """A supervised worker's one-line error: its supervisor gives up rather than start
    it again (the same error would follow)."""

    exit_code = EXIT_NO_RESTART


def _run_one(
    app_spec: str,
    concurrency: int,
    tasks: str | None,
    connect_timeout: float,
    log_level: str,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
) -> int:
    """Run one worker process until it drains; its exit status. Click errors for what
    the user must change, or for a broker that stayed out of reach."""
    from brook.tasks.context import JobContext
    from brook.tasks.worker import Worker

    app = load_app(app_spec)
    # After the app's import, which may configure logging itself: then its handlers
    # stay, and only Brook's own lines gain the job they were logged in.
    logs.setup(log_level, filters=[JobContext(missing=None)], unconfigured_root=True)
    chosen = [name.strip() for name in tasks.split(",") if name.strip()] if tasks else None
    try:
        runner = Worker(
            app,
            concurrency=concurrency,
            tasks=chosen,
            connect_timeout_s=connect_timeout,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
        )
        return runner.run()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:  # the metrics port taken, or the host not ours
        raise click.ClickException(
            f"cannot serve metrics on {metrics_host}:{metrics_port}: {exc.strerror or exc}"
        ) from None
    except BrookError as exc:
        raise click.ClickException(f"{exc.code}: {exc.message}") from None
    finally:
        app.close()


def _supervise(processes: int, arguments: list[str], metrics_port: int | None) -> int:
    """Run `brook ARGUMENTS` (one worker process, its options given in full) `processes`
    times under a ProcessSupervisor (child i with --metrics-port PORT+i); the exit
    status (one line logged if it gave up)."""
    command = [sys.executable, "-m", "brook.cli", *arguments]
    if metrics_port is None:
        return ProcessSupervisor(command, processes, name="worker").run()
    commands = [[*command, "--metrics-port", str(metrics_port + i)] for i in range(processes)]
    return ProcessSupervisor(commands, processes, name="worker").run()
