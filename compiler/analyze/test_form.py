"""The job's test form: the same program with its inputs and outputs swapped for the
test's own, so a test never touches the job's real sources and sinks. The swap is an input
of compilation (``flowc.compile(..., test_inputs=, test_outputs=)``, applied by the analysis pass;
:func:`flowc.driver.compile_test_form` compiles a job's test form), so the
job a test runs is the job the compiler made, every stage planned from the test form."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from flowc.catalog import is_upsert
from flowc.program import Program, SinkDef, SourceDef


def test_program(
    program: Program, inputs: Mapping[str, str], outputs: Mapping[str, str]
) -> Program:
    """The program every source of which reads JSON files from ``inputs[name]`` (one file
    a micro-batch), every upsert sink of which (files in update mode, postgres) named in
    ``outputs`` is a files upsert sink keeping its table in ``outputs[name]`` (parquet, the
    same key: it applies updates and deletes as the job's sink does, read back from the
    version ``_current`` names), and every other sink of which is Spark's memory sink (its
    rows are read back by query name), so a test touches nothing of the job's real inputs
    and outputs."""

    def source(s: SourceDef) -> SourceDef:
        options: tuple[tuple[str, object], ...] = (
            ("path", inputs[s.name]),
            ("format", "json"),
        )
        if not s.bounded:
            options += (("max_files_per_trigger", 1),)
        return replace(s, connector="files", options=options, watermark=s.watermark)

    def sink(s: SinkDef) -> SinkDef:
        if is_upsert(s.connector, s.mode) and s.name in outputs:
            options: tuple[tuple[str, object], ...] = (
                ("path", outputs[s.name]),
                ("format", "parquet"),
                ("key", dict(s.options)["key"]),
            )
            return replace(s, connector="files", mode="update", options=options)
        return replace(s, connector="memory", options=())

    return replace(
        program,
        sources=tuple(source(s) for s in program.sources),
        sinks=tuple(sink(s) for s in program.sinks),
    )  # a replaced program builds its lookup index anew (Program._index is no argument)
