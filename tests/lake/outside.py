"""The lake as a reader without Brook sees it: pyarrow's own filesystems (its own S3
client for a bucket), the manifest read as plain JSON. Nothing here imports Brook's
storage, so a test that passes through it shows the files are where docs/FORMAT.md
says, readable by anyone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from brook import layout
from brook.lake.manifest import LakeFile
from tests.s3server import CREDENTIALS

Row = tuple[int, int, int, bytes | None, bytes, tuple[tuple[str, bytes], ...]]


class Outside:
    def __init__(self, where: dict[str, Any] | str | Path) -> None:
        if not isinstance(where, dict):
            where = {"location": str(where)}
        location = str(where["location"])
        if location.startswith("s3://"):
            self.fs: pafs.FileSystem = pafs.S3FileSystem(
                access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                region=CREDENTIALS["AWS_DEFAULT_REGION"],
                endpoint_override=where["endpoint_url"],
                scheme="http",
            )
            self.root = location.removeprefix("s3://").rstrip("/")
        else:
            self.fs = pafs.LocalFileSystem()
            self.root = str(Path(location).resolve())

    def path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def manifest(self, topic: str) -> dict[str, Any]:
        return self.manifest_in(layout.lake_topic(topic))

    def manifest_in(self, table: str) -> dict[str, Any]:
        """The manifest of the lake table at prefix `table` (empty when none)."""
        try:
            with self.fs.open_input_stream(self.path(layout.lake_manifest_in(table))) as stream:
                found: dict[str, Any] = json.loads(stream.read())
                return found
        except FileNotFoundError:
            return {"files": [], "retired": []}

    def files(self, topic: str) -> list[LakeFile]:
        return [LakeFile(**f) for f in self.manifest(topic)["files"]]

    def history(self, topic: str, group: str) -> list[dict[str, Any]]:
        """The rows of a queue group's history, in status-log order."""
        manifest = self.manifest_in(layout.lake_history(topic, group))
        rows = [row for f in manifest["files"] for row in self.table(f["name"]).to_pylist()]
        return sorted(rows, key=lambda r: r["log_offset"])

    def listing(self, topic: str) -> list[str]:
        """The names under the topic's lake folder (the manifest's included)."""
        return self.listing_in(layout.lake_topic(topic))

    def listing_in(self, prefix: str) -> list[str]:
        selector = pafs.FileSelector(self.path(prefix), recursive=True, allow_not_found=True)
        for _ in range(5):
            try:
                found = self.fs.get_file_info(selector)
                break
            except FileNotFoundError:  # a temporary file renamed while pyarrow listed it
                continue
        else:
            raise AssertionError(f"{prefix} changed under every listing")
        return sorted(
            info.path.removeprefix(self.root + "/")
            for info in found
            if info.type == pafs.FileType.File
        )

    def table(self, name: str) -> pa.Table:
        return pq.read_table(self.path(name), filesystem=self.fs)

    def rows(self, topic: str) -> list[Row]:
        """Every row of the files the manifest names."""
        rows: list[Row] = []
        for file in self.files(topic):
            table = self.table(file.name)
            assert table.num_rows == file.rows
            offsets = table.column("offset").to_pylist()
            assert offsets == sorted(offsets) and file.first <= offsets[0] < file.next
            rows.extend(table_rows(table))
        return rows


def table_rows(table: pa.Table) -> list[Row]:
    out: list[Row] = []
    for row in table.to_pylist():
        stamp = int(row["timestamp"].timestamp() * 1000)
        headers = tuple(sorted(row["headers"] or []))
        out.append((row["partition"], row["offset"], stamp, row["key"], row["value"], headers))
    return out
