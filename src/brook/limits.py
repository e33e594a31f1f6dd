"""Every limit and default Brook has, named with its unit last.

Formats and the broker check against these; tests and docs refer to them by name.

What bounds memory: request bodies (inflight_bytes_max, request_bytes_max), the
committer's queue (commit_queue_bytes_max) and its rounds (batch_bytes_max), reads
(read_records_max, read_bytes_max, wait_ms_max), a queue group's window
(queue_window_records_max) and its snapshots, timers in memory (timer_lookahead_ms,
timer_unflushed_max, timer_history_max), idempotency keys (idempotency_keys_max),
staged publishes (staging_publish_bytes_in_flight), and retention's view of what queue
groups need (ranges, brook/ranges.py), and compaction (compaction_keys_max keys in its
map; one segment decoded at a time, at most segment_bytes_max).
"""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
whole_max = 2**63 - 1
"""The largest whole number a request may carry (an offset, a count): a signed 64-bit one."""


# ---------------------------------------------------------------- records and batches (codec/)
record_bytes_max_default = 8 * MIB
"""Largest record (key + value + headers) a broker accepts by default; each broker has
its own (`Broker(record_bytes_max=...)`, `brook serve --record-bytes-max`)."""
record_bytes_max_ceiling = 64 * MIB
"""The most record_bytes_max may be set to (a record must fit a batch and a request)."""
batch_records_max = 1_000_000
"""Most records a single batch may hold; a format bound checked on decode."""
batch_bytes_format_max = 256 * MIB
"""Largest batch the segment format admits; anything longer is treated as corrupt."""
append_bytes_max = 128 * MIB
"""Most bytes of records one append_many call may carry; split larger ones."""


# ---------------------------------------------------------------- topics
partitions_max = 1024
topic_name_chars_max = 200
event_id_chars_max = 256
"""The longest `brook.event-id` a record may carry (a sender's own id for its event)."""
event_type_chars_max = 100
"""The longest `brook.event-type` (`invoice.paid`)."""
event_type_description_chars_max = 4096
event_type_schema_bytes_max = 64 * 1024
"""The JSON Schema an event type of the catalog may carry, encoded."""
event_id_search_ms = 7 * 24 * 60 * 60 * 1000
"""A message named by its sender's event id is looked for among the records of this
long (an id Brook made, topic:partition:offset, is found at once, however old)."""
value_schema_depth_max = 8
value_schema_properties_max = 1_000
value_schema_bytes_max = 64 * 1024
open_slice_topics = 64
"""Topics the opening loop opens in one step (between steps it checks for closing)."""


# ---------------------------------------------------------- idempotent produce (idempotency.py)
idempotency_window_ms_default = 10 * 60 * 1000
idempotency_keys_max = 1_000_000
"""Most keys remembered at once; the oldest are forgotten first beyond this."""
idempotency_key_bytes_max = 256


# ---------------------------------------------------------------- group commit (commit/)
linger_ms_default = 2.0
"""How long a batch may wait for more records after its first one arrived."""
linger_ms_max = 1_000
"""The longest linger_ms a broker may be given."""
batch_bytes_max_default = 4 * MIB
"""A batch closes once it holds this many bytes of records."""
commit_queue_bytes_max = 512 * MIB
"""Bytes of records queued for the committer; past it an append raises Overloaded
(one request is always taken, however large, so none can never fit)."""
round_syncs_parallel_max = 8
"""Partitions synced at once after a round that wrote to several."""


# ------------------------------------------------------------- the write-ahead log (log/wal.py)
wal_file_bytes_max = 16 * MIB
"""A WAL file is closed and the next one begun once it holds this many bytes."""
wal_bytes_max_default = 64 * MIB
"""WAL bytes past the last checkpoint beyond which a round waits for a checkpoint: the
most a restart after a crash replays, whatever the number of partitions."""
checkpoint_wal_bytes_share = 0.5
"""A checkpoint begins once the WAL past the last one holds this share of wal_bytes_max,
before a round has to wait for it."""
checkpoint_interval_ms_default = 5_000
"""A checkpoint begins this long after the last one when anything was written since."""
checkpoint_interval_ms_min = 10
checkpoint_interval_ms_max = 600_000
wal_bytes_max_min = 64 * KIB
"""The smallest wal_bytes_max a broker may be given (tests use it to checkpoint often)."""
checkpoint_dirty_files_share = 0.5
"""A checkpoint begins once this share of the open-files budget are segments written
since the last one: a file not yet synced keeps its descriptor (storage/handles.py)."""
checkpoint_syncs_parallel = 8
"""Segments one checkpoint syncs at once (each sync mostly waits on the disk)."""
wal_read_attempts = 3
"""A reader's reads of the owner's WAL, which a checkpoint may cut short meanwhile."""


