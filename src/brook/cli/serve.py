"""`brook serve`: the broker behind its HTTP API, until SIGTERM or Ctrl-C.

Its options are made from brook.settings.ServeSettings, the one place a setting is
declared: flag, BROOK_* variable, brook.toml key, bounds, default and help.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from typing import Any

import click
import msgspec

import brook
from brook import config, logs, settings
from brook.cli.common import is_loopback, open_broker, setting_options
from brook.cli.errors import friendly
from brook.errors import BrookError


@click.command()
@setting_options
@click.pass_obj
@friendly
def serve(loaded: config.Config | None, **values: Any) -> None:
    """Serve the HTTP API for the broker on --data (or --storage) until SIGTERM or Ctrl-C.

    Every option can also be set in brook.toml (its name with underscores) or in the
    environment variable shown beside it.
    """
    # Imported here, not at the top: every `brook` command loads this module, and the
    # server is a third of a second to import.
    import uvloop

    from brook import allocator
    from brook.server import app
    from brook.server.http import HttpLimits

    try:
        chosen = settings.settings_from(values)
    except msgspec.ValidationError as exc:  # click checked the bounds; brook.toml types too
        raise click.ClickException(f"bad setting: {exc}") from None
    keys = loaded.keys if loaded is not None else []
    if not is_loopback(chosen.host) and not keys and not chosen.insecure:
        raise click.ClickException(
            f"refusing to serve on {chosen.host} without API keys: anyone who can reach it could "
            "read and write every topic. Add keys (brook keys create), serve on 127.0.0.1, or "
            "pass --insecure."
        )
    tls = _tls_context(chosen.tls_cert, chosen.tls_key)
    logs.setup(chosen.log_level)
    allocator.give_back_large_buffers()  # this process is the broker's own
    broker_options = chosen.of_role("broker")
    if chosen.storage is not None:
        where = chosen.storage
        s3 = chosen.of_role("s3")
        del s3["storage"]
        broker = open_broker(where, **broker_options, **s3, wait_for_lease=True)
    else:
        if chosen.take_over:
            raise click.ClickException(
                "--take-over applies to --storage s3://...: a directory is locked while its "
                "broker runs; stop that broker first"
            )
        where = os.path.abspath(chosen.data)
        local = chosen.of_role("local")
        del local["data"]
        broker = open_broker(chosen.data, **broker_options, **local)
    server = app.Server(
        broker,
        chosen.host,
        chosen.port,
        keys,
        tls,
        HttpLimits(**chosen.of_role("http")),
        access_log=chosen.access_log,
        where=where,
    )
    try:
        uvloop.run(app.serve(server, where))
    except app.CannotListen as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        with contextlib.suppress(BrookError):  # a fenced broker cannot finish its writes
            broker.close()
        brook.broker.log.info("stopped")
    if broker.fenced.is_set():
        raise click.ClickException(
            "fenced: another broker took the storage over, so this one stopped"
        )


def _tls_context(cert: str | None, key: str | None) -> ssl.SSLContext | None:
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise click.ClickException("HTTPS needs both --tls-cert and --tls-key")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise click.ClickException(f"cannot load the TLS certificate or key: {exc}") from None
    return context
