"""Event-time input given in minutes after 10:00, one JSON file per micro-batch: what the
tests of stateful processors (DEDUPLICATE ... WITHIN, OVER windows) write and read back."""

from __future__ import annotations

import json
import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

Row = dict[str, Any]
START = datetime(2024, 1, 1, 10, 0, 0)


def at(minutes: float) -> str:
    """An event time, ``minutes`` after 10:00, as the JSON files carry it."""
    return (START + timedelta(minutes=minutes)).isoformat()


def minutes(value: Any) -> float:
    """An event time read back (a datetime from Spark, an ISO string from a JSON sink)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return (value.replace(tzinfo=None) - START).total_seconds() / 60


def write_batch(folder: Path, index: int, rows: list[Row]) -> None:
    """One input file per micro-batch, each modified after the one before."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"batch-{index:03d}.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    stamp = time.time() - 3600 + 60 * index
    os.utime(path, (stamp, stamp))