# ---------------------------------------------------------------- segments (log/)
preallocate_bytes_default = 16 * MIB
"""The active segment file is grown in steps of this many bytes (fallocate), so a
sync after an append need not also commit a new file size; 0 turns it off."""
segment_bytes_max_default = 128 * MIB
"""A segment is sealed and a new one started once it holds this many bytes."""
index_interval_bytes = 4096
"""A segment's index lists a batch only once this many bytes follow the last one it
lists (and always its first and last batch): a 128 MiB segment of small batches is
indexed in at most 32,768 entries, 768 KiB, instead of an entry per batch."""
compaction_keys_max = 500_000
"""Keys in one compaction pass's map (16-byte digests: about 80 MiB at most). A
partition with more distinct keys is compacted over several passes."""
segment_ms_max_default = 24 * 60 * 60 * 1000
"""A segment is sealed once its first batch is this old, so time retention can free it."""
mark_read_attempts = 5
"""A mark read while the broker rewrites it fails its checksum: read it again."""


# ---------------------------------------------------------------- retention (log/retention.py)
retention_check_ms = 10_000


# ---------------------------------------------------------------- reads
read_records_max = 10_000
"""A read returns at most this many records; larger limits are capped, not rejected."""
read_bytes_max = 8 * MIB
"""A read fetches at most about this many bytes of batches from storage."""
read_records_default = 1_000
"""Records a read returns when no limit is given (SPEC §3: `t.read(..., limit=1000)`)."""
poll_records_default = 500
lease_records_default = 10
"""Records a lease asks for when no count is given (SPEC §3: `q.lease(max_records=10)`)."""
poll_wait_s_default = 1.0
"""How long a poll or a lease waits for records when no timeout is given."""
dead_records_page_default = 100
"""Dead records one look of an error group gives when no limit is given."""
client_timeout_s_default = 60.0
"""How long a client waits for an answer (`brook.connect(..., timeout=)`)."""
queue_batches_bytes_max_default = 64 * MIB
"""Batches the queue groups read lately, kept for each other (queue/reader.py): a record
fanned out to many groups (endpoints) is read from storage about once. The most of a
broker's memory that grows with its traffic (docs/RELIABILITY.md, the soak)."""
queue_batches_bytes_max_ceiling = 16 * 1024 * MIB
read_task_bytes_max_default = 64 * MIB
"""An outside reader (a Spark task) reads at most about this much of one segment."""
read_threads = 4
"""Threads of the server that read from storage (reads, polls), off the event loop."""
wait_ms_max = 30_000
"""Longest long-poll (read, poll, lease) a request may ask for; longer waits are capped."""
read_window_bytes = 8 * 1024 * 1024
"""How much of a segment is read at a time when walking or reading it. A window
becomes one Arrow batch in Spark: about 75,000 records of 100 bytes, near the
size of Spark's own Arrow batches, and little memory per task."""


# ---------------------------------------------------------------- object storage (storage/s3/)
lease_ms_default = 10_000
"""How long an owner's lease on a prefix lasts unrenewed: how long a restart after a
crash waits for it."""
lease_ms_min = 1_000
lease_ms_max = 600_000
cache_bytes_default = 1024 * MIB
"""Disk space the S3 backend's read cache may use (`cache_bytes`)."""
object_request_timeout_s_default = 30.0
"""Longest one object-store request may take, retries included, before it fails."""
s3_inline_bytes_max = 4 * 1024
"""Files up to this size live in the manifest itself (one PUT to replace)."""
s3_read_attempts_max = 3
s3_listing_slice_files = 500
"""Appendable files whose chunks one slice of a parallel listing covers (load_tables)."""
s3_requests_in_flight_max = 16
"""Object requests one broker makes at once when it has many to make (fences, cold reads)."""
lease_claim_pause_ms = 5_000
"""How long an owner holds back its catalog changes after seeing a claim."""
take_over_s_max = 30.0
"""Longest taking the prefix keeps trying to raise the epoch against a busy owner."""
lease_wait_step_s = 0.25
"""How often a broker waiting for a lease to run out looks at it again."""


# -------------------------------------------------------------- open files (storage/handles.py)
open_files_share = 0.5
"""By default the file cache keeps at most this share of the process's descriptor limit
open; the rest is for connections (the HTTP server's, delivery's) and short-lived files."""
open_files_min = 64
"""The file cache never keeps fewer open than this (a limit too low to serve with)."""
open_files_idle_ms_default = 60_000
"""A file unused this long is closed at the next maintenance: cold topics hold none."""
open_files_raise_max = 1 << 20
"""The soft limit is raised at most this far when the hard one is unlimited."""


