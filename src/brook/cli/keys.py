"""`brook keys`: API keys for the server's brook.toml."""

from __future__ import annotations

import secrets

import click

from brook import config, names


@click.group()
def keys() -> None:
    """Create API keys."""


@keys.command("create")
@click.option("--name", required=True, help="A name for the key, shown in logs and errors.")
@click.option("--scopes", required=True, help="Comma-separated: produce, consume, admin.")
@click.option(
    "--topics",
    "topic_patterns",
    default=None,
    help="Comma-separated glob patterns (default: every topic, '*'; a --tenant key needs them).",
)
@click.option(
    "--tenant",
    default=None,
    help="A key for one customer: it reaches only endpoints of this tenant.",
)
def keys_create(name: str, scopes: str, topic_patterns: str | None, tenant: str | None) -> None:
    """Print a new random key once, and the brook.toml stanza holding only its hash."""
    chosen = [s.strip() for s in scopes.split(",") if s.strip()]
    unknown = set(chosen) - set(config.SCOPES)
    if not chosen or unknown:
        raise click.ClickException(f"scopes must be some of {', '.join(config.SCOPES)}")
    if tenant is not None and not names.USER_NAME.fullmatch(tenant):
        raise click.ClickException(
            f"invalid tenant {tenant!r}: use A-Z a-z 0-9 . _ - (not starting with '__')"
        )
    if tenant is not None and topic_patterns is None:
        # Every topic would let the tenant's endpoints take every tenant's records.
        raise click.ClickException(
            f"a key for tenant {tenant!r} needs --topics: the tenant's own topics "
            "(like 'events.c0042.*')"
        )
    patterns = [t.strip() for t in (topic_patterns or "*").split(",") if t.strip()]
    if not patterns:
        raise click.ClickException("--topics names no pattern: give one or more, comma-separated")
    if tenant is not None and any(names.every_topic(p) for p in patterns):
        click.echo(
            f"warning: this key for tenant {tenant!r} covers every topic: its endpoints may "
            "take every tenant's records",
            err=True,
        )
    key = "brook_" + secrets.token_urlsafe(32)
    click.echo(f"key (shown once, store it now): {key}\n", err=True)
    click.echo(config.key_stanza(name, key, chosen, patterns, tenant))
