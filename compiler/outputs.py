"""Shared pieces of every ``--emit`` output: the versioned JSON envelope (DOT and Mermaid are
:mod:`flowc.render`'s)."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flowc._version import __version__
from flowc.limits import SharedSetting

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


#: The cyclic collector, off while any rendering runs in any thread: the first to start
#: turns it off if it was on, the last to finish turns it back on unless the application
#: changed it meanwhile (a per-thread check-then-disable would race: one thread's
#: ``gc.enable`` between another's check and its ``gc.disable`` left it off for good).
_RENDERING_COLLECTOR: SharedSetting[bool] = SharedSetting(
    gc.isenabled,
    lambda enabled: gc.enable() if enabled else gc.disable(),
    lambda enabled: False if enabled else None,
)


@contextmanager
def paused_gc() -> Iterator[None]:
    """Render without the cyclic collector: a large plan's rendering allocates many
    containers and frees none, and each collection would rescan the whole compiled job
    (as :func:`flowc.compile` does while compiling)."""
    held = _RENDERING_COLLECTOR.enter()
    try:
        yield
    finally:
        if held:
            _RENDERING_COLLECTOR.leave()


@contextmanager
def without_young_collections() -> Iterator[None]:
    """Run with the cyclic collector paused, then move every object to its oldest
    generation (``gc.freeze`` then ``gc.unfreeze``, which scan nothing), so that no young
    collection scans what was made when the collector is back on: ``import flowc`` makes
    some 45,000 objects that live as long as the process (a hundred young collections over
    them took 10 ms of a 150 ms import and freed nothing), and a command of ``flowc`` a job
    (one young collection over it, 6 ms, as the command ended). Not when the application
    has frozen objects of its own (``gc.unfreeze`` would thaw them): then the collector only
    pauses."""
    with paused_gc():
        yield
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()


def count_of(n: int, one: str, many: str | None = None) -> str:
    """``1 edge``, ``2 edges``: ``many`` where the plural is not ``one`` + s."""
    return f"{n} {one if n == 1 else many if many is not None else one + 's'}"


#: Where a text refers to a vertex (each edge into another), a name longer than this is
#: shortened; the vertex's own heading has the whole name. A wide chain's name grows with
#: the chain, and its vertex is referred to once per edge: in full, 4,000 views of one
#: source read by 400 INSERTs made 240 MB of JobGraph text.
REFERENCE_NAME_CHARS = 200


def reference_name(name: str) -> str:
    """``name``, or its first characters and its length when it is long."""
    if len(name) <= REFERENCE_NAME_CHARS:
        return name
    return f"{name[: REFERENCE_NAME_CHARS - 40]}... ({len(name):,} characters)"