# ---------------------------------------------------------------- the HTTP server (server/)
request_bytes_max = 32 * MIB
"""Largest HTTP request body by default; larger requests get 413."""
request_bytes_min = 1024
"""The least request_bytes_max (and inflight_bytes_max) a server may be given."""
http_timeout_s_min = 0.1
"""The least header, body or idle timeout a server may be given."""
inflight_bytes_max_default = 256 * MIB
"""Request-body bytes the server holds in memory across all connections (being read,
waiting, being answered); past it a request gets 503 with Retry-After, unread."""
overloaded_retry_after_s = 1
"""The Retry-After of a 503 for back-pressure."""
refused_linger_s = 10.0
"""A request refused before its body was read (413, 503) is answered at once; its
body is then read and dropped for up to this long before the connection closes."""
header_timeout_s_default = 10.0
"""From a request's first byte to the end of its headers; slower gets 408 and a close."""
body_timeout_s_default = 60.0
"""From the end of a request's headers to the end of its body; slower gets 408."""
idle_timeout_s_default = 75.0
"""A connection with no request in progress is closed after this long."""
connections_max_default = 1024
"""Open connections; a connection beyond them is answered 503 and closed."""
url_bytes_max = 16 * KIB
"""A request target longer than this gets 414 and a close."""
headers_bytes_max = 64 * KIB
"""A request's headers (names and values together) larger than this get 431 and a close."""
headers_count_max = 128
"""A request with more headers than this gets 431 and a close."""
wake_check_s = 1.0
"""A waiter looks again at least this often, whatever it was told."""
fenced_check_s = 0.2
"""How often the server looks whether its storage was taken over."""
server_stop_wait_s = 30.0
"""How long a stop waits for requests in flight before closing their connections."""
pipeline_requests_max = 64
"""Reading from a connection pauses while this many of its requests wait."""
connection_sweep_s = 1.0
"""How often connection deadlines are checked."""
blocking_call_threads = 64
"""API calls that wait for a commit round or write a file (Operation.executor "blocking")
in progress at once; each mostly waits for a group commit."""
long_call_threads = 4
"""API calls that run for seconds (executor "long": a lake sync, an endpoint's test
request, a replay) in progress at once: apart, so they never hold up the others."""
route_matches_remembered_max = 4096
"""Paths whose match is kept; the memory is forgotten whole when it fills."""


# ---------------------------------------------------------------- the remote client (client/)
client_resends_max = 3
"""A call that may be sent twice (the table's retry_safe) and got no answer at all (the
connection refused or dropped) is sent again this many times..."""
client_resend_ms_min = 200
"""...after this long, doubling each time..."""
client_resend_ms_max = 800
"""...up to this long."""
client_overloaded_resends_max = 8
"""A call answered 503 overloaded (nothing of it was kept) is sent again this many
times, after the server's Retry-After each time, before Overloaded is raised."""
client_retry_after_s_min = 0.05
client_retry_after_s_max = 10.0
"""A server's Retry-After is honoured within these bounds."""


# ----------------------------------------------------- staged writes (staging/, the Spark sink)
staging_ttl_ms_default = 7 * 24 * 60 * 60 * 1000
"""A writer's last publish is remembered this long after it (a replay within it
appends nothing); staged records no publish claims are dropped after it too."""
staging_seq_max = 2**62
"""The highest seq a staged write may carry (a Spark batch id, an epoch...)."""
staging_chunks_per_part_max = 1_000_000
"""Chunks one part of a staged write may have (numbered 0 to this less one)."""
staging_sweep_ms = 10 * 60 * 1000
"""How often the broker looks for interrupted publishes and staging to drop."""
staging_publish_bytes_in_flight = 64 * MIB
"""Most bytes of staged records one publish hands the committer before waiting."""
sink_outage_wait_ms_default = 120_000
"""How long the Spark sink's tasks and commits wait for a broker that cannot be
reached (a restart) before the query fails (`outageWaitMs`)."""
sink_outage_pause_ms_min = 250
"""Meanwhile they try again after this long, doubling each time..."""
sink_outage_pause_ms_max = 5_000
"""...up to this long."""
sink_chunk_rows = 5_000
sink_chunk_bytes = 4 * 1024 * 1024
"""A chunk is staged once it holds this many rows or bytes."""
sink_locked_wait_s = 120.0
"""How long a task waits for the directory while other tasks hold the embedded broker."""


# -------------------------------------- loops and child processes (supervisor.py, processes.py)
background_retry_ms_min = 100
"""A background loop that failed runs again after this long, doubling per failure..."""
background_retry_ms_max = 30_000
"""...up to this long between tries."""
child_restart_ms_min = 500
"""A child process that died (a `brook worker --processes` worker, a delivery worker) is
started again after this long, doubling per quick death in a row (brook/processes.py)..."""
child_restart_ms_max = 10_000
"""...up to this long."""
child_stable_ms = 10_000
"""A child that lived this long did not die of starting: its death starts the count of
quick deaths from nothing again."""
child_quick_deaths_max = 5
"""A process supervisor gives up (exits non-zero) once one child died this many times
in a row, each time sooner than child_stable_ms after it started."""
child_parent_check_ms = 1_000
"""Where the system has no parent-death signal (not Linux), how often a child looks
whether its parent is still there."""


