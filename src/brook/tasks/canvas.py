"""Signatures and the canvas: `chain`, `group`, `chord`, with every join counted in
the broker (brook/joins), durably (docs/TASKS.md, "Canvas").

A signature is a task call not made yet. Enqueuing a canvas appends the jobs that
can start now and makes one broker join for each job that must wait: a join names
the jobs it waits for and the record it appends once they are all acked, with
their results in its headers. So a chain `a | b | c` appends `a` and makes two
joins: "after a, append b" and "after b, append c". A chord appends its group and
makes one join of them all for its callback. Nothing waits in a client or a
worker: a worker or broker killed at any moment neither loses a link nor runs one
twice (the broker appends a join's record once: its idempotency key names the join).

Results pass as Celery passes them: a task after one task gets its result as its
first argument; a task after a group gets the list of the group's results; a
signature made with `si(...)` (immutable) gets neither. A dead job fails every
join after it: the chain's (or chord's) reference then ends dead with that job's
error, and `on_error`, if given, runs once with (failed job's reference, error).
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from brook import join_headers, names
from brook.errors import BadRequest
from brook.models import JoinContinuation, JoinMember, JoinSpec, Record
from brook.tasks.calls import check_task_name, job_record
from brook.tasks.refs import NO_OPTIONS

if TYPE_CHECKING:
    from brook.tasks.app import App
    from brook.tasks.refs import EnqueueOptions, JobRef

GROUP = "tasks"
Passing = Literal["one", "list", "none"]


class Signature:
    """A task call not made yet: `task.s(*args, **kwargs)` (or `task.si(...)`, which
    takes no result from the job before it in a canvas), `app.signature(name, ...)`
    for a task this process does not import. `sig.options(key=..., priority=...,
    delay_ms=..., eta=...)` gives it enqueue options; `sig.enqueue()` enqueues it
    alone; `sig | other` chains. `to_dict()` / `app.signature_from(d)` carry it as
    JSON (to store, or pass as a task's argument)."""

    __slots__ = ("app", "args", "immutable", "kwargs", "opts", "task", "topic")

    def __init__(
        self,
        app: App,
        task: str,
        topic: str,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        opts: EnqueueOptions,
        immutable: bool = False,
    ) -> None:
        self.app = app
        self.task = task
        self.topic = topic
        self.args = tuple(args)
        self.kwargs = dict(kwargs)
        self.opts = opts
        self.immutable = immutable

    def __repr__(self) -> str:
        shown = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.task}.{'si' if self.immutable else 's'}({', '.join(shown)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Signature) and self.to_dict() == other.to_dict()

    __hash__ = None  # type: ignore[assignment]

    def options(self, **changes: Any) -> Signature:
        """This signature with enqueue options changed (key, priority, delay_ms, eta,
        idempotency_key: as `task.options`)."""
        from brook.tasks.refs import OPTIONS, EnqueueOptions

        unknown = sorted(set(changes) - set(OPTIONS))
        if unknown:
            raise BadRequest(f"unknown enqueue option {unknown[0]!r}: the options are {OPTIONS}")
        merged = {**msgspec.structs.asdict(self.opts), **changes}
        opts = EnqueueOptions(**merged).checked()
        return Signature(
            self.app, self.task, self.topic, self.args, self.kwargs, opts, self.immutable
        )

    def enqueue(self) -> JobRef:
        """Enqueue this call alone (as `task.options(...).enqueue(...)`)."""
        return self.app._append_signature(self)

    def __or__(self, other: Node) -> Chain:
        return chain(self, other)

    def to_dict(self) -> dict[str, Any]:
        """The signature as JSON values (`app.signature_from` reads it back)."""
        opts = {k: v for k, v in msgspec.structs.asdict(self.opts).items() if v is not None}
        if "eta" in opts:
            opts["eta"] = opts["eta"].isoformat()
        if isinstance(opts.get("key"), bytes):
            raise BadRequest("a signature with a bytes key has no JSON form: give a str key")
        return {
            "task": self.task,
            "queue": self.topic,
            "args": list(self.args),
            "kwargs": self.kwargs,
            "options": opts,
            "immutable": self.immutable,
        }


class Chain:
    """Jobs one after another: each enqueued (by the broker) once the one before is
    acked, given its result. `enqueue()` → the last job's JobRef."""

    nodes: list[Node]
    on_error: Signature | None

    def __init__(self, nodes: Sequence[Node], on_error: Signature | None = None) -> None:
        flat: list[Node] = []
        for node in nodes:
            flat.extend(node.nodes if isinstance(node, Chain) and node.on_error is None else [node])
        if not flat:
            raise BadRequest("a chain needs at least one signature")
        for node in flat:
            _check_node(node)
        self.nodes = flat
        self.on_error = _check_errback(on_error)

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.nodes))

    def __or__(self, other: Node) -> Chain:
        return chain(self, other)

    def enqueue(self) -> JobRef:
        ref = _Enqueuing(_app_of(self)).run(self, self.on_error, False)
        assert not isinstance(ref, GroupRef)
        return ref


