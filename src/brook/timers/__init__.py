"""Timers: records scheduled to be appended to a topic at a due time (SPEC §1)."""
