"""Input and output files of the Spark tests: rows written one JSON-lines file per
micro-batch with increasing modification times, tables, a files source, committed output."""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

Row = dict[str, Any]
#: The first micro-batch's time; at(seconds) is a time after it.
T0 = datetime(2026, 3, 1, 9, 0, 0)


def committed_files(path: Path) -> list[Path]:
    """The files a Spark file sink committed, read from its _spark_metadata log as Spark's
    own reader does: a batch stopped midway can leave part files that were never committed."""
    log = path / "_spark_metadata"
    if not log.is_dir():
        return sorted(path.glob("*.json"))
    added: set[str] = set()
    for entry in log.iterdir():
        if not entry.name.split(".")[0].isdigit():
            continue  # checksum files (.0.crc) sit beside the log's entries (0, 1, 9.compact)
        for line in entry.read_text().splitlines()[1:]:  # the first line is the version
            record = json.loads(line)
            name = record["path"].rsplit("/", 1)[-1]
            if record.get("action") == "delete":
                added.discard(name)
            else:
                added.add(name)
    return sorted(path / name for name in added)


def read_json_dir(path: Path) -> list[dict[str, Any]]:
    rows = []
    for part in committed_files(path):
        rows += [json.loads(line) for line in part.read_text().splitlines() if line]
    return rows


def write_table(folder: Path, rows: list[Row], name: str = "part-0.json") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def write_batches(folder: Path, batches: list[list[Row]]) -> None:
    """One JSON-lines file per micro-batch, each modified after the one before."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, rows in enumerate(batches):
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        stamp = 1_700_000_000 + index * 10
        os.utime(path, (stamp, stamp))


def source(name: str, columns: str, watermark: str = "", path: str | None = None) -> str:
    """A files source read one file per micro-batch."""
    mark = f", WATERMARK FOR ts AS ts - INTERVAL {watermark}" if watermark else ""
    return (
        f"CREATE SOURCE {name} ({columns}{mark}) WITH (connector = 'files', "
        f"path = '{path or name}', format = 'json', max_files_per_trigger = 1);\n"
    )


def minute_of(ts: str) -> datetime:
    return datetime.fromisoformat(ts).replace(second=0, microsecond=0)


def write_later_batch(folder: Path, rows: list[Row], name: str = "part-099.json") -> None:
    """One more JSON-lines file, modified after every file :func:`write_batches` wrote (a
    restarted query reads it last)."""
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.utime(path, (1_700_001_000, 1_700_001_000))


def upsert_table(path: Path) -> list[dict[str, Any]]:
    """The rows of the version an upsert files sink's _current names."""
    pointer = json.loads((path / "_current").read_text(encoding="utf-8"))
    rows = []
    for part in sorted((path / pointer["version"]).glob("*.json")):
        rows += [json.loads(line) for line in part.read_text().splitlines() if line]
    return rows
