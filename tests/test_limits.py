"""The limits are mechanical, as TigerBeetle keeps its constants: every bound and tuning
of Brook lives in brook/limits.py, where the relations between them are checked; a
number bound at a module's top level anywhere else fails this test, unless it is a
format constant or a mechanism's own parameter, listed below with the reason."""

from __future__ import annotations

import ast
import pathlib

import brook

SOURCE = pathlib.Path(brook.__file__).parent

FORMAT = "a format constant: changing it changes bytes on disk or on the wire"
OS = "the operating system's or a C library's own number"
UNITS = "a unit, not a bound"
METRICS = "a histogram's buckets: the metrics' exposition (dashboards are built on them)"
BREAKER = "the circuit breaker's pure model (delivery/breaker.py, its simulation)"
SCHEDULER = "the delivery scheduler's pure pacing model (delivery/scheduler.py, its simulation)"
MERGE = "the S3 chunk merge policy (storage/s3/merge.py, its tests)"

ALLOWED = {
    "allocator.py": {"M_MMAP_THRESHOLD": OS, "LARGE_BUFFER_BYTES": "mallopt's own tuning"},
    "codec/batch.py": {
        "BATCH_VERSION": FORMAT,
        "FLAG_KEYS": FORMAT,
        "FLAG_HEADERS": FORMAT,
        "FLAG_IDEMPOTENCY": FORMAT,
        "_CRC_START": FORMAT,
    },
    "codec/segment.py": {"SEGMENT_VERSION": FORMAT},
    "codec/wal.py": {
        "WAL_VERSION": FORMAT,
        "KIND_BATCHES": FORMAT,
        "KIND_TOPIC_DROPPED": FORMAT,
        "_CRC_START": FORMAT,
    },
    "delivery/breaker.py": {
        "WINDOW": BREAKER,
        "MINIMUM": BREAKER,
        "FAILED_SHARE": BREAKER,
        "FAILED_IN_A_ROW": BREAKER,
        "PAUSE_MS_MIN": BREAKER,
        "PAUSE_MS_MAX": BREAKER,
    },
    "delivery/pacing.py": {"_SLACK_MS": "a float rounding margin"},
    "delivery/scheduler.py": {
        "AHEAD_S": SCHEDULER,
        "AHEAD_SLOW_S": SCHEDULER,
        "AHEAD_SLOW_MIN": SCHEDULER,
        "LATENCY_WEIGHT": SCHEDULER,
        "GAP_WEIGHT": SCHEDULER,
        "BUSY_GAP_MS": SCHEDULER,
        "RATE_WINDOW_MS": SCHEDULER,
        "RATE_WEIGHT": SCHEDULER,
        "AHEAD_CAP_S": SCHEDULER,
        "LEASE_HANDS": SCHEDULER,
        "WAITING_LOOKS": SCHEDULER,
    },
    "delivery/service.py": {"DUE_FLOOR_MS": SCHEDULER},
    "delivery/signing.py": {"ED25519_SEED_BYTES": "RFC 8032's seed length"},
    "delivery/stats.py": {"LATENCY_BUCKETS_S": METRICS},
    "durations.py": {"SECOND_MS": UNITS},
    "id_index.py": {
        "_EMPTY": FORMAT,
        "_GONE": FORMAT,
        "_MIN_SLOTS": "the hash table's own growth policy",
        "_LOW_MASK": FORMAT,
    },
    "lake/manifest.py": {"MANIFEST_VERSION": FORMAT},
    "lake/typed.py": {"_INT64": "Parquet's int64 range"},
    "log/compaction.py": {"KEY_DIGEST_BYTES": "the collision bound of compaction's key map"},
    "names.py": {"_DIGEST_CHARS": FORMAT},
    "portal_links.py": {"KEY_BYTES": FORMAT},
    "processes.py": {
        "EXIT_NO_RESTART": "EX_CONFIG of sysexits.h: a protocol between processes",
        "_PR_SET_PDEATHSIG": OS,
    },
    "server/http.py": {"_JOINED_BODY_MAX": "a copy-or-not threshold of the writer"},
    "spark/options.py": {"EARLIEST": FORMAT, "LATEST": FORMAT},
    "staging/plan.py": {"CHUNK_VERSION": FORMAT, "ANY_PARTITION": FORMAT},
    "stats.py": {"BATCH_SECONDS_BUCKETS": METRICS},
    "storage/local.py": {"FILE_MODE": OS, "FOLDER_MODE": OS},
    "storage/s3/fence.py": {
        "FENCE_WIDTH_FIRST": "the fencing protocol's search (storage/s3/fence.py)",
        "FENCE_ROUNDS_MAX": "the fencing protocol's search (storage/s3/fence.py)",
    },
    "storage/s3/manifest.py": {"MANIFEST_VERSION": FORMAT},
    "storage/s3/merge.py": {
        "RUN_CHUNKS_MIN": MERGE,
        "RUN_BYTES_MAX": MERGE,
        "NEWEST_UNMERGED": MERGE,
        "RUNS_JOINED_MIN": MERGE,
        "RECENT_BYTES_MAX": MERGE,
    },
    "storage_format.py": {"FORMAT": FORMAT},
    "tasks/arguments.py": {"INT_MIN": "JSON's exact integers", "INT_MAX": "JSON's exact integers"},
    "tasks/metrics.py": {"RUN_BUCKETS_S": METRICS},
    "timers/book.py": {"_TOPIC_BITS": FORMAT},
    "timers/history.py": {"_CANCELLED": FORMAT},
    "timers/service.py": {"DAY_MS": UNITS, "FIRE_LAG_BUCKETS": METRICS},
    "wire/core.py": {"EXACT_FLOAT_MAX": "IEEE 754 doubles' exact integers"},
}


