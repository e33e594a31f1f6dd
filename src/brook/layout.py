"""Where the broker keeps everything in its storage: every name, in one place.

Names are '/'-separated paths under the storage root (a directory, or an S3
prefix). docs/FORMAT.md ("Where things are stored") documents each pattern in
`PATTERNS`, and a test holds the two together. Internal logs (a queue group's
status log, the timer log) are partition logs under `topics/` with a name
starting with `__`, which user topics cannot have. Pure: no imports above it.
"""

from __future__ import annotations

LOCK = "LOCK"
"""flock()ed by the broker that owns a local directory."""

SCRATCH = ".scratch"
"""Local directories only: temporaries of atomic writes and folders being deleted,
emptied at every start (hidden: never listed as a file of the store)."""

FORMAT = "format.json"
"""The location's format version: which Brook can read what is stored (brook/storage_format.py)."""

TOPICS = "topics/"
TOPIC_CONFIG_FILE = "topic.json"
SEGMENT_SUFFIX = ".seg"
DURABLE_MARK_FILE = "durable.mark"
GROUPS = "groups/"
QUEUES = "queues/"
QUEUE_LOGS = "__queues/"
"""Topic-name prefix of the queue groups' status logs."""
TIMER_LOG = "__timers"
"""Topic name of the timer log."""
TIMER_BUCKETS = "timers/buckets/"
TIMER_CHECKPOINT = "timers/checkpoint.json"
STAGING = "staging/"
ENDPOINTS = "endpoints/"
EVENT_TYPES = "event-types/"
"""The event-type catalog (delivery/event_types.py)."""
PORTAL_KEY = "portal.key"
"""What customers' portal links are signed with (brook/portal_links.py)."""
SCHEDULES = "schedules/"
JOINS = "joins/defs/"
JOIN_LOG = "__joins"
"""Topic name of the join log: joins made, durable in the commit round of their create."""
JOIN_CHECKPOINT = "joins/checkpoint.json"
STAGING_STATE_FILE = "state.json"
LAKE = "lake/"
"""Topics as Parquet tables (brook/lake/): files any Parquet reader reads, and manifests."""
LAKE_MANIFEST_FILE = "manifest.json"
LAKE_SUFFIX = ".parquet"
LAKE_NOTE_FILE = "_READ_THE_MANIFEST.txt"
"""Beside a topic's table: says that a glob of the folder is not the table."""
WAL = "wal/"
"""The write-ahead log (local directories): every commit round made durable at once."""
WAL_SUFFIX = ".wal"
WAL_CHECKPOINT = "wal/checkpoint.json"
"""The WAL position the segments are durable up to: replay starts there."""


def wal_file(start: int) -> str:
    """A write-ahead log file whose first byte is at WAL position `start`."""
    return f"{WAL}{start:020d}{WAL_SUFFIX}"


def wal_file_start(name: str) -> int:
    """The start position in a WAL file's name (`wal_file`)."""
    return int(name[len(WAL) : -len(WAL_SUFFIX)])


def topic_prefix(topic: str) -> str:
    return f"{TOPICS}{topic}/"


def topic_config(topic: str) -> str:
    """The topic's settings; a topic exists once this is durable."""
    return f"{TOPICS}{topic}/{TOPIC_CONFIG_FILE}"


def partition_prefix(topic: str, partition: int) -> str:
    return f"{TOPICS}{topic}/{partition}/"


def segment(prefix: str, base_offset: int) -> str:
    """The segment of a partition (`partition_prefix`) whose first offset is `base_offset`."""
    return f"{prefix}{base_offset:020d}{SEGMENT_SUFFIX}"


def durable_mark(prefix: str) -> str:
    """The acknowledged end of a partition's active segment, for outside readers."""
    return prefix + DURABLE_MARK_FILE


def group_positions(topic: str, group: str) -> str:
    """A stream group's committed positions."""
    return f"{GROUPS}{topic}/{group}.json"


def groups_of(topic: str) -> str:
    return f"{GROUPS}{topic}/"


def queue_settings(topic: str, group: str) -> str:
    """A queue group's settings."""
    return f"{QUEUES}{topic}/{group}.json"


def queues_of(topic: str) -> str:
    return f"{QUEUES}{topic}/"


def parse_queue_settings(name: str) -> tuple[str, str] | None:
    """(topic, group) of a `queue_settings` name, or None if it is not one."""
    parts = name.split("/")
    if len(parts) != 3 or parts[0] + "/" != QUEUES or not parts[2].endswith(".json"):
        return None
    return parts[1], parts[2].removesuffix(".json")


def queue_status_log(topic: str, group: str) -> str:
    """The topic name of a queue group's status log (one partition, internal)."""
    return f"{QUEUE_LOGS}{topic}/{group}"


def queue_status_logs_of(topic: str) -> str:
    """The prefix of every status log of `topic`'s queue groups."""
    return f"{TOPICS}{QUEUE_LOGS}{topic}/"


def timer_run(bucket: int, flush: int) -> str:
    """One flush's run of timers due in the bucket starting at `bucket` (ms)."""
    return f"{timer_bucket(bucket)}{flush:010d}.run"


def timer_bucket(bucket: int) -> str:
    return f"{TIMER_BUCKETS}{bucket:013d}/"


def parse_timer_run(name: str) -> tuple[int, int] | None:
    """(bucket start, flush number) of a `timer_run` name, or None if it is not one."""
    parts = name.removeprefix(TIMER_BUCKETS).split("/")
    if len(parts) != 2 or not parts[1].endswith(".run"):
        return None
    try:
        return int(parts[0]), int(parts[1].removesuffix(".run"))
    except ValueError:
        return None


