"""`brook endpoints`: deliver topics' records to HTTP endpoints (SPEC §7)."""

from __future__ import annotations

import datetime
from typing import Any

import click

from brook import limits
from brook.cli.common import (
    backoff_given,
    backoff_options,
    broker_options,
    connect,
    plural,
    shown,
    time_ms,
)
from brook.cli.errors import friendly
from brook.errors import EndpointNotFound


@click.group()
def endpoints() -> None:
    """Deliver topics' records to HTTP endpoints (webhooks)."""


def _show_endpoint(info: Any) -> None:
    state = "enabled" if info.enabled else f"disabled ({info.disabled_reason})"
    rate = "none" if info.rate_limit_per_s is None else f"{info.rate_limit_per_s}/s"
    click.echo(
        f"name: {info.name}\nurl: {info.url}\ntopics: {', '.join(info.topics)}\n"
        f"state: {state}\ntimeout_ms: {info.timeout_ms}\nmax_in_flight: {info.max_in_flight}\n"
        f"rate_limit_per_s: {rate}\nmax_attempts: {info.max_attempts}\n"
        f"backoff: {shown(info.backoff)}\nexpire_after_ms: {shown(info.expire_after_ms)}\n"
        f"disable_after_ms: {shown(info.disable_after_ms)}\n"
        f"ordering: {info.ordering}\nstart: {info.start}"
    )
    if info.tenant is not None:
        click.echo(f"tenant: {info.tenant}")
    if info.event_types is not None:
        click.echo(f"event types: {', '.join(info.event_types)}")
    if info.public_key is not None:
        click.echo(f"public key (v1a: give it to receivers): {info.public_key}")
    for name, value in info.headers.items():
        click.echo(f"header {name}: {value}")


def _headers(lines: tuple[str, ...]) -> dict[str, str] | None:
    if not lines:
        return None
    out = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name.strip():
            raise click.BadParameter(f"{line!r} is not 'Name: value'", param_hint="--header")
        out[name.strip()] = value.strip()
    return out


