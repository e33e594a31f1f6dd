"""The operator's dashboard at /ui (SPEC §8)."""
