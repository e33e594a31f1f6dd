"""Who owns a bucket prefix, and for how long: the lease and the take-over claim. Pure.

The owner of a prefix keeps a `Lease` in the manifest and renews it by writing
the manifest (If-Match) at least every `renew_interval_ms`; every catalog
change renews it too. A lease that is not renewed within `lease_ms` has
expired: its owner crashed or was cut off, and the next broker takes the
prefix without being asked to. A renewal is one manifest PUT: with the default
lease, about 17,000 a day for an idle broker (under $0.10 a day at S3's list
price); a busy broker renews by its own catalog changes. A live lease is taken only on purpose
(`take_over=True`, `brook serve --take-over`).

The lease is about operators, not correctness: what keeps two writers from
both being believed is the writer epoch and the fences (s3/__init__.py), which
hold whatever the clocks say. A clock that is far off can only make a live
lease look expired (an unwanted take-over, which fences the old owner cleanly)
or an expired one look live (a wait).

A broker taking over a live owner that keeps changing the manifest could lose
the race for it forever (its read-then-write window overlaps the owner's
writes). So it first writes a `Claim`: the owner, seeing a claim for a newer
epoch, pauses its catalog changes for a moment, the newcomer wins, and the
owner's next change finds it has been fenced.
"""

from __future__ import annotations

import msgspec

from brook import limits

CLAIM_KEY = "takeover.json"
"""Where a broker taking a live prefix over announces itself."""

lease_ms_default = limits.lease_ms_default
lease_ms_min = limits.lease_ms_min


class Lease(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    owner: str
    """A random id of one broker's run (not of the machine)."""
    host: str
    pid: int
    renewed_ms: int
    """The owner's clock when it last wrote the manifest (ms since the epoch)."""
    lease_ms: int
    released: bool = False
    """Set by an owner that closed cleanly: the next broker need not wait."""


class Claim(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    epoch: int
    """The epoch the claimer is about to write; an owner of an older epoch pauses."""
    owner: str
    at_ms: int


def renew_interval_ms(lease_ms: int) -> int:
    """How often an owner renews: twice per lease, so one failed renewal (retried at
    the next look, a quarter lease later) does not let it run out."""
    return max(1, lease_ms // 2)


def is_live(lease: Lease | None, now_ms: int) -> bool:
    """Whether `lease` still holds at `now_ms`: not released and not run out."""
    return lease is not None and not lease.released and now_ms < lease.renewed_ms + lease.lease_ms


def remaining_ms(lease: Lease, now_ms: int) -> int:
    """How long until `lease` runs out (0 once it has)."""
    return max(0, lease.renewed_ms + lease.lease_ms - now_ms)


def describe(lease: Lease, now_ms: int) -> str:
    """The owner, for people: which broker, and how fresh its lease is."""
    age_s = max(0, now_ms - lease.renewed_ms) / 1000
    return (
        f"broker {lease.owner[:8]} on {lease.host} (pid {lease.pid}), "
        f"lease renewed {age_s:.1f} s ago, runs out in {remaining_ms(lease, now_ms) / 1000:.1f} s"
    )


def renewed_by(before: Lease | None, after: Lease | None) -> bool:
    """Whether the owner of `before` wrote again (so it is alive): same owner, newer renewal."""
    return (
        before is not None
        and after is not None
        and after.owner == before.owner
        and after.renewed_ms != before.renewed_ms
        and not after.released
    )


def pauses(claim: Claim, own_epoch: int, own_id: str) -> bool:
    """Whether an owner of `own_epoch` should pause its catalog changes for `claim`."""
    return claim.epoch > own_epoch and claim.owner != own_id


_decode_claim = msgspec.json.Decoder(Claim).decode


def encode_claim(claim: Claim) -> bytes:
    return msgspec.json.encode(claim)


def decode_claim(raw: bytes) -> Claim | None:
    """The claim in `raw`, or None when it is not one (a claim is only a hint)."""
    try:
        return _decode_claim(raw)
    except msgspec.DecodeError:
        return None
