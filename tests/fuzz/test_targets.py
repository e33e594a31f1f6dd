"""The fuzz targets (targets.py) under hypothesis: arbitrary bytes, and Brook's own valid
inputs mutated, at the HTTP connection, the binary batch format and segment recovery.
`make reliability` runs the same targets coverage-guided with atheris (atheris_run.py)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.targets import SEEDS, TARGETS


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A seed with a few bytes changed, cut, or spliced with random bytes."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(0, 4))):
        action = draw(st.sampled_from(["flip", "cut", "insert"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if action == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif action == "cut":
            del data[at : at + draw(st.integers(1, 16))]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
    return bytes(data)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_target_survives_arbitrary_and_mutated_inputs(name: str) -> None:
    target = TARGETS[name]
    inputs = st.binary(max_size=2048)
    if SEEDS[name]:
        inputs = inputs | mutated(SEEDS[name])

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(inputs)
    def run(data: bytes) -> None:
        target(data)

    for seed in SEEDS[name]:
        target(seed)
    run()
