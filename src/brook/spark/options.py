"""The `brook` data source's options, checked: pure, so they are tested without Spark.

Spark hands options over as strings, with their names lower-cased when they
are copied, so every name is matched without case and without underscores:
`startingOffsets`, `startingoffsets` and `starting_offsets` are one option.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import msgspec

from brook import limits, validate
from brook.errors import BadRequest
from brook.storage import location as locations

EARLIEST = -2
LATEST = -1
"""In an offsets JSON, as in Spark's Kafka source: the partition's earliest or latest offset."""


class AtTime(NamedTuple):
    """Offsets given by a time (startingTimestamp, endingTimestamp): in each partition,
    the first record written at or after `ms` (epoch milliseconds), else its end."""

    ms: int


Offsets = str | dict[int, int] | AtTime
""""earliest", "latest", an offset per partition (EARLIEST / LATEST allowed), or a time."""

_S3_OPTIONS = {"endpointurl": "endpoint_url", "region": "region"}
_RANGE_OPTIONS = {
    "startingoffsets",
    "endingoffsets",
    "startingtimestamp",
    "endingtimestamp",
    "maxrecordspertrigger",
    "failondataloss",
}
"""What a read takes to choose its records; a queue group's table holds them all."""
_READ_OPTIONS = {"path", "url", "topic", "maxbytespertask", *_RANGE_OPTIONS, *_S3_OPTIONS}
_WRITE_OPTIONS = {"path", "url", "topic", "apikeyfile", "outagewaitms", "checkpointlocation"}
API_KEY_VARIABLE = "BROOK_API_KEY"
"""Where the sink finds an API key: the environment of the driver and executors."""


def normalise(options: Mapping[str, str]) -> dict[str, str]:
    return {name.lower().replace("_", ""): str(value) for name, value in options.items()}


class ReadOptions(NamedTuple):
    location: str
    storage_options: dict[str, str]
    topic: str
    starting: Offsets
    ending: Offsets
    max_records_per_trigger: int | None
    fail_on_data_loss: bool
    task_bytes_max: int


def read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    """Check a reader's options; raises BadRequest naming the option at fault."""
    given = normalise(options)
    unknown = sorted(set(given) - _READ_OPTIONS - {"checkpointlocation"})
    if unknown:
        raise BadRequest(f"unknown option(s) {unknown} for reading from brook")
    location = _location(given, reading=True)
    topic = validate.topic_name(given.get("topic", ""))
    starting: Offsets = parse_offsets(
        given.get("startingoffsets", "latest" if streaming else "earliest")
    )
    if starting == "latest" and not streaming:
        raise BadRequest('startingOffsets "latest" reads nothing in a batch query')
    for name in ("endingoffsets", "endingtimestamp"):
        if name in given and streaming:
            raise BadRequest(f"{_SPELLED[name]} is for batch queries; a stream reads on")
    ending: Offsets = parse_offsets(given.get("endingoffsets", "latest"))
    if ending == "earliest":
        raise BadRequest('endingOffsets "earliest" reads nothing')
    starting = _at_time(given, "starting") or starting
    ending = _at_time(given, "ending") or ending
    per_trigger = given.get("maxrecordspertrigger")
    return ReadOptions(
        location,
        {_S3_OPTIONS[k]: v for k, v in given.items() if k in _S3_OPTIONS},
        topic,
        starting,
        ending,
        None if per_trigger is None else _positive(per_trigger, "maxRecordsPerTrigger"),
        _flag(given.get("failondataloss", "true"), "failOnDataLoss"),
        _positive(
            given.get("maxbytespertask", str(limits.read_task_bytes_max_default)),
            "maxBytesPerTask",
        ),
    )


def storage_options_of(options: Mapping[str, str] | None) -> dict[str, str]:
    """The storage's options (endpoint_url, region) among a reader's Spark options
    (`endpointUrl`, ...); raises BadRequest for any other."""
    given = normalise(options or {})
    unknown = sorted(set(given) - set(_S3_OPTIONS))
    if unknown:
        raise BadRequest(f"unknown storage option(s) {unknown}: endpointUrl and region are known")
    return {_S3_OPTIONS[k]: v for k, v in given.items()}


def queue_options(options: Mapping[str, str]) -> tuple[ReadOptions, str]:
    """Check the options of a queue group's table (`brook_queue`): a reader's, with
    `group` and without offsets. Returns them and the group name; raises BadRequest."""
    given = normalise(options)
    refused = sorted(set(given) & _RANGE_OPTIONS)
    if refused:
        raise BadRequest(
            f"option(s) {refused} do not apply to a queue group's table: it holds every "
            "record the topic retains"
        )
    group = validate.group_name(given.pop("group", ""))
    return read_options(given, streaming=False), group


