"""The lease rules of a bucket prefix (storage/s3/lease.py): pure, so checked exhaustively."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from brook.storage.s3 import lease as ls

leases = st.builds(
    ls.Lease,
    owner=st.sampled_from(["a" * 32, "b" * 32]),
    host=st.just("vm"),
    pid=st.integers(1, 10**6),
    renewed_ms=st.integers(0, 10**13),
    lease_ms=st.integers(ls.lease_ms_min, 10**6),
    released=st.booleans(),
)


@given(leases, st.integers(-(10**6), 10**6))
def test_a_lease_is_live_exactly_until_it_runs_out_unless_released(
    lease: ls.Lease, offset: int
) -> None:
    now = lease.renewed_ms + offset
    live = ls.is_live(lease, now)
    assert live == (not lease.released and offset < lease.lease_ms)
    assert ls.remaining_ms(lease, now) == max(0, lease.lease_ms - offset)
    if live:
        assert ls.remaining_ms(lease, now) > 0


def test_no_lease_is_never_live() -> None:
    assert not ls.is_live(None, 0)


@given(leases, st.integers(1, 10**6))
def test_only_the_same_owner_writing_again_counts_as_a_renewal(lease: ls.Lease, later: int) -> None:
    renewed = ls.Lease(lease.owner, lease.host, lease.pid, lease.renewed_ms + later, lease.lease_ms)
    other = ls.Lease("c" * 32, lease.host, lease.pid, lease.renewed_ms + later, lease.lease_ms)
    assert ls.renewed_by(lease, renewed)
    assert not ls.renewed_by(lease, other)
    assert not ls.renewed_by(lease, lease)
    assert not ls.renewed_by(None, renewed)


@given(st.integers(ls.lease_ms_min, 10**7))
def test_an_owner_renews_at_least_twice_per_lease(lease_ms: int) -> None:
    assert 0 < ls.renew_interval_ms(lease_ms) * 2 <= lease_ms


@given(st.integers(0, 100), st.integers(0, 100))
def test_only_a_claim_for_a_newer_epoch_by_another_broker_pauses_the_owner(
    claimed: int, own: int
) -> None:
    claim = ls.Claim(claimed, "b" * 32, 0)
    assert ls.pauses(claim, own, "a" * 32) == (claimed > own)
    assert not ls.pauses(claim, own, "b" * 32)


def test_claims_round_trip_and_garbage_is_no_claim() -> None:
    claim = ls.Claim(7, "a" * 32, 123)
    assert ls.decode_claim(ls.encode_claim(claim)) == claim
    assert ls.decode_claim(b"not json") is None
    assert ls.decode_claim(b'{"epoch": "x"}') is None