# --------------------------------------- queue groups (queue/): SPEC §1's defaults, then bounds
visibility_timeout_ms_default = 30_000
queue_max_attempts_default = 5
backoff_min_ms_default = 1_000
backoff_factor_default = 2.0
backoff_max_ms_default = 300_000
backoff_jitter_default = 0.5
"""Up to this share of a retry's delay is taken off at random (brook/retry.py)."""
backoff_factor_max = 100.0
"""The most a backoff's delay may grow from one attempt to the next."""
visibility_timeout_ms_max = 12 * 60 * 60 * 1000
"""Longest lease one call may take or extend to (as SQS: 12 hours)."""
queue_attempts_max = 10_000
queue_window_records_max = 200_000
"""Most unfinished records (ready, leased, retrying) a queue group holds in memory;
later records of the topic wait in the log until some are finished. Fairness
across keys holds among the records in this window."""
queue_snapshot_changes = 100_000
"""A queue group writes a snapshot of its state after this many transitions, so
a restart reads a bounded status log and older status segments can be deleted."""
queue_lease_records_max = 1_000
"""Most records one lease call hands out; larger counts are capped."""
queue_reason_chars_max = 4096
"""A nack or discard reason is cut to this many characters."""
error_group_chars_max = 200
"""The key dead records are grouped by (queue/error_groups.py) is cut to this many characters."""
error_groups_cached_max = 4096
"""A process remembers the group of this many distinct reasons (a queue group looks one up
on every record that dies or is redriven)."""
delivery_workers_max = 16
"""Most delivery worker processes a broker starts."""
endpoint_failing_stored_after_ms = 60_000
"""How long an endpoint's attempts fail before when they began is stored (so its
disable_after_ms counts across restarts; a shorter blip writes nothing)."""
replay_hours_max = 8_760
"""The longest span back the dashboard's replay form takes (a year; the API takes any time)."""
redrive_records_max = 100_000
"""Most records one redrive call may name (a selection is sent in parts of this)."""
job_result_bytes_max = 64 * 1024
"""The most bytes a record's result (given with its ack) may have."""
queue_results_max = 10_000
"""A queue group keeps at most this many results of acked records..."""
queue_results_bytes_max = 16 * 1024 * 1024
"""...of at most this many bytes together..."""
queue_results_ms = 24 * 60 * 60 * 1000
"""...each for this long after its ack (queue/results.py)."""
priority_min = -1000
priority_max = 1000
"""A record's priority (its `brook.priority` header) is a whole number in these bounds."""
not_before_ms_max = 253_402_300_799_999
"""The latest not-before time a record may carry (the last ms of the year 9999)."""
rate_per_s_max = 1_000_000.0
"""The most a queue group's rate limits (per key, for the whole group) may allow a second."""
queue_read_ahead_records = 2_000
"""About how many records one storage read fetches (whole batches)."""
queue_finishing_prune = 1024
"""Entries remembered as finishing jobs before the durable ones are forgotten."""
queue_tick_s_max = 1.0
"""The longest the ticker sleeps."""
queue_tick_pass_ms_min = 5
"""The ticker's passes are at least this far apart."""
open_slice_groups = 64
"""Stored groups the opening loop opens in one step (between steps it checks for stop)."""


# ------------------------------------------------------------- unique records (queue/unique.py)
unique_identity_chars_max = 256
"""The longest identity a unique record may have (the task layer sends a 64-character hash)."""
unique_scan_records_max = 100_000
"""After a start, the first unique call of a group reads the identities of its live records
in the window and at most this many beyond (a backlog deeper than that is not seen)."""


# --------------------------------------------------- timers and schedules (timers/, schedules/)
timers_page_default = 100
timers_page_max = 1_000
"""Pending timers one page of `list_timers` (GET /v1/timers) holds, by default and at most."""
timer_bucket_ms = 60 * 60 * 1000
"""Pending timers are stored in buckets of due time this wide (files per bucket)."""
timer_lookahead_ms = 60 * 1000
"""A bucket is loaded into memory this long before its first timer can be due."""
timer_flush_ms = 10_000
"""What happened to timers is written to their buckets at least this often..."""
timer_flush_timers = 100_000
"""...or once this many timers were scheduled, fired or cancelled since the last time."""
timer_unflushed_max = 200_000
"""Scheduling waits while this many timers are not yet written to their buckets."""
timer_history_ms = 24 * 60 * 60 * 1000
"""Fired and cancelled timers are remembered (by `timer(id)`, and against a second
schedule of the same id) this long, at most timer_history_max of them."""
timer_history_max = 100_000
timer_id_chars_max = 200
timer_horizon_ms_max = 100 * 365 * 24 * 60 * 60 * 1000
"""Timers may be due up to a century ahead."""
timer_at_past_max_ms = 24 * 60 * 60 * 1000
"""A timer's `at` may be this far in the past (it fires at once); further back is
refused as a mistake, usually seconds given as milliseconds."""
schedule_name_chars_max = 150
"""A periodic schedule's name (its slots' timer ids add the slot to it)."""
cron_chars_max = 200
"""A periodic schedule's cron expression."""
timezone_chars_max = 100
"""A periodic schedule's time zone name (an IANA name: `Europe/Berlin`)."""
schedule_every_ms_min = 1_000
"""The shortest interval a periodic schedule may have."""
schedule_late_ms = 60_000
"""A slot the broker was down over by more than this is missed (the `missed` policy)."""
schedule_check_ms = 200
"""How often the broker looks for schedules whose slot fired (to arm the next one)."""
schedules_max = 10_000
schedule_timers_max = 100_000
"""Most timers one schedule_many call (or request) may carry."""
timer_fire_batch = 2_000
"""Most timers fired in one round of appends."""
timer_bucket_runs_merge = 8
"""A flush that would leave a bucket this many runs merges its new run with the
newest older ones (brook/timers/merging.py)."""