def _numeric(node: ast.expr) -> bool:
    """A number written out: a literal, or arithmetic and tuples of literals only."""
    match node:
        case ast.Constant(value=value):
            return isinstance(value, int | float) and not isinstance(value, bool)
        case ast.UnaryOp(operand=operand):
            return _numeric(operand)
        case ast.BinOp(left=left, right=right):
            return _numeric(left) and _numeric(right)
        case ast.Tuple(elts=elements):
            return bool(elements) and all(_numeric(e) for e in elements)
    return False


def _bound_numbers() -> dict[str, set[str]]:
    """Every module's top-level names bound to a number written out, outside limits.py."""
    found: dict[str, set[str]] = {}
    for path in sorted(SOURCE.rglob("*.py")):
        where = path.relative_to(SOURCE).as_posix()
        if where == "limits.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _numeric(node.value):
                    names = {t.id for t in targets if isinstance(t, ast.Name)}
                    found.setdefault(where, set()).update(names)
    return found


def test_no_bound_lives_outside_limits() -> None:
    found = _bound_numbers()
    stray = sorted(
        f"{module}: {name}"
        for module, names in found.items()
        for name in names - set(ALLOWED.get(module, {}))
    )
    assert not stray, (
        "numbers bound outside brook/limits.py (move each there, named with its unit last, "
        f"or list it in ALLOWED with its reason): {stray}"
    )


def test_the_allow_list_names_only_what_exists() -> None:
    found = _bound_numbers()
    stale = sorted(
        f"{module}: {name}"
        for module, names in ALLOWED.items()
        for name in set(names) - found.get(module, set())
    )
    assert not stale, f"ALLOWED lists names that are gone: {stale}"


def test_the_detector_sees_a_bound() -> None:
    tree = ast.parse("X = 64 * 1024\nY = limits.x\nZ = -1\nW = (1, 2.5)\nV = 'text'\nU = True")
    assert [_numeric(n.value) for n in tree.body if isinstance(n, ast.Assign)] == [
        True,
        False,
        True,
        True,
        False,
        False,
    ]
