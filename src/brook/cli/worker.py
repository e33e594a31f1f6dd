"""`brook worker MODULE:APP`: run an app's tasks (brook.tasks.worker).

With `--processes P` it starts P worker processes (the same command with
`--processes 1`), passes SIGTERM and SIGINT on to them, and exits once they all
have, with the worst of their exit statuses.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
from typing import Any

import click

from brook import logs
from brook.errors import BrookError
from brook.tasks import App


def load_app(spec: str) -> App:
    """The App named by `module:attribute` (the module imported from the working
    directory as Python would); click errors saying what is wrong."""
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
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="info logs one line per job.",
)
def worker(
    app_spec: str, concurrency: int, processes: int, tasks: str | None, log_level: str
) -> None:
    """Run the tasks of the brook.App at MODULE:APP until SIGTERM (which drains:
    held jobs finish, then it exits 0). A second Ctrl-C stops at once."""
    logs.setup(log_level)
    if processes > 1:
        one = ["worker", app_spec, "--concurrency", str(concurrency), "--log-level", log_level]
        if tasks:
            one += ["--tasks", tasks]
        config_path = click.get_current_context().find_root().params.get("config_path")
        sys.exit(_supervise(processes, ["--config", config_path, *one] if config_path else one))
    from brook.tasks.worker import Worker

    app = load_app(app_spec)
    chosen = [name.strip() for name in tasks.split(",") if name.strip()] if tasks else None
    try:
        runner = Worker(app, concurrency=concurrency, tasks=chosen)
        code = runner.run()
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    except BrookError as exc:
        raise click.ClickException(f"{exc.code}: {exc.message}") from None
    finally:
        app.close()
    sys.exit(code)


def _supervise(processes: int, arguments: list[str]) -> int:
    """Run `brook ARGUMENTS` (one worker process, its options given in full) `processes`
    times; forward SIGTERM and SIGINT; the worst exit status of them all."""
    command = [sys.executable, "-m", "brook.cli", *arguments]
    # Their own sessions: a Ctrl-C reaches them once, from here, not also from the terminal.
    children = [subprocess.Popen(command, start_new_session=True) for _ in range(processes)]

    def forward(signum: int, _: Any) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    return max(abs(child.wait()) for child in children)
