"""Group commit: many callers' records, one write and one fsync per partition per round."""

from brook.commit.committer import AppendRequest, Committer, Waiter
from brook.commit.policy import flush_delay

__all__ = ["AppendRequest", "Committer", "Waiter", "flush_delay"]
