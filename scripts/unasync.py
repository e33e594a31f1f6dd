"""Make the sync client (src/brook/client/sync.py) from the async one (client/aio.py).

The async client is the one written by hand; the sync one is the same code with the
coroutines taken out, so the two can never drift apart (httpcore does the same with
unasync). `python scripts/unasync.py` writes sync.py; `--check` (run by `make lint`)
fails when sync.py is not what aio.py makes.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src/brook/client/aio.py"
TARGET = ROOT / "src/brook/client/sync.py"
HEADER = (
    "# Made from client/aio.py by scripts/unasync.py: edit that file, then run `make unasync`.\n"
)

DOCSTRING = (
    '"""`brook.connect_async(url)`: the broker\'s API over HTTP, as coroutines.\n',
    '"""`brook.connect(url)`: the broker\'s API over HTTP, for threads.\n',
)
WORDS = [
    # (pattern, replacement), in order
    (r"\bimport asyncio\b", "import time"),
    (r"\basyncio\.sleep\(", "time.sleep("),
    (r"\bhttpx\.AsyncClient\b", "httpx.Client"),
    (r"\baclose\(", "close("),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\(await ([\w.]+\(\))\)", r"\1"),
    (r"\bawait ", ""),
    (r"\bAsync(?=[A-Z]\w*\b)", "Remote"),
    (r"\bconnect_async\b", "connect"),
    (r"\bThe sync client \(client/sync.py, `brook.connect`\) is made from this file.\n", ""),
    (r", as coroutines(?=[;.])", ""),
]


def unasync(text: str) -> str:
    text = text.replace(*DOCSTRING)
    for pattern, replacement in WORDS:
        text = re.sub(pattern, replacement, text)
    return HEADER + text


def formatted(text: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(TARGET), "-"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def main(argv: list[str]) -> int:
    made = formatted(unasync(SOURCE.read_text()))
    if "--check" in argv:
        if TARGET.read_text() != made:
            print(
                f"{TARGET.relative_to(ROOT)} is not what {SOURCE.relative_to(ROOT)} makes: "
                "run `make unasync` (edit aio.py, never sync.py)",
                file=sys.stderr,
            )
            return 1
        return 0
    TARGET.write_text(made)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
