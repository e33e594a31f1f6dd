"""Group commit: many callers' records, one write and one fsync per partition per round."""

from brook.commit.committer import Committer
from brook.commit.policy import flush_delay
from brook.commit.requests import AppendRequest, Waiter

__all__ = ["AppendRequest", "Committer", "Waiter", "flush_delay"]
