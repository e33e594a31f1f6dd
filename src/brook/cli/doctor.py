"""`brook doctor`: is this machine and this storage fit to run a broker?"""

from __future__ import annotations

import click

from brook import config
from brook.cli.common import setting_option


class DoctorsNote:
    """What `brook doctor` gets instead of the config when the config does not load."""

    def __init__(self, error: str) -> None:
        self.error = error


@click.command()
@setting_option("data")
@setting_option("storage")
@setting_option("endpoint_url")
@setting_option("region")
@setting_option("cache_dir")
@click.option("--url", default=None, help="Also ask a running broker's /v1/health.")
@click.pass_obj
def doctor(
    settings: config.Config | DoctorsNote | None,
    data: str,
    storage: str | None,
    endpoint_url: str | None,
    region: str | None,
    cache_dir: str,
    url: str | None,
) -> None:
    """Check this machine and storage for a broker: config and keys, storage reachable
    and writable, the lock or lease, clock skew against the object store, disk space.
    One line per check; exit status 1 when one fails."""
    from brook import doctor as doctors  # here: it loads the server's dashboard

    path = click.get_current_context().find_root().params.get("config_path")
    shown_path = path or config.DEFAULT_FILE
    if isinstance(settings, DoctorsNote):
        checks = list(doctors.config_checks(None, settings.error, shown_path))
    else:
        checks = list(doctors.config_checks(settings, None, shown_path))
    if storage is not None:
        checks += doctors.s3_checks(storage, endpoint_url, region, cache_dir)
    else:
        checks += doctors.local_checks(data)
    if url is not None:
        checks.append(doctors.health_check(url))
    width = max(len(check.name) for check in checks)
    for check in checks:
        click.echo(f"{check.status:<4}  {check.name:<{width}}  {check.detail}")
    if any(check.status == "fail" for check in checks):
        raise SystemExit(1)
