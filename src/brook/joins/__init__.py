"""Durable joins: a continuation appended once, exactly once, after every member
of a set of jobs finished (the task layer's chains and chords; docs/CANVAS.md)."""