# ---------------------------------------------------------------- joins (joins/)
join_members_max = 10_000
"""The most jobs one join (a chord's group) may wait for."""
joins_per_call_max = 1_000
"""The most joins one create_joins call (a canvas: a chain has one a link) may make."""
joins_open_max = 100_000
"""Joins not yet ended a broker keeps; creating more is refused until some end."""
join_error_bytes_max = 4 * KIB
"""A failed join's error (its dead member's) as an on_error record carries it."""
join_flush_ms = 200
"""A join's members that arrived are written to its file at most this long after:
a broker restarting in between reads them back from their queue groups instead."""
join_history_ms = 24 * 60 * 60 * 1000
"""An ended join is remembered (for `join(id)`, and against a second create of its id)
this long."""


# ------------------------------------------- the task worker (tasks/worker.py, tasks/ledger.py)
task_argument_depth_max = 100
"""A task's arguments nested deeper than this are refused at enqueue (and so is a list that
holds itself): the encoder would give up with a RecursionError (brook/tasks/arguments.py)."""
worker_release_ms_min = 250
"""A job naming a task this worker does not run (another worker's, `--tasks`) is given
back for about this long (jittered: worker_release_spread either way), doubling each time
the same worker meets it again..."""
worker_release_ms_max = 4_000
"""...up to this long: a job a worker keeps meeting waits at most about 6 s for one
that runs it, and one no worker runs costs one status entry every 2 to 6 s."""
worker_release_spread = 0.5
"""A release's pause is its base times 1 - this to 1 + this, at random: a pause in step
with the releasing worker's own long-polls handed the job back to it again and again."""
worker_releases_kept_max = 10_000
"""How many such jobs a worker remembers (the oldest forgotten first) to double their pause."""
worker_settle_tries_max = 8
"""A settle (ack, nack) the broker could not take is tried this many times, then given up:
the job's lease runs out and it runs again."""
worker_loop_failures_max = 10
"""A worker loop (feeding, settling, keeping leases) that failed this many times in a
row with an unexpected error makes the worker exit non-zero rather than hang on."""
worker_health_log_ms = 60_000
"""How often a worker logs its health (slots busy, jobs held, last lease)."""
worker_connect_timeout_ms_default = 60_000
"""How long a starting worker waits for its broker (`--connect-timeout`; 0: forever)."""
worker_child_start_ms_max = 60_000
"""How long a task's child process (isolation="process") may take to start and import
the task's module."""
worker_refused_skip_periods = 12
"""A key refused the topic looks again this many periods later (a key may be changed)."""
worker_jobs_held_per_slot = 4
"""Jobs held per slot on reserved room: one running, the rest leased and waiting."""
error_summary_frames = 5
"""How many frames of the task's own code (the innermost) an error summary names."""
worker_settle_batch_max = 500
"""Most finished jobs one ack call settles."""
worker_lanes_max = 4
worker_gather_s = 0.005
"""How long a feeder waits for more free room (while jobs run), and the settler for
more finished jobs, before one call for all of them."""
worker_gather_poll_s = 0.0005
"""How often a settler gathering a batch looks for more finished jobs."""
worker_feed_retry_s_max = 5.0
"""A feeder whose lease failed (the broker out of reach) tries again after at most this
long: a broker back after a restart gets its workers back within seconds."""
worker_idle_wake_s = 1.0
"""How long the deadline and lease loops sleep when nothing is held (a new job wakes them)."""


# ---------------------------------------------------------------- tasks (tasks/)
revocation_poll_ms = 1_000
"""How often a worker reads the revocations of running jobs (`app.revoke(ref,
terminate=True)`): a terminate takes effect within about this. Each look is a request
to the broker, from every worker process, for as long as it runs."""
revocation_retention_ms = 24 * 60 * 60 * 1000
"""A revocation is kept a day: a worker down longer has no run of it to stop."""
worker_announce_ms = 5_000
"""A worker writes what it is running (tasks-workers) this often; the dashboard takes one
silent for three times this as gone."""
worker_announcements_shown_max = 200
"""The dashboard's workers page reads at most this many workers' newest announcements."""
args_excerpt_chars = 120
"""A running job's arguments, as a worker announces them and the dashboard shows them."""
result_unclaimed_pause_s = 0.2
"""How often a wait looks again for a queue no worker has claimed yet (nothing on the
broker to long-poll: the group does not exist)."""
revocations_read_records = 1000
testing_lease_records = 100
"""Jobs leased at a time by `drain` (each run before the next lease)."""
testing_joins_idle_s = 10.0
"""How long `drain` waits at most for the broker's joins to take in the jobs run."""