class WriteOptions(NamedTuple):
    url: str | None
    """A running broker's address (http:// or https://)."""
    path: str | None
    """A directory for an embedded broker."""
    topic: str
    api_key_file: str | None
    """A file holding the API key, readable where tasks run (never the key itself)."""
    outage_wait_ms: int
    """How long tasks and commits wait for a broker that cannot be reached."""

    def api_key(self) -> str | None:
        """The key, read where it is needed: from `api_key_file`, else $BROOK_API_KEY.
        Raises BadRequest for a file that cannot be read."""
        if self.api_key_file is not None:
            try:
                return Path(self.api_key_file).read_text().strip() or None
            except OSError as exc:
                raise BadRequest(
                    f"apiKeyFile {self.api_key_file} cannot be read here: {exc.strerror}"
                ) from None
        return os.environ.get(API_KEY_VARIABLE) or None


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """Check a writer's options; raises BadRequest naming the option at fault."""
    given = normalise(options)
    if "apikey" in given:
        raise BadRequest(
            "the apiKey option is refused: options show in query plans and logs. Set "
            f"{API_KEY_VARIABLE} in the environment of the driver and the executors "
            f"(spark.executorEnv.{API_KEY_VARIABLE}), or give apiKeyFile, a file that holds it"
        )
    unknown = sorted(set(given) - _WRITE_OPTIONS)
    if unknown:
        raise BadRequest(f"unknown option(s) {unknown} for writing to brook")
    location = _location(given, reading=False)
    topic = validate.topic_name(given.get("topic", ""))
    url = location if location.startswith(("http://", "https://")) else None
    wait = given.get("outagewaitms", str(limits.sink_outage_wait_ms_default))
    return WriteOptions(
        url,
        None if url else location,
        topic,
        given.get("apikeyfile"),
        _positive(wait, "outageWaitMs") if wait != "0" else 0,
    )


def _kind(location: str) -> str | None:
    try:
        return locations.parse(location).kind
    except BadRequest:
        return None


def _location(given: dict[str, str], reading: bool) -> str:
    if ("path" in given) == ("url" in given):
        raise BadRequest('give exactly one of the options "path" (a directory) or "url"')
    if "path" in given:
        path = given["path"]
        if _kind(path) != "local":
            raise BadRequest(f'"path" is a directory; give {path!r} as "url"')
        return locations.parse(path).target
    url = given["url"]
    if reading and _kind(url) != "s3":
        raise BadRequest(
            'reading goes straight to storage: give "path" (a directory) or "url" '
            f"(s3://bucket/prefix), not {url!r}"
        )
    if not reading and not url.startswith(("http://", "https://")):
        raise BadRequest(
            'writing goes through the broker that owns the storage: give "url" '
            f'(http://host:port) or "path" (a directory for an embedded broker), not {url!r}'
        )
    return url


def parse_offsets(text: str) -> str | dict[int, int]:
    """ "earliest", "latest", or JSON {"<partition>": offset} (-2 earliest, -1 latest)."""
    if text in ("earliest", "latest"):
        return text
    try:
        given = msgspec.json.decode(text)
    except msgspec.DecodeError:
        given = None
    if not isinstance(given, dict) or not given:
        raise BadRequest(
            f'offsets must be "earliest", "latest" or JSON like {{"0": 12}}, not {text!r}'
        )
    out: dict[int, int] = {}
    for partition, offset in given.items():
        if not partition.isdigit():
            raise BadRequest(f"partition {partition!r} in offsets must be a number in a string")
        if type(offset) is not int or offset < EARLIEST:
            raise BadRequest(
                f"offset of partition {partition} must be an offset, -2 (earliest) or "
                f"-1 (latest), not {offset!r}"
            )
        out[int(partition)] = offset
    return out


def resolve(
    spec: str | dict[int, int], bounds: dict[int, tuple[int, int]], missing: str, what: str
) -> dict[int, int]:
    """Offsets per partition from `spec` and each partition's (earliest, latest);
    partitions left out of a JSON spec take `missing`. Raises BadRequest for a
    partition the topic does not have."""
    given: dict[int, int] = {}
    edge = missing
    if isinstance(spec, str):
        edge = spec
    else:
        given = spec
        extra = sorted(set(given) - set(bounds))
        if extra:
            raise BadRequest(f"{what} names partition(s) {extra} the topic does not have")
    out = {}
    for p, (earliest, latest) in bounds.items():
        offset = given.get(p, EARLIEST if edge == "earliest" else LATEST)
        out[p] = earliest if offset == EARLIEST else latest if offset == LATEST else offset
    return out


_SPELLED = {
    "endingoffsets": "endingOffsets",
    "endingtimestamp": "endingTimestamp",
    "startingoffsets": "startingOffsets",
    "startingtimestamp": "startingTimestamp",
}


def _at_time(given: dict[str, str], edge: str) -> AtTime | None:
    """startingTimestamp / endingTimestamp (epoch ms), never beside its offsets option."""
    name = f"{edge}timestamp"
    if name not in given:
        return None
    if f"{edge}offsets" in given:
        raise BadRequest(f"give {_SPELLED[f'{edge}offsets']} or {_SPELLED[name]}, not both")
    text = given[name].strip()
    if not text.isdigit():
        raise BadRequest(f"{_SPELLED[name]} is a time in ms since the epoch, not {text!r}")
    return AtTime(int(text))


def _positive(text: str, name: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadRequest(f"{name} must be a whole number, not {text!r}") from None
    if value <= 0:
        raise BadRequest(f"{name} must be positive, not {value}")
    return value


def _flag(text: str, name: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise BadRequest(f'{name} must be "true" or "false", not {text!r}')
    return lowered == "true"
