"""Shared pieces of every ``--emit`` output: the versioned JSON envelope (DOT and Mermaid are
:mod:`flowc.render`'s)."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flowc import __version__

#: Bumped when a stage's JSON changes incompatibly.
SCHEMA_VERSION = 1
#: Stages whose JSON changed incompatibly since, each with its own version: physical 2 has
#: runs of subtasks instead of one entry per subtask (docs/plans.md).
STAGE_SCHEMA_VERSIONS = {"physical": 2}


def document(stage: str, body: dict[str, Any]) -> str:
    """The JSON of one stage: ``flowc_version`` and ``schema_version`` first, then the stage."""
    data = {
        "flowc_version": __version__,
        "schema_version": STAGE_SCHEMA_VERSIONS.get(stage, SCHEMA_VERSION),
        "stage": stage,
    }
    data.update(body)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


@contextmanager
def paused_gc() -> Iterator[None]:
    """Render without the cyclic collector: a large plan's rendering allocates many
    containers and frees none, and each collection would rescan the whole compiled job
    (as :func:`flowc.compile` does while compiling)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