def staging_of(topic: str) -> str:
    return f"{STAGING}{topic}/"


def staging_writer(topic: str, writer: str) -> str:
    return f"{STAGING}{topic}/{writer}/"


def staging_state(topic: str, writer: str) -> str:
    """What a writer of staged records last published."""
    return f"{staging_writer(topic, writer)}{STAGING_STATE_FILE}"


def staging_seq(topic: str, writer: str, seq: int) -> str:
    return f"{staging_writer(topic, writer)}{seq}/"


def staging_chunk(topic: str, writer: str, seq: int, part: str, chunk: int) -> str:
    """One staged chunk."""
    return f"{staging_seq(topic, writer, seq)}{part}/{chunk:08d}"


def endpoint(name: str) -> str:
    """An endpoint's settings and secrets (delivery, docs/DELIVERY.md)."""
    return f"{ENDPOINTS}{name}.json"


def parse_endpoint(name: str) -> str | None:
    """The endpoint named by an `endpoint` file name, or None if it is not one."""
    if not name.startswith(ENDPOINTS) or not name.endswith(".json") or name.count("/") != 1:
        return None
    return name[len(ENDPOINTS) : -len(".json")]


def event_type(name: str) -> str:
    """An event type of the catalog (delivery/event_types.py)."""
    return f"{EVENT_TYPES}{name}.json"


def parse_event_type(name: str) -> str | None:
    """The event type an `event_type` file name holds, or None if it is not one."""
    if not name.startswith(EVENT_TYPES) or not name.endswith(".json") or name.count("/") != 1:
        return None
    return name[len(EVENT_TYPES) : -len(".json")]


def schedule(name: str) -> str:
    """A periodic schedule's definition and where it stands (brook/schedules)."""
    return f"{SCHEDULES}{name}.json"


def parse_schedule(name: str) -> str | None:
    """The schedule named by a `schedule` file name, or None if it is not one."""
    if not name.startswith(SCHEDULES) or not name.endswith(".json") or name.count("/") != 1:
        return None
    return name[len(SCHEDULES) : -len(".json")]


def join(join_id: str) -> str:
    """A join's definition, the members that arrived, and how it ended (brook/joins)."""
    return f"{JOINS}{join_id}.json"


def parse_join(name: str) -> str | None:
    """The join id named by a `join` file name, or None if it is not one."""
    if not name.startswith(JOINS) or not name.endswith(".json") or name.count("/") != 2:
        return None
    return name[len(JOINS) : -len(".json")]


def lake_topic(topic: str) -> str:
    """Everything the lake holds of `topic`'s records: one table."""
    return f"{LAKE}topics/{topic}/"


LAKE_HISTORIES = f"{LAKE}queues/"
"""Every queue group's history in the lake."""


def lake_histories_of(topic: str) -> str:
    """Every table of `topic`'s queue groups' histories."""
    return f"{LAKE_HISTORIES}{topic}/"


def lake_history(topic: str, group: str) -> str:
    """One table: a queue group's status log, a row per transition."""
    return f"{lake_histories_of(topic)}{group}/"


def lake_manifest_in(table: str) -> str:
    """Which of a lake table's files hold which offsets: the table's one commit point."""
    return f"{table}{LAKE_MANIFEST_FILE}"


def lake_manifest(topic: str) -> str:
    return lake_manifest_in(lake_topic(topic))


def lake_note(topic: str) -> str:
    """The note in a topic's lake folder for those who glob it (LAKE_NOTE_FILE)."""
    return f"{lake_topic(topic)}{LAKE_NOTE_FILE}"


def lake_file_in(table: str, partition: int, first: int, next_offset: int, tag: str) -> str:
    """A file of a lake table holding offsets [first, next_offset) of a partition (of
    the log it copies); `tag` tells apart two writings of one range (a merge)."""
    return f"{table}{partition}/{first:020d}-{next_offset:020d}-{tag}{LAKE_SUFFIX}"


PATTERNS = (
    LOCK,
    FORMAT,
    "wal/<start>.wal",
    "wal/checkpoint.json",
    "topics/<topic>/topic.json",
    "topics/<topic>/<partition>/<base>.seg",
    "topics/<topic>/<partition>/durable.mark",
    "groups/<topic>/<group>.json",
    "queues/<topic>/<group>.json",
    "topics/__queues/<topic>/<group>/0/<base>.seg",
    "topics/__timers/0/<base>.seg",
    "timers/buckets/<bucket>/<flush>.run",
    "timers/checkpoint.json",
    "staging/<topic>/<writer>/state.json",
    "staging/<topic>/<writer>/<seq>/<part>/<chunk>",
    "endpoints/<endpoint>.json",
    "schedules/<schedule>.json",
    "joins/defs/<join>.json",
    "topics/__joins/0/<base>.seg",
    "joins/checkpoint.json",
    "lake/topics/<topic>/manifest.json",
    "lake/topics/<topic>/_READ_THE_MANIFEST.txt",
    "lake/topics/<topic>/<partition>/<first>-<next>-<tag>.parquet",
    "lake/queues/<topic>/<group>/manifest.json",
    "lake/queues/<topic>/<group>/0/<first>-<next>-<tag>.parquet",
)
"""Every name pattern above, as docs/FORMAT.md writes it."""
