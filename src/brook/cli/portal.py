"""`brook portal TENANT`: a short-lived link showing one customer its own endpoints."""

from __future__ import annotations

import datetime

import click

from brook import limits
from brook.cli.common import broker_options, connect
from brook.cli.errors import friendly


@click.command("portal")
@click.argument("tenant")
@click.option(
    "--ttl-s",
    type=click.IntRange(limits.portal_ttl_s_min, limits.portal_ttl_s_max),
    default=limits.portal_ttl_s_default,
    show_default=True,
    help="How long the link works, in seconds.",
)
@broker_options
@friendly
def portal(tenant: str, ttl_s: int, data: str, url: str | None, api_key: str | None) -> None:
    """Print a link to the dashboard that shows tenant TENANT its endpoints (attempts,
    test, replay, resend, a new secret, disable, enable) and nothing else; give it to
    that customer. Anyone holding the link can act on those endpoints until it expires."""
    with connect(data, url, api_key) as b:
        made = b.portal_link(tenant, ttl_s)
    until = datetime.datetime.fromtimestamp(made.expires_ms / 1000, datetime.UTC)
    if made.url is not None:
        click.echo(made.url)
    elif url is not None:
        click.echo(url.rstrip("/") + made.path)
    else:
        click.echo(f"{made.path}  (open it on the `brook serve` of this data directory)")
    click.echo(f"valid until {until:%Y-%m-%d %H:%M:%SZ}", err=True)
