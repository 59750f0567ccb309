"""A streaming query's progress as flowc's display reads it, without Spark."""

from __future__ import annotations

from typing import Any


class FakeQuery:
    """A streaming query as the display reads it: its progress so far, oldest first."""

    def __init__(self, name: str, *progress: dict[str, Any]) -> None:
        self.name = name
        self.recentProgress = list(progress)
        self.lastProgress = progress[-1]


PROGRESS = {
    "batchId": 3,
    "numInputRows": 40,
    "inputRowsPerSecond": 12.5,
    "processedRowsPerSecond": 80.0,
    "durationMs": {"triggerExecution": 512},
    "eventTime": {"watermark": "2026-01-01T12:00:00.000Z"},
    "stateOperators": [{"numRowsTotal": 7}, {"numRowsTotal": 3}],
    "sink": {"numOutputRows": 6},
}
