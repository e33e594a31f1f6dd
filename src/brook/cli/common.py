"""What the commands share: where the broker is (--data, or --url of a running server),
and how values are shown to people."""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import time
from collections.abc import Callable
from typing import Any

import click

import brook
from brook import settings
from brook.errors import Locked
from brook.storage import location as locations


def broker_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--data for an embedded broker, or --url (and --api-key) for a running `brook serve`."""
    fn = click.option(
        "--api-key",
        default=None,
        envvar="BROOK_API_KEY",
        show_envvar=True,
        help="API key for --url.",
    )(fn)
    fn = click.option(
        "--url",
        default=None,
        envvar="BROOK_URL",
        show_envvar=True,
        help="Talk to a running brook serve at this URL instead of opening --data.",
    )(fn)
    return data_option(fn)


def connect(
    data: str, url: str | None, api_key: str | None, read_only: bool = False, **options: Any
) -> Any:
    """The broker to talk to: remote when --url is given, else the directory (embedded,
    with `options`); `read_only` for a command that only looks, so it works beside a
    running broker."""
    if url:
        return brook.connect(url, api_key=api_key)
    return open_broker(data, read_only=read_only, **options)


def open_broker(data: str, **options: Any) -> brook.Broker:
    """The embedded broker on `data`; an s3:// URL takes BROOK_ENDPOINT_URL, BROOK_REGION
    and BROOK_CACHE_DIR from the environment unless given."""
    if locations.parse(data).kind == "s3":
        for name in ("endpoint_url", "region", "cache_dir"):
            value = os.environ.get(f"BROOK_{name.upper()}")
            if value and options.get(name) is None:
                options[name] = value
    try:
        return brook.open(data, **options)
    except Locked as exc:
        raise click.ClickException(
            f"{exc.message}; or give --url to go through that broker's API"
        ) from None


def backoff_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--backoff-min-ms, --backoff-max-ms, --backoff-factor: the retry backoff of a
    queue group or an endpoint, any of its parts (see `backoff_given`)."""
    fn = click.option(
        "--backoff-factor",
        type=click.FloatRange(1, 100),
        default=None,
        help="Each retry waits this many times longer than the one before.",
    )(fn)
    fn = click.option(
        "--backoff-max-ms", type=click.IntRange(0), default=None, help="Longest wait between tries."
    )(fn)
    return click.option(
        "--backoff-min-ms",
        type=click.IntRange(0),
        default=None,
        help="Wait before the first retry.",
    )(fn)


def backoff_given(
    stored: dict[str, Any] | None,
    min_ms: int | None,
    max_ms: int | None,
    factor: float | None,
) -> dict[str, Any] | None:
    """The backoff to set from the parts given on the command line over the `stored`
    one (parts not given keep their values); None when no part was given."""
    given = {
        name: value
        for name, value in (("min_ms", min_ms), ("max_ms", max_ms), ("factor", factor))
        if value is not None
    }
    if not given:
        return None
    # An endpoint's stored backoff comes back with every part a float: milliseconds go
    # out as the integers they are.
    kept = {
        name: int(value) if name.endswith("_ms") and float(value).is_integer() else value
        for name, value in (stored or {}).items()
    }
    return {**kept, **given}


def time_ms(text: str, option: str, ago_ok: bool = False) -> int:
    """A time given on the command line, as ms since the epoch: ms since the epoch, an
    ISO 8601 time (UTC unless it says otherwise), or with `ago_ok` a span back from
    now (`90s`, `15m`, `2h`, `3d`)."""
    if text.isdigit():
        return int(text)
    span = re.fullmatch(r"(\d+)([smhd])", text.strip())
    if ago_ok and span:
        unit = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[span[2]]
        return int(time.time() * 1000) - int(span[1]) * unit
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        spans = ", or a span back from now (90s, 15m, 2h, 3d)" if ago_ok else ""
        raise click.BadParameter(
            f"{text!r} is not a time: give ms since the epoch or an ISO 8601 time{spans}",
            param_hint=option,
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return int(when.timestamp() * 1000)


def plural(count: int, noun: str) -> str:
    """ "1 record", "2 records": counts for people."""
    return f"{count:,} {noun}" if count == 1 else f"{count:,} {noun}s"


shown = settings.shown
"""A setting's value for people (brook.settings.shown, shared with the dashboard)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def option_of(field: settings.Field) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click option of one setting: its flag, variable, type and bounds."""
    kind: Any
    if field.kind == "bool":
        return click.option(
            field.flag, field.name, is_flag=True, envvar=field.envvar, show_envvar=True,
            help=field.help,
        )  # fmt: skip
    if field.kind == "list":
        return click.option(
            field.flag, field.name, multiple=True, default=field.default, envvar=field.envvar,
            show_envvar=True, help=field.help,
        )  # fmt: skip
    if field.kind == "choice":
        kind = click.Choice(field.choices, case_sensitive=False)
    elif field.kind == "int":
        kind = click.IntRange(
            None if field.low is None else int(field.low),
            None if field.high is None else int(field.high),
        )
    elif field.kind == "float":
        kind = click.FloatRange(field.low, field.high)
    else:
        kind = str
    return click.option(
        field.flag,
        field.name,
        type=kind,
        default=field.default,
        show_default=True,
        envvar=field.envvar,
        show_envvar=True,
        help=field.help,
    )


def setting_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Every setting of ServeSettings as an option, in declaration order."""
    for field in reversed(settings.FIELDS):
        fn = option_of(field)(fn)
    return fn


def setting_option(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The option of one of `brook serve`'s settings, for another command that takes it."""
    (field,) = [f for f in settings.FIELDS if f.name == name]
    return option_of(field)


def read_all(b: Any, topic: str, count: int | None) -> list[brook.Record]:
    t = b.topic(topic)
    out: list[brook.Record] = []
    for partition, start in sorted(t.start_offsets().items()):
        offset = start
        while count is None or len(out) < count:
            got = t.read(partition, offset, 1000 if count is None else min(1000, count - len(out)))
            if not got:
                break
            out.extend(got)
            offset = got[-1].offset + 1
    return out


data_option = setting_option("data")
"""--data, as `brook serve` declares it (settings.ServeSettings)."""


def storage_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--storage (instead of --data), --endpoint-url and --region, as `brook serve`
    declares them, beside `broker_options`; see `connect_given`."""
    for name in ("region", "endpoint_url", "storage"):
        fn = setting_option(name)(fn)
    return fn


def connect_given(given: dict[str, Any], **options: Any) -> Any:
    """`connect` with what a command of `broker_options` and `storage_options` was
    given: --storage (with its S3 options) over --data."""
    location = given["data"]
    if given["storage"] is not None:
        location = given["storage"]
        s3 = {"endpoint_url": given["endpoint_url"], "region": given["region"]}
        options |= {name: value for name, value in s3.items() if value is not None}
    return connect(location, given["url"], given["api_key"], **options)
