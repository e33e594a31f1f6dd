"""Which endpoints may take a topic, found without looking at every endpoint.

A SaaS runs an endpoint per customer with patterns such as `events.c0042.*`, and a
topic per customer and event type. A new topic must find its endpoints among
thousands at once: looking at each endpoint's patterns per new topic made onboarding
300 topics stall delivery for everyone (issue 50). Every glob's topics begin with the
glob's literal part (what comes before its first `*`, `?` or `[`), so the index keys
patterns by that part and a topic looks up only its own prefixes, of the few lengths
that occur. Names given outright are looked up whole. What the index returns are
candidates: `Endpoint.matches` still decides (reserved namespaces, dead letters).
"""

from __future__ import annotations

from brook.names import is_glob, literal_prefix


class PatternIndex:
    """Owners (endpoint names) by the patterns they hold."""

    def __init__(self) -> None:
        self._exact: dict[str, set[str]] = {}
        """A topic named outright -> its owners."""
        self._by_prefix: dict[str, set[str]] = {}
        """A glob's literal prefix -> the owners of globs with it."""
        self._lengths: dict[int, int] = {}
        """Prefix length -> how many prefixes of it are indexed (the lengths to try)."""
        self._held: dict[str, tuple[str, ...]] = {}

    def put(self, owner: str, patterns: tuple[str, ...] | list[str]) -> None:
        """Index `owner` under `patterns`, in place of what it held."""
        patterns = tuple(patterns)
        if self._held.get(owner) == patterns:
            return
        self.remove(owner)
        self._held[owner] = patterns
        for pattern in patterns:
            if is_glob(pattern):
                prefix = literal_prefix(pattern)
                owners = self._by_prefix.setdefault(prefix, set())
                if not owners:
                    self._lengths[len(prefix)] = self._lengths.get(len(prefix), 0) + 1
                owners.add(owner)
            else:
                self._exact.setdefault(pattern, set()).add(owner)

    def remove(self, owner: str) -> None:
        for pattern in self._held.pop(owner, ()):
            if is_glob(pattern):
                prefix = literal_prefix(pattern)
                owners = self._by_prefix.get(prefix)
                if owners is None:
                    continue
                owners.discard(owner)
                if not owners:
                    del self._by_prefix[prefix]
                    left = self._lengths[len(prefix)] - 1
                    if left:
                        self._lengths[len(prefix)] = left
                    else:
                        del self._lengths[len(prefix)]
            else:
                owners = self._exact.get(pattern)
                if owners is not None:
                    owners.discard(owner)
                    if not owners:
                        del self._exact[pattern]

    def candidates(self, topic: str) -> set[str]:
        """The owners whose patterns may take `topic` (a superset of those that do)."""
        found = set(self._exact.get(topic, ()))
        for length in self._lengths:
            if length <= len(topic):
                owners = self._by_prefix.get(topic[:length])
                if owners:
                    found |= owners
        return found
