"""Snapshot files one per example: ``__snapshots__/<test module>/<example>.ambr``.

All the stage snapshots in one file made a file of 40,000 lines, whose diffs no one reads;
a file per example keeps a change to one example's plans in that example's file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from syrupy.extensions.amber import AmberSnapshotExtension

if TYPE_CHECKING:
    from syrupy.location import PyTestLocation
    from syrupy.types import SnapshotIndex


def example_id(path: Path) -> str:
    """An example's name in test ids and snapshot files: its stem, after its folder's name
    for an example in a folder of examples/ (``flink_sql_deduplication``)."""
    return path.stem if path.parent.name == "examples" else f"{path.parent.name}_{path.stem}"


def _example(test_location: PyTestLocation) -> str:
    """The example a test ran on: the name of its ``path`` parameter."""
    path: Path = test_location.item.callspec.params["path"]
    return example_id(path)


class PerExampleSnapshot(AmberSnapshotExtension):
    """The amber format, in a file per example (the tests are parametrized by ``path``)."""

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(Path(super().dirname(test_location=test_location)) / test_location.basename)

    @classmethod
    def get_file_basename(cls, *, test_location: PyTestLocation, index: SnapshotIndex) -> str:
        return _example(test_location)

    @classmethod
    def matches_test_location(
        cls, *, test_location: PyTestLocation, snapshot_location: str
    ) -> bool:
        location = Path(snapshot_location)
        return location.parent.name == test_location.basename and location.stem == _example(
            test_location
        )
