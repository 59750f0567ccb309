"""The embedding API of docs/api.md: a job's outputs (each INSERT's sink and its columns
in Spark types) and its PySpark program. The outputs are checked against what Spark
itself builds: every shipped example's generated program is run up to its writers on the
shared local session, and the DataFrame each query hands Spark's writer must have
exactly the columns and types the API gave, in order (an upsert sink given changes also
gets each row's change kind, which it applies and does not write)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import flowc
from flowc.catalog import OP_COLUMN
from flowc.runtime.run import load_program

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flow")) + sorted(
    (ROOT / "examples" / "flink_sql").glob("*.flow")
)


class _Writer:
    """Stands in for Spark's DataStreamWriter or DataFrameWriter: every call chains, and
    ``start``/``save`` do nothing, so no query starts."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self


def _written_schemas(spark: Any, job: flowc.CompiledJob, folder: Path) -> list[Any]:
    """The schema of each DataFrame the generated program hands a writer, in order."""
    frames = type(spark.range(1))  # the session's own DataFrame class (classic or Connect)
    handed: list[Any] = []

    def capture(frame: Any) -> _Writer:
        handed.append(frame.schema)
        return _Writer()

    module = load_program(job)
    saved = frames.__dict__["writeStream"], frames.__dict__["write"], frames.__dict__["observe"]
    frames.writeStream = property(capture)
    frames.write = property(capture)
    try:
        if job.spark_plan.batch:
            # A batch write counts its rows with an Observation, read once the write ran,
            # and replaces the sink's folder: neither happens here.
            frames.observe = lambda frame, *args, **kwargs: frame
            module.Observation = lambda name: SimpleNamespace(get={"rows": 0})
            module.replace_output = lambda path, write: write(str(folder / "out"))
            module.run_batch(spark)
        else:
            module.start_queries(spark, str(folder), True)
    finally:
        frames.writeStream, frames.write, frames.observe = saved
    return handed


@pytest.mark.parametrize(
    "path", EXAMPLES, ids=lambda p: p.relative_to(ROOT / "examples").as_posix()
)
def test_outputs_are_the_columns_spark_writes(spark: Any, path: Path, tmp_path: Path) -> None:
    from pyspark.sql.types import StructType

    job = flowc.compile_file(path, for_spark=True)
    outputs = job.outputs()
    assert [o.sink for o in outputs] == [i.sink for i in job.program.inserts]
    assert all(o.span.file == str(path) for o in outputs)
    handed = _written_schemas(spark, job, tmp_path)
    assert len(handed) == len(outputs)
    for output, schema in zip(outputs, handed, strict=True):
        written = [(f.name, f.dataType) for f in schema.fields]
        if written[-1][0] == OP_COLUMN:
            # A changelog (updating pipeline or CDC source) into an upsert sink: its
            # foreachBatch applies each row's change kind by key and writes the rest.
            assert output.key is not None, output
            written = written[:-1]
        declared = [(f.name, f.dataType) for f in StructType.fromDDL(output.ddl).fields]
        assert declared == written, (output.sink, output.ddl, schema.simpleString())


def test_outputs_name_the_sink_mode_and_key() -> None:
    job = flowc.compile_file(ROOT / "examples" / "auction_totals.flow", for_spark=True)
    (output,) = job.outputs()
    sink = job.program.sinks[0]
    assert (output.sink, output.connector) == (sink.name, sink.connector)
    assert output.output_mode == job.spark_plan.queries[0].output_mode == "update"
    assert output.key == ("auction",)
    assert output.to_json()["key"] == ["auction"]
    assert output.span.line == job.program.inserts[0].span.line
    appending = flowc.compile_file(ROOT / "examples" / "wordcount.flow").outputs()
    assert [o.key for o in appending] == [None]


def test_a_column_name_spark_must_quote_is_quoted_in_the_ddl(spark: Any) -> None:
    from pyspark.sql.types import StructType

    job = flowc.compile(
        "CREATE SOURCE s (`unit price` DOUBLE, `a``b` BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM s |> SELECT `unit price`, `a``b`, `unit price` * 2 AS `x y`;\n"
    )
    (output,) = job.outputs()
    assert [c.name for c in output.columns] == ["unit price", "a`b", "x y"]
    assert [f.name for f in StructType.fromDDL(output.ddl).fields] == ["unit price", "a`b", "x y"]


def test_the_pyspark_program_is_flowc_compiles(tmp_path: Path) -> None:
    path = ROOT / "examples" / "wordcount.flow"
    program = flowc.compile_file(path, for_spark=True).pyspark_program()
    printed = subprocess.run(
        [sys.executable, "-m", "flowc", "compile", str(path), "--emit", "pyspark"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert program == printed
    compile(program, "wordcount.py", "exec")  # a module Python reads


def test_the_pyspark_program_needs_for_spark() -> None:
    job = flowc.compile_file(ROOT / "examples" / "wordcount.flow")
    with pytest.raises(ValueError, match="for_spark=True"):
        job.pyspark_program()


def test_the_examples_of_docs_api_run(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """docs/api.md's Python blocks, in order, in one namespace, from the repository's root
    (the one running a job needs Spark to start queries: its name is checked instead);
    the output the page shows under a block is what it prints."""
    import re

    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    assert len(blocks) >= 4
    monkeypatch.chdir(ROOT)
    namespace: dict[str, Any] = {}
    for block in blocks:
        if "run_job(" in block:
            from flowc.runtime import run

            assert callable(run.run_job) and "report" in block
            continue
        capsys.readouterr()
        exec(compile(block, "docs/api.md", "exec"), namespace)
        printed = capsys.readouterr().out
        shown = [line[2:] for line in block.splitlines() if line.startswith("# ")]
        if shown:
            assert printed.splitlines() == shown
