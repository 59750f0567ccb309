"""One class per checked step, and every pass that picks a handler by the step's class
has one for each class (as sqlglot's generator has a method per expression class)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import flowc
from flowc.graph import names, transformations
from flowc.program import STEP_CLASSES, Step, Stream
from flowc.spark import codegen_steps
from flowc.state import describe
from flowc.vocabulary import STATEFUL_STEPS, StepKind

ROOT = Path(__file__).resolve().parent.parent

#: Each pass's table of handlers, keyed by step class.
TABLES = {
    "names.DEFAULT_NAMES": names.DEFAULT_NAMES,
    "transformations.TRANSLATORS": transformations.TRANSLATORS,
    "state.describe.LINEAGE": describe.LINEAGE,
    "codegen_steps.STEP_WRITERS": codegen_steps.STEP_WRITERS,
}


def test_one_class_per_step_kind() -> None:
    assert sorted(c.KIND for c in STEP_CLASSES) == sorted(StepKind)
    # by name: a slotted dataclass is a new class, its unslotted draft may linger a while
    assert {c.__name__ for c in Step.__subclasses__()} == {c.__name__ for c in STEP_CLASSES}


@pytest.mark.parametrize("table", sorted(TABLES), ids=str)
def test_every_pass_covers_every_step_class(table: str) -> None:
    handled = set(TABLES[table])
    assert handled == set(STEP_CLASSES), (
        f"{table} has no handler for {sorted(c.__name__ for c in set(STEP_CLASSES) - handled)}"
    )


def test_a_step_knows_whether_it_keeps_state() -> None:
    assert {c.KIND for c in STEP_CLASSES if c.KIND in STATEFUL_STEPS} == STATEFUL_STEPS


def _steps(stream: Stream) -> Iterator[Step]:
    for step in stream.steps:
        yield step
        for other in step.inputs:
            yield from _steps(other)


def test_analysis_gives_each_step_its_class() -> None:
    """Every step of every example is an instance of its own class, whose node is the
    parser's node of the type the class declares."""
    seen: set[type[Step]] = set()
    for path in sorted((ROOT / "examples").glob("*.flow")):
        job = flowc.compile(path.read_text(encoding="utf-8"), str(path))
        streams = [v.stream for v in job.program.views] + [i.stream for i in job.program.inserts]
        for stream in streams:
            for step in _steps(stream):
                assert type(step) in STEP_CLASSES
                declared = type(step).__dataclass_fields__["node"].type
                assert type(step.node).__name__ == str(declared).removeprefix("ast."), (
                    path.name,
                    type(step).__name__,
                )
                seen.add(type(step))
    assert len(seen) >= 12, sorted(c.__name__ for c in seen)


def test_a_step_carries_its_facts() -> None:
    """What a step's class says of it is what the passes do with it, on every example:
    the operator its transformation runs (none for a step that only routes records),
    whether it keeps state and of which kind (as the state manifest names it), and the
    keys in force after it (those the stream ends with)."""
    routing = {"KeyByStep", "PartitionStep", "PartitionByStep", "UnionStep"}
    kinds: set[str] = set()
    for path in sorted((ROOT / "examples").glob("*.flow")):
        job = flowc.compile(path.read_text(encoding="utf-8"), str(path))
        tree = job.transformations
        streams = [v.stream for v in job.program.views] + [i.stream for i in job.program.inserts]
        for stream in streams:
            for step in _steps(stream):
                assert (step.operator is None) == (type(step).__name__ in routing), step
                if id(step) in tree.step_nodes:
                    assert tree[tree.step_nodes[id(step)]].operator == step.operator, path.name
                assert step.stateful == (step.state_kind is not None), type(step).__name__
                if step.state_kind is not None:
                    kinds.add(step.state_kind)
            keys = None
            for step in stream.steps:
                keys = step.keys_after(keys)
            assert keys == stream.keys, (path.name, stream.span)
    manifest_kinds = {
        op.kind
        for path in sorted((ROOT / "examples").glob("*.flow"))
        for query in describe.describe_state(
            flowc.compile(path.read_text(encoding="utf-8"), str(path), for_spark=True)
        ).queries
        for op in query.operators
    }
    assert kinds == manifest_kinds
    assert len(kinds) >= 5, sorted(kinds)