class Group:
    """Jobs side by side. `enqueue()` → a GroupRef (`.refs` in order); followed by a
    task in a chain (or as a chord), that task gets the list of their results."""

    def __init__(self, members: Sequence[Node]) -> None:
        if not members:
            raise BadRequest("a group needs at least one signature")
        for member in members:
            _check_node(member)
            if isinstance(member, Group | Chord):
                raise BadRequest(
                    "a group's members are signatures or chains (a group in a group: list "
                    "its members in one group)"
                )
        self.members = list(members)

    def __repr__(self) -> str:
        return f"group({', '.join(map(repr, self.members))})"

    def __or__(self, other: Node) -> Chain:
        return chain(self, other)

    def enqueue(self) -> GroupRef:
        ref = _Enqueuing(_app_of(self)).run(self, None, False)
        assert isinstance(ref, GroupRef)
        return ref


class Chord:
    """A group and a callback run once, with the list of the group's results in
    order, after every member is acked. `enqueue()` → the callback's JobRef."""

    def __init__(
        self,
        header: Group | Sequence[Node],
        body: Signature,
        on_error: Signature | None = None,
        allow_failures: bool = False,
    ) -> None:
        self.header = header if isinstance(header, Group) else Group(list(header))
        if not isinstance(body, Signature):
            raise BadRequest(f"a chord's callback is a signature, not {type(body).__name__}")
        self.body = body
        self.on_error = _check_errback(on_error)
        self.allow_failures = bool(allow_failures)

    def __repr__(self) -> str:
        return f"chord({self.header!r}, {self.body!r})"

    def __or__(self, other: Node) -> Chain:
        return chain(self, other)

    def enqueue(self) -> JobRef:
        ref = _Enqueuing(_app_of(self)).run(self, self.on_error, self.allow_failures)
        assert not isinstance(ref, GroupRef)
        return ref


Node = Signature | Chain | Group | Chord


class GroupRef:
    """The jobs of an enqueued group, in order (`refs`); `app.result(group_ref)`
    gives the list of their results."""

    def __init__(self, refs: Sequence[JobRef]) -> None:
        self.refs = tuple(refs)

    def __iter__(self) -> Iterator[JobRef]:
        return iter(self.refs)

    def __len__(self) -> int:
        return len(self.refs)

    def __getitem__(self, index: int) -> JobRef:
        return self.refs[index]

    def __repr__(self) -> str:
        return f"GroupRef({[str(r) for r in self.refs]})"


def chain(*nodes: Node, on_error: Signature | None = None) -> Chain:
    """`brook.chain(a.s(1), b.s(), c.s())`: a, then b(a's result), then c(b's)."""
    return Chain(nodes, on_error)


def group(*members: Node | Iterable[Node]) -> Group:
    """`brook.group(a.s(1), a.s(2))`, or `brook.group(a.s(i) for i in range(10))`."""
    if len(members) == 1 and not isinstance(members[0], Signature | Chain | Group | Chord):
        return Group(list(members[0]))
    return Group(list(members))  # type: ignore[arg-type]


def chord(
    header: Group | Iterable[Node],
    body: Signature,
    *,
    on_error: Signature | None = None,
    allow_failures: bool = False,
) -> Chord:
    """`brook.chord(brook.group(...), callback.s())`: the callback runs once with the
    list of results, after every member is acked. A dead member: the callback does
    not run and its reference ends dead naming the member, unless `allow_failures`
    (the callback then gets a brook.TaskFailed in that member's place)."""
    if not isinstance(header, Group):
        header = Group(list(header))
    return Chord(header, body, on_error, allow_failures)


# ---------------------------------------------------------------- enqueuing


