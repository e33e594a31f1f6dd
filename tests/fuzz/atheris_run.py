"""Coverage-guided fuzzing of the targets (targets.py) with atheris, libFuzzer for Python.

    python -m tests.fuzz.atheris_run TARGET RUNS [SEED]

Runs TARGET (http_stream, batch_body, segment_file) on RUNS inputs that libFuzzer
evolves from Brook's own valid inputs toward new branches of Brook's code (every
`brook` module is instrumented). A failing input stops the run, is written to
`crash-<hash>` in the working directory and makes the exit status non-zero
(run the target on that file's bytes to replay it). libFuzzer prints the inputs
tried ("Done N runs") and the coverage reached ("cov:").
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["brook"]):
    from tests.fuzz import targets


def main() -> None:
    name, runs = sys.argv[1], int(sys.argv[2])
    target = targets.TARGETS[name]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else int.from_bytes(os.urandom(4), "little")
    corpus = Path(tempfile.mkdtemp(prefix=f"brook-fuzz-{name}-"))
    for i, data in enumerate(targets.SEEDS[name]):
        (corpus / f"seed-{i}").write_bytes(data)
    logging.disable(logging.WARNING)  # recovery reports every torn file it meets
    print(f"fuzzing {name}: {runs} runs, seed {seed} (pass it as SEED to replay)", flush=True)
    atheris.Setup(
        [
            sys.argv[0],
            f"-runs={runs}",
            f"-seed={seed}",
            "-max_len=4096",
            "-timeout=10",
            "-print_final_stats=1",
            str(corpus),
        ],
        target,
    )
    atheris.Fuzz()  # exits the process, with libFuzzer's "Done N runs" and its stats


if __name__ == "__main__":
    main()
