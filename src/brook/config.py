"""brook.toml: options for every command, and the API keys of the server.

Precedence, highest first: command-line flags, BROOK_* environment variables,
the config file (`--config FILE`, else ./brook.toml when present), defaults.
Top-level keys are option names (`data`, `host`, `port`, `request_bytes_max`, ...);
API keys are `[[auth.keys]]` tables:

    [[auth.keys]]
    name = "ingest"
    sha256 = "9f86d081..."        # hash of the key; the key itself is never stored
    scopes = ["produce"]          # produce, consume, admin
    topics = ["events.*"]         # glob patterns; default ["*"]
"""

from __future__ import annotations

import difflib
import hashlib
import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from brook import limits, names
from brook.errors import BadRequest

SCOPES = ("produce", "consume", "admin")
DEFAULT_FILE = "brook.toml"


class ApiKey(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    sha256: str
    scopes: list[str]
    topics: list[str] = msgspec.field(default_factory=lambda: ["*"])
    tenant: str | None = None
    """A key for one customer: it reaches only endpoints of this tenant (server/auth.py)."""


class Config(msgspec.Struct, frozen=True):
    options: dict[str, Any]
    keys: list[ApiKey]


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def load(path: str | None) -> Config:
    """Read the config file; an explicit path must exist, ./brook.toml may be absent.

    Raises BadRequest with the file and the problem when it does not hold together.
    """
    if path is None:
        if not Path(DEFAULT_FILE).is_file():
            return Config({}, [])
        path = DEFAULT_FILE
    try:
        document = tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise BadRequest(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadRequest(f"config file {path} is not valid TOML: {exc}") from None
    auth = document.pop("auth", {})
    if not isinstance(auth, dict) or set(auth) - {"keys"}:
        raise BadRequest(f"{path}: [auth] holds only [[auth.keys]] tables")
    for entry in auth.get("keys", []):
        if isinstance(entry, dict) and "tenant" in entry and "topics" not in entry:
            raise BadRequest(
                f"{path}: key {entry.get('name')!r} names a tenant but no topics: a tenant's "
                "key needs its topics (every topic would let its endpoints take every "
                "tenant's records)"
            )
    try:
        keys = msgspec.convert(auth.get("keys", []), list[ApiKey])
    except msgspec.ValidationError as exc:
        raise BadRequest(f"{path}: bad [[auth.keys]] entry: {exc}") from None
    for key in keys:
        if not re.fullmatch(r"[0-9a-f]{64}", key.sha256):
            raise BadRequest(f"{path}: key {key.name!r}: sha256 must be 64 lower-case hex digits")
        unknown = set(key.scopes) - set(SCOPES)
        if unknown or not key.scopes:
            raise BadRequest(
                f"{path}: key {key.name!r}: scopes must be some of {', '.join(SCOPES)}"
            )
        if key.tenant is not None and not names.USER_NAME.fullmatch(key.tenant):
            raise BadRequest(
                f"{path}: key {key.name!r}: tenant must be 1 to {limits.topic_name_chars_max} "
                "of A-Z a-z 0-9 . _ - (not starting with '__')"
            )
    return Config({name.replace("-", "_"): value for name, value in document.items()}, keys)


def check_names(loaded: Config, known: set[str], path: str) -> None:
    """BadRequest naming the first key of the file that is no option, with the closest
    option's name: a misspelt setting must not be ignored in silence."""
    for name in sorted(loaded.options):
        if name not in known:
            close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else "; see brook serve --help"
            raise BadRequest(f"{path}: {name} is not a setting{hint}")


def key_stanza(
    name: str, key: str, scopes: list[str], topics: list[str], tenant: str | None = None
) -> str:
    """The [[auth.keys]] table for a key: only its hash, never the key."""
    quoted = ", ".join(f'"{s}"' for s in scopes)
    patterns = ", ".join(f'"{t}"' for t in topics)
    owner = f'tenant = "{tenant}"\n' if tenant is not None else ""
    return (
        f'[[auth.keys]]\nname = "{name}"\nsha256 = "{hash_key(key)}"\n'
        f"scopes = [{quoted}]\ntopics = [{patterns}]\n{owner}"
    )