_Join = tuple[str, list["_End"], Signature | None, Passing, bool, Signature | None]
"""A join to make: (id, what it waits for, what it appends, how that takes the
results, whether failures are allowed, its on_error)."""


class _Enqueuing:
    """One canvas being enqueued: the jobs that start now are appended first (their
    positions are the first joins' members), then every join is made in one call.
    A join's id is this enqueue's id and a number, so a create sent twice (the
    client resends a lost answer) makes each join once."""

    def __init__(self, app: App) -> None:
        self.app = app
        self.base = uuid.uuid4().hex
        self.now: list[Signature] = []
        self.joins: list[
            tuple[str, list[_End], Signature | None, Passing, bool, Signature | None]
        ] = []

    def run(
        self, node: Node, on_error: Signature | None, allow_failures: bool
    ) -> JobRef | GroupRef:
        ends, _ = self._walk(node, None, "none", allow_failures)
        if on_error is not None:
            # A join with no continuation that watches the last jobs: whichever job
            # dies first, before or at the end, fails it, and its on_error runs once.
            self.joins.append((self._id(), ends, None, "none", False, on_error))
        # Every call is checked (and every record made) before anything is appended:
        # a canvas refused leaves nothing behind.
        records = [self._records_of(j) for j in self.joins]
        for sig in self.now:
            check_signature(self.app, sig)
        placed = self._append_now()
        specs = [self._spec(j, r, placed) for j, r in zip(self.joins, records, strict=True)]
        if specs:
            self.app.broker.create_joins(specs)
        refs = [self._ref(end, placed) for end in ends]
        if isinstance(node, Group):
            return GroupRef(refs)
        return refs[0]

    def _id(self) -> str:
        return f"{self.base}.{len(self.joins)}"

    def _walk(
        self, node: Node, after: list[_End] | None, passing: Passing, allow_failures: bool = False
    ) -> tuple[list[_End], Passing]:
        """The ends of `node` (what a job after it waits for) and how that job takes
        their results; `after`: what `node`'s first jobs wait for (None: nothing)."""
        if isinstance(node, Signature):
            if after is None:
                self.now.append(node)
                return [_End(node.topic, now=len(self.now) - 1)], "one"
            join_id = self._id()
            how: Passing = "none" if node.immutable else passing
            self.joins.append((join_id, after, node, how, allow_failures, None))
            return [_End(node.topic, join=join_id)], "one"
        if isinstance(node, Group):
            ends: list[_End] = []
            for member in node.members:
                ends.extend(self._walk(member, after, passing)[0])
            return ends, "list"
        if isinstance(node, Chord):
            header, _ = self._walk(node.header, after, passing)
            return self._walk(node.body, header, "list", node.allow_failures)
        ends_now, how_now = after, passing
        for index, link in enumerate(node.nodes):
            last = index == len(node.nodes) - 1
            ends_now, how_now = self._walk(
                link, ends_now, how_now, allow_failures if last else False
            )
        assert ends_now is not None
        return ends_now, how_now

    def _append_now(self) -> list[tuple[int, int]]:
        """Append the jobs that start now, in order, a call per topic run."""
        placed: list[tuple[int, int]] = []
        index = 0
        while index < len(self.now):
            topic = self.now[index].topic
            run = []
            while index < len(self.now) and self.now[index].topic == topic:
                run.append(self.now[index])
                index += 1
            placed.extend(self.app._append_signatures(topic, run))
        return placed

    def _records_of(self, join: _Join) -> tuple[JoinContinuation | None, JoinContinuation | None]:
        """The join's continuation and on_error records, their calls checked."""
        _, _, then, passing, _, on_error = join
        return (
            None if then is None else self._continuation(then, passing),
            None if on_error is None else self._continuation(on_error, "error"),
        )

    @staticmethod
    def _spec(
        join: _Join,
        records: tuple[JoinContinuation | None, JoinContinuation | None],
        placed: list[tuple[int, int]],
    ) -> JoinSpec:
        join_id, after, _, _, allow_failures, _ = join
        return JoinSpec(
            id=join_id,
            members=[end.member(placed) for end in after],
            then=records[0],
            on_error=records[1],
            allow_failures=allow_failures,
        )

    def _continuation(self, sig: Signature, passing: str) -> JoinContinuation:
        record = signature_record(self.app, sig, passing)
        return JoinContinuation(
            topic=sig.topic, group=GROUP, value=record.value, key=record.key, headers=record.headers
        )

    @staticmethod
    def _ref(end: _End, placed: list[tuple[int, int]]) -> JobRef:
        from brook.tasks.refs import JobRef

        if end.join is not None:
            return JobRef(end.topic, -1, -1, end.join)
        assert end.now is not None
        partition, offset = placed[end.now]
        return JobRef(end.topic, partition, offset)