@endpoints.command("create")
@click.argument("name")
@click.argument("target", metavar="URL", required=False)
@click.option(
    "--topic", "topics", multiple=True, help="A topic or glob pattern (orders.*); repeat for more."
)
@click.option("--secret", default=None, help="Signing secret (whsec_...); made when not given.")
@click.option("--header", "header_lines", multiple=True, help="An extra header, 'Name: value'.")
@click.option(
    "--timeout-ms",
    type=click.IntRange(limits.endpoint_timeout_ms_min, limits.endpoint_timeout_ms_max),
    default=None,
)
@click.option(
    "--max-in-flight", type=click.IntRange(1, limits.endpoint_in_flight_max), default=None
)
@click.option(
    "--rate-limit-per-s", type=click.IntRange(1, limits.endpoint_rate_per_s_max), default=None
)
@click.option("--max-attempts", type=click.IntRange(1, limits.queue_attempts_max), default=None)
@backoff_options
@click.option(
    "--expire-after-ms",
    type=click.IntRange(0),
    default=None,
    help="Records not delivered within this long are dead (0: never; new endpoints: 3 days).",
)
@click.option(
    "--disable-after-ms",
    type=click.IntRange(0),
    default=None,
    help="Disable the endpoint once no attempt succeeded for this long (0: never; 5 days).",
)
@click.option("--ordering", type=click.Choice(["none", "key"]), default=None)
@click.option(
    "--start",
    type=click.Choice(["latest", "earliest"]),
    default=None,
    help="A new endpoint gets records appended from now on (latest, the default) or all.",
)
@click.option("--tenant", default=None, help="The customer the endpoint belongs to.")
@click.option(
    "--signature",
    type=click.Choice(["v1", "v1a"]),
    default=None,
    help="Secrets Brook makes: v1 (HMAC, whsec_, the default) or v1a (Ed25519, whsk_).",
)
@click.option(
    "--event-type",
    "kinds",
    multiple=True,
    help="Only records of this event type (brook.event-type; a glob: invoice.*); repeat for more.",
)
@broker_options
@friendly
def endpoints_create(
    name: str,
    target: str | None,
    topics: tuple[str, ...],
    secret: str | None,
    header_lines: tuple[str, ...],
    timeout_ms: int | None,
    max_in_flight: int | None,
    rate_limit_per_s: int | None,
    max_attempts: int | None,
    backoff_min_ms: int | None,
    backoff_max_ms: int | None,
    backoff_factor: float | None,
    expire_after_ms: int | None,
    disable_after_ms: int | None,
    ordering: str | None,
    start: str | None,
    tenant: str | None,
    kinds: tuple[str, ...],
    signature: str | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Create endpoint NAME posting to URL the records of every --topic, or change the
    settings given. Prints the endpoint, and its secret once."""
    with connect(data, url, api_key) as b:
        stored = None
        if any(part is not None for part in (backoff_min_ms, backoff_max_ms, backoff_factor)):
            try:
                stored = b.endpoint(name).info().backoff  # parts not given keep theirs
            except EndpointNotFound:
                stored = None  # a new endpoint: the defaults fill the rest
        info = b.create_endpoint(
            name,
            target,
            list(topics) or None,
            secret=secret,
            headers=_headers(header_lines),
            timeout_ms=timeout_ms,
            max_in_flight=max_in_flight,
            rate_limit_per_s=rate_limit_per_s,
            max_attempts=max_attempts,
            backoff=backoff_given(stored, backoff_min_ms, backoff_max_ms, backoff_factor),
            expire_after_ms=expire_after_ms,
            disable_after_ms=disable_after_ms,
            ordering=ordering,
            start=start,
            tenant=tenant,
            event_types=list(kinds) or None,
            signature=signature,
        )
        _show_endpoint(info)
        for warning in info.warnings:
            click.echo(f"warning: {warning}", err=True)
        if info.secret is not None:
            click.echo(f"secret (shown once, store it now): {info.secret}")


@endpoints.command("list")
@broker_options
@friendly
def endpoints_list(data: str, url: str | None, api_key: str | None) -> None:
    """One line per endpoint: name, state, url, topics."""
    with connect(data, url, api_key, read_only=True) as b:
        for info in b.endpoints():
            state = "enabled" if info.enabled else "disabled"
            click.echo(f"{info.name}\t{state}\t{info.url}\t{','.join(info.topics)}")


@endpoints.command("show")
@click.argument("name")
@broker_options
@friendly
def endpoints_show(name: str, data: str, url: str | None, api_key: str | None) -> None:
    """The endpoint's settings, and how delivery to it goes."""
    with connect(data, url, api_key, read_only=True) as b:
        handle = b.endpoint(name)
        _show_endpoint(handle.info())
        s = handle.stats()
        rate = "-" if s.success_rate is None else f"{s.success_rate:.1%}"
        p50 = "-" if s.latency_p50_ms is None else f"{s.latency_p50_ms:.1f} ms"
        p99 = "-" if s.latency_p99_ms is None else f"{s.latency_p99_ms:.1f} ms"
        click.echo(
            f"ready: {s.ready}\nleased: {s.leased}\nretrying: {s.retrying}\nacked: {s.acked}\n"
            f"dead: {s.dead}\nin flight: {s.in_flight}\nbreaker: {s.breaker}\n"
            f"success rate: {rate}\nlatency p50: {p50}\nlatency p99: {p99}"
        )
        if s.last_error:
            click.echo(f"last error: {s.last_error}")


@endpoints.command("attempts")
@click.argument("name")
@click.argument("topic")
@click.argument("partition", type=click.IntRange(0))
@click.argument("offset", type=click.IntRange(0))
@broker_options
@friendly
def endpoints_attempts(
    name: str,
    topic: str,
    partition: int,
    offset: int,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Every attempt to deliver one record: status or error, latency, the answer's start."""
    with connect(data, url, api_key, read_only=True) as b:
        found = b.endpoint(name).attempts(topic, partition, offset)
        if not found:
            click.echo("no attempts yet", err=True)
            return
        click.echo("attempt\tat\tstatus or error\tlatency\tstate\tanswer begins")
        for a in found:
            click.echo(_attempt_line(a))


def _attempt_line(a: Any) -> str:
    when = datetime.datetime.fromtimestamp(a.at_ms / 1000, datetime.UTC).isoformat()
    what = str(a.status) if a.status is not None else a.error
    excerpt = a.excerpt[:80].decode(errors="replace")
    return f"attempt {a.attempt}\t{when}\t{what}\t{a.latency_ms:.1f} ms\t{a.state}\t{excerpt}"


@endpoints.command("message")
@click.argument("webhook_id", metavar="WEBHOOK_ID")
@broker_options
@friendly
def endpoints_message(webhook_id: str, data: str, url: str | None, api_key: str | None) -> None:
    """Every endpoint's attempts to deliver one message, found by the webhook-id its
    requests carried (topic:partition:offset, or the record's brook.event-id)."""
    with connect(data, url, api_key, read_only=True) as b:
        found = b.message_attempts(webhook_id)
    if not found:
        click.echo(f"no endpoint has tried to deliver {webhook_id}", err=True)
        return
    click.echo("endpoint\tattempt\tat\tstatus or error\tlatency\tstate\tanswer begins")
    for each in found:
        for a in each.attempts:
            click.echo(f"{each.endpoint}\t{_attempt_line(a)}")


@endpoints.command("errors")
@click.argument("name")
@click.option("--topic", default=None, help="Only the dead records of this topic.")
@click.option("-n", "count", type=click.IntRange(1), default=100, show_default=True)
@broker_options
@friendly
def endpoints_errors(
    name: str, topic: str | None, count: int, data: str, url: str | None, api_key: str | None
) -> None:
    """Print what the endpoint's dead records died of, grouped, most first: how many, the
    group, and one whole reason (then `brook endpoints redrive` once it is mended)."""
    with connect(data, url, api_key, read_only=True) as b:
        found = b.endpoint(name).dead_errors(topic)
    if not found:
        click.echo("no dead records", err=True)
    for each in found[:count]:
        click.echo(f"{each.dead}\t{each.group}\t{each.example.partition(chr(10))[0]}")


@endpoints.command("redrive")
@click.argument("name")
@click.option("--topic", default=None, help="Only the dead records of this topic.")
@click.option("--limit", type=click.IntRange(1), default=None, help="Most records.")
@broker_options
@friendly
def endpoints_redrive(
    name: str, topic: str | None, limit: int | None, data: str, url: str | None, api_key: str | None
) -> None:
    """Put the endpoint's dead records back to work, their attempts counted afresh."""
    with connect(data, url, api_key) as b:
        count = b.endpoint(name).redrive(topic=topic, limit=limit)
        click.echo(f"redriven: {plural(count, 'record')}")


@endpoints.command("replay")
@click.argument("name")
@click.option(
    "--since",
    default=None,
    help="Records appended from this time: ms since the epoch, ISO 8601, or back from now (2h, 3d).",
)
@click.option("--topic", default=None, help="Only this topic's records (needed with --offset).")
@click.option("--offset", type=click.IntRange(0), default=None, help="From this offset of --topic.")
@click.option(
    "--partition", type=click.IntRange(0), default=None, help="With --offset: only this partition."
)
@broker_options
@friendly
def endpoints_replay(
    name: str,
    since: str | None,
    topic: str | None,
    offset: int | None,
    partition: int | None,
    data: str,
    url: str | None,
    api_key: str | None,
) -> None:
    """Send again records the endpoint was already sent, from a time or an offset on.

    Records not yet delivered are left as they are; dead ones go back with `redrive`.
    Receivers get the same webhook-id as before."""
    since_ms = None if since is None else time_ms(since, "--since", ago_ok=True)
    with connect(data, url, api_key) as b:
        count = b.endpoint(name).replay(
            topic=topic, since_ms=since_ms, partition=partition, offset=offset
        )
        click.echo(f"sent again: {plural(count, 'record')}")


@endpoints.command("resend")
@click.argument("name")
@click.argument("webhook_id", metavar="WEBHOOK_ID")
@broker_options
@friendly
def endpoints_resend(
    name: str, webhook_id: str, data: str, url: str | None, api_key: str | None
) -> None:
    """Send one message to endpoint NAME once more, by the webhook-id its requests
    carried (topic:partition:offset, or the record's brook.event-id), whether it was
    delivered, dead or still on its way. The receiver gets the same webhook-id."""
    with connect(data, url, api_key) as b:
        done = b.endpoint(name).resend(webhook_id)
    where = f"{done.topic}:{done.partition}:{done.offset}"
    said = {
        "resent": f"sent again: {where}",
        "redriven": f"it was dead; sent again, its attempts counted afresh: {where}",
        "pending": f"it is on its way already (not sent twice): {where}",
    }
    click.echo(said.get(done.state, f"{done.state}: {where}"))


def _endpoint_action(action: str, summary: str) -> None:
    @endpoints.command(action, help=summary)
    @click.argument("name")
    @broker_options
    @friendly
    def command(name: str, data: str, url: str | None, api_key: str | None) -> None:
        with connect(data, url, api_key) as b:
            handle = b.endpoint(name)
            if action == "enable":
                handle.enable()
                click.echo(f"enabled {name}")
            elif action == "disable":
                handle.disable()
                click.echo(f"disabled {name}: its records wait until it is enabled")
            elif action == "delete":
                b.delete_endpoint(name)
                click.echo(f"deleted {name}")
            elif action == "rotate-secret":
                secret = handle.rotate_secret()
                click.echo(
                    f"secret (shown once, store it now; the old one signs too for a day): {secret}"
                )
            else:
                result = handle.test()
                what = str(result.status) if result.status is not None else result.error
                click.echo(
                    f"{what}\t{result.latency_ms:.1f} ms\t{result.excerpt[:200].decode(errors='replace')}"
                )
                if result.status is None or not 200 <= result.status < 300:
                    raise SystemExit(1)


_endpoint_action("enable", "Deliver again (after a 410 or a disable).")
_endpoint_action("disable", "Stop delivering; records wait in the endpoint's queue groups.")
_endpoint_action("test", "Send a signed test request now and print how it went.")
_endpoint_action("rotate-secret", "Make a new secret; the old one signs too for a day.")
_endpoint_action("delete", "Delete the endpoint: records not yet delivered never will be.")