# -------------------------------------------------- endpoints and delivery (SPEC §7; delivery/)
endpoint_timeout_ms_default = 15_000
endpoint_in_flight_default = 16
endpoint_max_attempts_default = 10
endpoint_lease_margin_ms = 10_000
"""A delivery group's visibility timeout is the endpoint's timeout and this: a record
leased ahead may wait this long for a free slot or its pacing and still be sent. (A
broker that died leaves leases behind; the next start ends them at once, see
Deliverer._release_leases.)"""
endpoint_expire_after_ms_default = 3 * 24 * 60 * 60 * 1000
"""A new endpoint's records that are not delivered within this long are dead (in its dead
letters, for a redrive); 0 sets no limit."""
endpoint_disable_after_ms_default = 5 * 24 * 60 * 60 * 1000
"""An endpoint none of whose attempts succeeded for this long is disabled (its records
wait); 0 never disables it. Counted from the first failure after a success, since start."""
endpoint_timeout_ms_min = 100
endpoint_timeout_ms_max = 5 * 60 * 1000
"""An endpoint's `timeout_ms` bounds: the longest one attempt may wait for an answer."""
endpoint_in_flight_max = 1024
"""The highest `max_in_flight` an endpoint may have."""
endpoint_rate_per_s_max = 100_000
"""The highest `rate_limit_per_s` an endpoint may have."""
endpoint_headers_max = 32
"""Static headers one endpoint may add to its requests."""
endpoint_header_chars_max = 4096
"""The longest value of one of those headers."""
endpoint_topics_max = 100
"""Topics or patterns one endpoint may name."""
endpoint_secret_bytes_min = 16
"""A secret whose key is shorter is refused (RFC 2104 asks for at least the hash's length;
16 bytes keeps compatibility with secrets made by other webhook services)."""
endpoint_secret_bytes_max = 64
endpoint_secret_chars_max = 200
"""A secret as text (its prefix and base64 key, or a whsk_ key pair)."""
endpoint_url_chars_max = 2_048
"""The longest endpoint URL."""
endpoint_secret_rotation_ms = 24 * 60 * 60 * 1000
"""After a secret changes, requests are signed with the old one too for this long."""
endpoint_secrets_retiring_max = 4
"""Old secrets that still sign, at most: past it the oldest stops at once, so rotations in a
loop (a portal user's clicks) never grow the webhook-signature header past what receivers
take (a signature is ~50 bytes; nginx's default header buffer is 8 KiB)."""
delivery_retry_after_ms_max = 60 * 60 * 1000
"""A receiver's Retry-After is honoured up to an hour (SPEC §7)."""
delivery_excerpt_bytes_max = 2048
"""The first bytes of an answer's body kept with the attempt (SPEC §7)."""
delivery_location_chars_max = 200
"""A redirect's Location is shown in the attempt's reason up to this many characters."""
delivery_allow_networks_max = 100
"""delivery_allow_networks names at most this many networks (each attempt checks them)."""
delivery_connections_max_default = 512
"""Most HTTP connections to receivers at once, over all endpoints (at most a quarter
of the process's descriptor limit)."""
delivery_origin_connections_max = 128
"""Most connections to one origin (scheme, host, port) at once, over its endpoints."""
delivery_origin_idle_s = 60.0
"""An origin no attempt used for this long has its connections closed."""
delivery_keepalive_s = 4.0
"""An idle connection older than this is closed rather than reused (receivers commonly
close idle connections after 5 s: a request on one they closed would fail)."""
delivery_drain_bytes_max = 64 * 1024
"""Past the excerpt, how much of an answer's body is read to keep its connection."""
delivery_location_bytes_max = 4096
"""A Location header is kept up to this long (the reason shows less of it)."""
event_id_search_read_records = 1_000
"""Records read at a time while looking for an event id."""
delivery_lease_records_max = 100
"""Most records one lease of one group takes."""
delivery_send_margin_ms = 1_000
"""A record is sent only while its lease outlives the answer's timeout by this much."""
delivery_connect_timeout_s_max = 10.0
delivery_resolver_threads = 8
delivery_sweep_s = 5.0
"""How often a round looks at every endpoint (a safety net: each is told when to look)."""
delivery_threads = 32
delivery_stop_wait_s = 5.0
"""On stop, attempts in flight get this long to finish; the rest are retried later."""
endpoint_secret_bytes_made = 32
"""A new secret's key length: as long as the HMAC's output (SHA-256)."""
endpoint_secret_distinct_bytes_min = 8
"""A key needs min(this, its length // 4) distinct byte values."""
delivery_stats_recent_attempts = 1000
"""Success rate and latency percentiles are over this many most recent attempts."""
delivery_stats_recent_shown = 25
"""Attempts kept whole (which record, how it went) for the dashboard."""
delivery_reconcile_topics = 4
"""New topics matched per pass of the reconciler: their groups are made in one call on
the writer role (appends wait for it), and an endpoint's change waits at most for one
pass (with 16, a PUT waited 2.2 s behind 48 groups on a busy, slow disk)."""
delivery_reconcile_idle_s = 60.0
"""The reconciler looks for new topics at least this often (it is woken by each)."""
delivery_worker_idle_check_s = 5.0
delivery_worker_guard_s = 15.0
"""Beyond an attempt's own timeout and connect timeout, how long the broker waits for
its worker before it counts the attempt as timed out (a worker that hangs)."""
delivery_worker_report_wait_s = 5.0
"""How long the log line about a worker that closed its connection waits for it to end
and tell its exit status (it is killed if it has not when the next one starts)."""


