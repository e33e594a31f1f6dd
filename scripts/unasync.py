"""Make the sync client (client/sync.py, sync_handles.py) from the async one (aio.py,
aio_handles.py).

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
PAIRS = (
    (ROOT / "src/brook/client/aio.py", ROOT / "src/brook/client/sync.py"),
    (ROOT / "src/brook/client/aio_handles.py", ROOT / "src/brook/client/sync_handles.py"),
    (ROOT / "src/brook/client/aio_calls.py", ROOT / "src/brook/client/sync_calls.py"),
)
HEADER = "# Made from client/{} by scripts/unasync.py: run `make generate` after changing that.\n"

DOCSTRING = (
    '"""`brook.connect_async(url)`: the broker\'s API over HTTP, as coroutines.\n',
    '"""`brook.connect(url)`: the broker\'s API over HTTP, for threads.\n',
)
WORDS = [
    # (pattern, replacement), in order
    (r"\bbrook\.client\.aio_handles\b", "brook.client.sync_handles"),
    (r"\bbrook\.client\.aio_calls\b", "brook.client.sync_calls"),
    (r"The async client's calls", "The sync client's calls"),
    (r"\bbrook\.client\.aio\b", "brook.client.sync"),
    (
        r"\(client/sync_handles\.py\) are made\nfrom this file",
        "(this file) are made from\nclient/aio_handles.py",
    ),
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


def unasync(text: str, source: Path) -> str:
    text = text.replace(*DOCSTRING)
    for pattern, replacement in WORDS:
        text = re.sub(pattern, replacement, text)
    return HEADER.format(source.name) + text


def formatted(text: str, target: Path) -> str:
    """`text` with its imports sorted again (names change) and formatted, as ruff would."""
    for command in (("check", "--select", "I", "--fix", "--quiet"), ("format",)):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(target), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return text


def main(argv: list[str]) -> int:
    for source, target in PAIRS:
        made = formatted(unasync(source.read_text(), source), target)
        if "--check" not in argv:
            target.write_text(made)
        elif not target.exists() or target.read_text() != made:
            print(
                f"{target.relative_to(ROOT)} is not what {source.relative_to(ROOT)} makes: "
                f"run `make generate` (edit {source.name}, never {target.name})",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
