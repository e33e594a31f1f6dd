"""Owning a bucket prefix: taking it, keeping it, letting it go (SPEC §0).

The rules are pure, in lease.py; this is their I/O for one S3Storage. Taking
the prefix raises the writer epoch in the manifest and takes the lease with
one conditional write; keeping it renews the lease on a thread of its own
(unless catalog changes renew it anyway) and watches for a claim while the
catalog is busy; a clean close releases it, so the next broker need not wait.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from brook import limits
from brook.errors import Fenced, Locked, StorageError
from brook.storage.s3 import lease as ls
from brook.storage.s3 import manifest as m
from brook.storage.s3.objects import Changed, Exists

if TYPE_CHECKING:
    from brook.storage.s3 import S3Storage

log = logging.getLogger("brook.storage.s3")


def unchanged(files: dict[str, m.Entry]) -> None:
    """The edit of a manifest write that only renews (or releases) the lease."""


class Ownership:
    """The lease of one broker on one prefix, from taking it to letting it go."""

    def __init__(
        self,
        storage: S3Storage,
        take_over: bool,
        wait_for_lease: bool,
        lease_ms: int,
        clock: Callable[[], float],
    ) -> None:
        self._storage = storage
        self.take_over = take_over
        self.wait_for_lease = wait_for_lease
        self.lease_ms = lease_ms
        self._clock = clock
        self.id = uuid.uuid4().hex
        """Names this broker's run in the lease, its claims and its probe object."""
        self._renewed = 0.0
        """When (monotonic) the manifest was last written, renewing the lease."""
        self._changes = 0
        """Catalog changes since the keeper last looked for a claim."""
        self._paused_until = 0.0
        """Catalog changes wait until then (monotonic): a newer broker is taking over."""
        self._seen_claim: ls.Claim | None = None
        self._stopping = threading.Event()
        self._keeper: threading.Thread | None = None
        self.took_released = False
        """Whether the prefix was free when taken: new, or released by an owner that closed."""

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def lease(self, released: bool = False) -> ls.Lease:
        """This broker's lease as of now, to write with the manifest."""
        return ls.Lease(
            self.id, socket.gethostname(), os.getpid(), self._now_ms(), self.lease_ms, released
        )

    # ------------------------------------------------------------ taking

    def take(self) -> tuple[m.Manifest, str]:
        """Raise the epoch and take the lease (If-Match), or create the manifest; returns
        the manifest as written and its ETag. Raises Locked while another broker's lease
        is live (unless take_over; waited out with wait_for_lease unless it is renewed),
        StorageError."""
        bucket = self._storage.bucket
        deadline = time.monotonic() + limits.take_over_s_max
        watched: ls.Lease | None = None
        claimed = False
        while True:
            found = bucket.get(m.MANIFEST_KEY)
            current = None if found is None else _decode(bucket.url, found[0])
            self.took_released = current is None or current.lease is None or current.lease.released
            if current is not None and current.lease is not None:
                if current.lease.owner == self.id:
                    assert found is not None
                    return current, found[1]  # our own write landed, its answer was lost
                now = self._now_ms()
                live = ls.is_live(current.lease, now)
                if live and not self.take_over:
                    watched = self._wait_or_refuse(current.lease, watched, now)
                    continue
                if live and not claimed:
                    claim = ls.Claim(current.epoch + 1, self.id, now)
                    bucket.put(ls.CLAIM_KEY, ls.encode_claim(claim))
                    claimed = True
            try:
                if found is None or current is None:
                    fresh = m.Manifest(epoch=1, lease=self.lease())
                    return fresh, bucket.create(m.MANIFEST_KEY, m.encode(fresh))
                bumped = m.Manifest(current.version, current.epoch + 1, current.files, self.lease())
                return bumped, bucket.replace(m.MANIFEST_KEY, m.encode(bumped), found[1])
            except (Exists, Changed, StorageError) as exc:
                # Exists, Changed: another broker wrote meanwhile. StorageError: maybe ours
                # landed (the next read tells). Either way, read again, within the deadline.
                if time.monotonic() > deadline:
                    raise StorageError(
                        f"{bucket.url}: could not take the prefix over in "
                        f"{limits.take_over_s_max:.0f} s: {exc}"
                    ) from None
                time.sleep(random.uniform(0.005, 0.05))

    def _wait_or_refuse(self, lease: ls.Lease, watched: ls.Lease | None, now: int) -> ls.Lease:
        """Wait a step for a live lease to run out, or raise Locked: when not waiting, or
        when it changed while we waited (its owner is alive). Returns the lease watched."""
        url = self._storage.bucket.url
        renewing = watched is not None and lease != watched
        if not self.wait_for_lease or renewing:
            alive = " and is renewing it" if renewing else ""
            raise Locked(
                f"{url} is in use by {ls.describe(lease, now)}{alive}; stop that broker, "
                "or take the prefix over on purpose with take_over=True (brook serve --take-over)"
            )
        if watched is None:
            log.warning(
                "%s is held by %s: waiting for its lease to run out (it is not renewed by "
                "a broker that crashed); --take-over takes it now",
                url,
                ls.describe(lease, now),
            )
        time.sleep(min(limits.lease_wait_step_s, ls.remaining_ms(lease, now) / 1000))
        return lease

    # ------------------------------------------------------------ keeping

    def start_keeping(self) -> None:
        """Renew the lease from now on, on a thread of its own."""
        self._renewed = time.monotonic()
        self._keeper = threading.Thread(target=self._keep, name="brook-lease", daemon=True)
        self._keeper.start()

    def stop_keeping(self) -> bool:
        """Stop renewing; True if this call stopped it (so the lease is ours to release)."""
        self._stopping.set()
        keeper, self._keeper = self._keeper, None
        if keeper is None:
            return False
        keeper.join()
        return True

    def hold_for_claim(self) -> None:
        """Before a catalog change: wait while a newer broker is taking over, so its
        epoch change goes through and this broker's next change finds it fenced."""
        pause = self._paused_until - time.monotonic()
        if pause > 0:
            time.sleep(pause)

    def written(self, edit: Callable[[dict[str, m.Entry]], None]) -> None:
        """After a manifest write (which renewed the lease) made with `edit`."""
        self._renewed = time.monotonic()
        if edit is not unchanged:
            self._changes += 1

    def _keep(self) -> None:
        """Renew the lease while no catalog change does, and look for a claim while
        changes are frequent (a quiet owner lets a newcomer through anyway)."""
        interval_s = ls.renew_interval_ms(self.lease_ms) / 1000
        while not self._stopping.wait(interval_s / 2):  # two looks per renewal
            try:
                if self._changes:
                    self._changes = 0
                    self._look_for_claim()
                if time.monotonic() - self._renewed >= interval_s:
                    self._storage.change(unchanged)
            except Fenced:
                return  # `lost` has said so
            except Exception as exc:  # reported (health, metrics), tried again next look
                self._storage.supervisor.failed(
                    "s3-lease", exc, f"renewing the lease on {self._storage.bucket.url}"
                )
            else:
                self._storage.supervisor.succeeded(
                    "s3-lease", f"renewing the lease on {self._storage.bucket.url}"
                )

    def _look_for_claim(self) -> None:
        found = self._storage.bucket.get(ls.CLAIM_KEY)
        claim = None if found is None else ls.decode_claim(found[0])
        if claim is None or claim == self._seen_claim:
            return
        self._seen_claim = claim
        if ls.pauses(claim, self._storage.catalog().epoch, self.id):
            log.warning(
                "broker %s is taking %s over: holding catalog changes back for %d ms",
                claim.owner[:8],
                self._storage.bucket.url,
                limits.lease_claim_pause_ms,
            )
            self._paused_until = time.monotonic() + limits.lease_claim_pause_ms / 1000


def _decode(url: str, raw: bytes) -> m.Manifest:
    try:
        return m.decode(raw)
    except ValueError as exc:
        raise StorageError(f"{url}: {exc}") from None