# ---------------------------------------------------------------- the lake (lake/)
lake_lag_ms_default = 60 * 1000
"""How long an active segment's acknowledged records may wait before they reach the lake."""
lake_lag_ms_max = 24 * 60 * 60 * 1000
lake_row_group_bytes = 64 * MIB
"""About this much (uncompressed) per Parquet row group: large runs for scans."""
lake_small_file_bytes = 16 * MIB
"""A lake file under this is small: merged with its neighbours (below)."""
lake_merge_files = 8
"""This many consecutive small files of a partition are merged into one."""
lake_retire_ms = 60 * 60 * 1000
"""A file the manifest stopped naming (merged, or past retention) is deleted this much
later, so a reader planned on the older manifest finishes."""
lake_watch_views_max = 256
"""Views of logs `brook lake status` keeps between calls (the most recently asked): a
dashboard's pages cost no re-reading, and thousands of topics no memory each."""
lake_claims_max = 5
"""Tries at claiming a manifest that a fenced broker keeps replacing meanwhile."""


# ---------------------------------------------- operations (health, metrics, dashboard, portal)
health_isolated_max = 100
"""/v1/health lists at most this many failing subjects (and counts them all)."""
metrics_endpoints_shown_max = 150
"""/metrics gives series of their own (brook_delivery_*{endpoint}) to at most this many
endpoints: the failing ones first, then those chosen (`metrics_endpoints`), each by
name. Every endpoint counts in the aggregates, so a mass failure cannot blow up a scrape:
about 24 lines an endpoint, a scrape stays under 5,000 lines (benchmarks/metrics.py)."""
metrics_endpoint_groups_shown_max = 100
"""Of those endpoints' queue groups, /metrics gives brook_queue_* series (7 lines each)
to at most this many, the failing endpoints' first: an endpoint on hundreds of topics
cannot blow up a scrape either."""
dashboard_form_bytes_max = 64 * KIB
"""A form posted to the dashboard is at most this large."""
dashboard_session_ms = 12 * 60 * 60 * 1000
"""How long a login to the dashboard lasts."""
portal_ttl_s_default = 60 * 60
portal_ttl_s_min = 60
portal_ttl_s_max = 7 * 24 * 60 * 60
"""A customer's portal link is good for an hour unless asked otherwise, a week at most."""
dashboard_rate_samples = 13
"""Samples of every topic's end offsets kept for the append-rate sparkline: one
per dashboard_rate_every_s, so the sparkline covers the last minute."""
dashboard_rate_every_s = 5.0
dashboard_value_chars_shown = 300
"""Characters of a record's value shown in the browser (the rest is cut)."""
dashboard_records_per_page = 50
dashboard_key_scan_records_max = 20_000
"""Records one page of the key filter looks through at most, newest first: a page
finds a key's records near the end at once and costs the same deep in the log;
the "older" link goes on from where the scan stopped (keyset paging over the scan)."""
dashboard_key_scan_chunk_records = 2_000
dashboard_topics_per_page = 100
"""Topics the overview shows at once: at a topic per customer and event type, all of
them made a page of megabytes, 0.3 s to render at 5,000, refreshed every 5 s."""
dashboard_dead_per_page = 50
dashboard_errors_shown_max = 50
dashboard_endpoints_per_page = 100
dashboard_timers_per_page = 50
dashboard_groups_listed_s = 30.0
"""How long a listing of the stored stream groups is used (on S3 a listing is a request)."""
s3_usd_per_gb_month = 0.023
"""US dollars per GB stored for a month (S3 Standard, first 50 TB, us-east-1)."""
dashboard_announcements_read_back = 2_000
"""Announcements read back from the end of each partition: with workers announcing every
five seconds, minutes of history for dozens of workers."""
doctor_free_bytes_min = 1 << 30
"""Less free space than this (or 5%) is worth a warning: a full disk stops appends."""
doctor_clock_skew_warn_s = 2.0
doctor_clock_skew_fail_s = 10.0
"""Leases and timers compare this machine's clock with others': beyond this much
apart, a take-over waits wrongly and timers fire early or late."""