class _End(msgspec.Struct, frozen=True):
    """What a job after a node waits for: a job appended now (its index in `now`) or
    a join's continuation."""

    topic: str
    now: int | None = None
    join: str | None = None

    def member(self, placed: list[tuple[int, int]]) -> JoinMember:
        if self.join is not None:
            return JoinMember(topic=self.topic, group=GROUP, join=self.join)
        assert self.now is not None
        partition, offset = placed[self.now]
        return JoinMember(topic=self.topic, group=GROUP, partition=partition, offset=offset)


def continuation_headers(record: Record, passing: str) -> Record:
    """A job's record as a join's continuation: how it takes the results before it."""
    headers = dict(record.headers or {})
    if passing != "error":
        headers[join_headers.PASS] = passing.encode()
    return Record(record.value, record.key, headers)


def placeholders(passing: str) -> tuple[Any, ...]:
    """Stand-ins for the arguments a join passes, to check a call's shape before it
    is made (their values come at run time)."""
    if passing == "error":
        return ("topic/0/0", "error")
    return () if passing == "none" else (None,)


def _check_node(node: object) -> None:
    if not isinstance(node, Signature | Chain | Group | Chord):
        raise BadRequest(
            f"a canvas is made of signatures (task.s(...)), chains, groups and chords, "
            f"not {type(node).__name__}"
        )


def _check_errback(on_error: Signature | None) -> Signature | None:
    if on_error is not None and not isinstance(on_error, Signature):
        raise BadRequest(f"on_error is a signature (task.s(...)), not {type(on_error).__name__}")
    return on_error


def _app_of(node: Node) -> App:
    """The app of a canvas's first signature (every signature names its app)."""
    while not isinstance(node, Signature):
        if isinstance(node, Chain):
            node = node.nodes[0]
        elif isinstance(node, Group):
            node = node.members[0]
        else:
            node = node.header.members[0]
    return node.app


def signature_from(app: App, given: dict[str, Any]) -> Signature:
    """A signature from its JSON form (`Signature.to_dict()`), on `app`."""
    if not isinstance(given, dict) or not isinstance(given.get("task"), str):
        raise BadRequest('a signature is a dict with "task", "args", "kwargs", "options"')
    name = given["task"]
    check_task_name(name)
    topic = given.get("queue") or app._topic_of(name)
    if not isinstance(topic, str) or not names.NAME.fullmatch(topic):
        raise BadRequest(f"queue {topic!r} is not a valid topic name")
    args, kwargs = given.get("args") or [], given.get("kwargs") or {}
    if not isinstance(args, list | tuple) or not isinstance(kwargs, dict):
        raise BadRequest("a signature's args is a list and its kwargs a dict")
    opts = dict(given.get("options") or {})
    if isinstance(opts.get("eta"), str):
        try:
            opts["eta"] = datetime.datetime.fromisoformat(opts["eta"])
        except ValueError:
            raise BadRequest(f"eta {opts['eta']!r} is not an ISO 8601 time") from None
    sig = Signature(app, name, topic, args, kwargs, NO_OPTIONS, bool(given.get("immutable")))
    return sig.options(**opts) if opts else sig


def signature_record(app: App, sig: Signature, passing: str) -> Record:
    """The record of a signature's job, as a join appends it (`passing`: how it
    takes the results before it), its call checked against what it will get."""
    args = placeholders(passing) + sig.args
    declared = app.tasks.get(sig.task)
    if declared is not None:
        declared.check_call(args, sig.kwargs)
    record = job_record(sig.task, sig.args, sig.kwargs, sig.opts)
    if sig.opts.idempotency_key is not None:
        raise BadRequest(
            f"{sig!r}: a job a join enqueues is enqueued once already; it takes no idempotency_key"
        )
    return continuation_headers(record, passing)


def check_signature(app: App, sig: Signature) -> None:
    """A signature's call checked as its enqueue would check it (BadRequest)."""
    declared = app.tasks.get(sig.task)
    if declared is not None:
        declared.check_call(sig.args, sig.kwargs)
    job_record(sig.task, sig.args, sig.kwargs, sig.opts)  # JSON arguments
