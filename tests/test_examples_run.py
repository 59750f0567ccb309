"""Every example runs on a real local SparkSession, with input generated from its schema.

The answers of each construct are checked against independent computations in
test_run.py; here every example must run to the end with no failed query, and every
query must execute exactly the exchanges its plan promised.
"""

from __future__ import annotations

import io
import json
import random
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from stages import EXAMPLES

import flowc
from flowc.runtime.run import run_job


def value_for(type_text: str, row: int, rng: random.Random) -> Any:
    if type_text in ("BIGINT", "INT", "SMALLINT", "TINYINT"):
        return rng.randint(0, 20)
    if type_text in ("DOUBLE", "FLOAT") or type_text.startswith("DECIMAL"):
        return round(rng.uniform(0, 20000), 2)
    if type_text == "TIMESTAMP":
        return (datetime(2026, 1, 1) + timedelta(seconds=7 * row)).isoformat()
    if type_text == "BOOLEAN":
        return rng.random() < 0.5
    if type_text.startswith("STRUCT<"):
        from sqlglot import exp

        from flowc.sqltypes import data_type, normalize_type

        fields = [e for e in data_type(type_text).expressions if isinstance(e, exp.ColumnDef)]
        return {
            f.name: value_for(normalize_type(f.args["kind"].sql("spark")), row, rng) for f in fields
        }
    return rng.choice(["alpha", "beta", "gamma", None]) if row % 7 else None


def generate_inputs(job: flowc.CompiledJob, folder: Path) -> None:
    rng = random.Random(7)
    for source in job.program.sources:
        options = dict(source.options)
        if source.connector != "files":
            continue
        target = folder / str(options["path"])
        target.mkdir(parents=True, exist_ok=True)
        if options["format"] == "text":
            lines = [" ".join(rng.choice(["a", "b", "c", "to", "be"]) for _ in range(5))]
            (target / "part.txt").write_text("\n".join(lines * 10) + "\n", encoding="utf-8")
            continue
        rows = [{c.name: value_for(c.type, i, rng) for c in source.schema} for i in range(40)]
        (target / "part.json").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
        )


@pytest.mark.parametrize("exchanges", ["minimal", "flink"])
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_with_planned_exchanges(
    example: Path,
    exchanges: str,
    tmp_path: Path,
    spark: Any,
) -> None:
    """In both exchange modes (SET exchanges): Spark executes exactly the shuffles the plan
    promises."""
    copy = tmp_path / example.name
    shutil.copy(example, copy)
    for module in example.parent.glob("*.py"):  # Python functions beside the examples
        shutil.copy(module, tmp_path)
    job = flowc.compile(
        copy.read_text(encoding="utf-8"),
        str(copy),
        for_spark=True,
        overrides={"exchanges": exchanges},
    )
    generate_inputs(job, tmp_path)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert report.queries, "no query ran"
    for query in report.queries:
        assert query.error is None, (query.name, query.error)
        assert query.exchanges_executed == query.exchanges_planned, query


def test_clicks_per_user_runs_one_shuffle_by_default(spark: Any, tmp_path: Path) -> None:
    """Flink's graph has three exchanges; two exist only because the parallelism changes:
    the source's into the filters (the window's own exchange redistributes the rows
    anyway) and the window's into the sink (narrowing: coalesce)."""
    example = next(e for e in EXAMPLES if e.stem == "clicks_per_user")
    plans = {}
    for mode in ("minimal", "flink"):
        job = flowc.compile(
            example.read_text(encoding="utf-8"),
            str(example),
            for_spark=True,
            overrides={"exchanges": mode},
        )
        (query,) = job.spark_plan.queries
        plans[mode] = query
    assert plans["flink"].exchanges_planned == 3
    minimal = plans["minimal"]
    assert minimal.exchanges_planned == 1
    assert [e.spark for e in minimal.exchanges] == ["none", "groupBy(user_id)", "coalesce(4)"]
    assert "redistributes these rows anyway" in minimal.exchanges[0].why
    assert "the parallelism narrows (8 -> 4)" in minimal.exchanges[2].why