# ---------------------------------------------------------------- relations
# What the limits must hold to one another, checked when Brook is imported: a change
# that breaks one fails at once, not in a user's broker under load.
_RELATIONS = (
    (record_bytes_max_default <= record_bytes_max_ceiling, "default record within the ceiling"),
    (record_bytes_max_ceiling <= batch_bytes_format_max // 2, "a largest record fits a batch"),
    (record_bytes_max_default <= request_bytes_max, "a default record fits a default request"),
    (batch_bytes_max_default <= batch_bytes_format_max // 2, "a batch fits the format"),
    (request_bytes_min <= request_bytes_max <= inflight_bytes_max_default, "request bounds"),
    (0 <= linger_ms_default <= linger_ms_max, "linger within its bound"),
    (lease_ms_min <= lease_ms_default <= lease_ms_max, "lease within its bounds"),
    (http_timeout_s_min <= min(header_timeout_s_default, body_timeout_s_default), "timeouts"),
    (queue_lease_records_max <= read_records_max, "a lease fits a read"),
    (poll_records_default <= read_records_max, "a default poll fits a read"),
    (read_records_default <= read_records_max, "a default read is not capped"),
    (lease_records_default <= queue_lease_records_max, "a default lease is not capped"),
    (background_retry_ms_min < background_retry_ms_max, "background retry bounds"),
    (timer_id_chars_max + 17 <= idempotency_key_bytes_max, "a join's append key fits"),
    (joins_per_call_max <= schedule_timers_max, "a call's joins fit a timer call"),
    (child_restart_ms_min < child_restart_ms_max, "child restart bounds"),
    (endpoint_timeout_ms_min < endpoint_timeout_ms_max, "endpoint timeout bounds"),
    (open_files_min <= open_files_raise_max, "open files bounds"),
    (wal_file_bytes_max < wal_bytes_max_default, "several WAL files before a checkpoint waits"),
    (0 < checkpoint_wal_bytes_share < 1, "a checkpoint begins before rounds wait for one"),
    (0 < checkpoint_dirty_files_share < 1, "a checkpoint begins within the open-files budget"),
    (0 < checkpoint_interval_ms_default <= 60_000, "a checkpoint at least every minute"),
    (
        checkpoint_interval_ms_min <= checkpoint_interval_ms_default <= checkpoint_interval_ms_max,
        "checkpoint interval within its bounds",
    ),
    (wal_bytes_max_min <= wal_bytes_max_default, "WAL bound within its bounds"),
    (timer_flush_timers <= timer_unflushed_max, "timers flush before scheduling waits"),
    (staging_publish_bytes_in_flight <= commit_queue_bytes_max, "a publish fits the queue"),
    (delivery_origin_connections_max <= delivery_connections_max_default, "origin share"),
    (endpoint_secret_bytes_min <= endpoint_secret_bytes_max, "secret bounds"),
    (delivery_excerpt_bytes_max <= queue_reason_chars_max, "an excerpt fits a status entry"),
    (visibility_timeout_ms_default <= visibility_timeout_ms_max, "default lease within bound"),
    (backoff_min_ms_default <= backoff_max_ms_default, "default backoff bounds"),
    (0 <= backoff_jitter_default < 1, "jitter takes off less than the whole delay"),
    (0 <= worker_release_spread < 1, "a release's pause is never nothing"),
    (worker_release_ms_min < worker_release_ms_max, "release pause bounds"),
    (client_resend_ms_min <= client_resend_ms_max, "client resend bounds"),
    (client_retry_after_s_min <= client_retry_after_s_max, "client Retry-After bounds"),
    (sink_outage_pause_ms_max < sink_outage_wait_ms_default, "the sink tries more than once"),
    (sink_chunk_bytes <= append_bytes_max, "a sink's chunk is one append"),
    (
        endpoint_timeout_ms_min <= endpoint_timeout_ms_default <= endpoint_timeout_ms_max,
        "default endpoint timeout within its bounds",
    ),
    (endpoint_in_flight_default <= endpoint_in_flight_max, "default in-flight within bound"),
    (delivery_lease_records_max <= queue_lease_records_max, "a delivery lease is a lease"),
    (
        max(
            dashboard_records_per_page,
            dashboard_key_scan_chunk_records,
            dashboard_announcements_read_back,
            revocations_read_records,
            event_id_search_read_records,
            queue_read_ahead_records,
        )
        <= read_records_max,
        "each look is one read",
    ),
    (dashboard_key_scan_chunk_records <= dashboard_key_scan_records_max, "a scan's chunks"),
    (doctor_clock_skew_warn_s < doctor_clock_skew_fail_s, "clock skew: a warning first"),
    (worker_gather_poll_s < worker_gather_s, "a settler looks several times while gathering"),
    (lake_lag_ms_default <= lake_lag_ms_max, "lake lag within its bound"),
    (lake_small_file_bytes <= lake_row_group_bytes, "a small lake file is under a row group"),
    (lake_merge_files >= 2, "merging joins files"),
    (join_flush_ms < timer_flush_ms, "joins are written sooner than timers"),
)
_broken = [what for holds, what in _RELATIONS if not holds]
if _broken:
    raise ImportError(f"brook.limits do not hold together: {', '.join(_broken)}")
