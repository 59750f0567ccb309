"""Every example runs on a real local SparkSession, with input generated from its schema.

The answers of each construct are checked against independent computations in
test_run.py; here every example must run to the end with no failed query, and every
query must execute exactly the exchanges its plan promised.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

import pytest
from stages import EXAMPLES

import flowc
from flowc.runtime.run import run_job
from tests.helpers.example_inputs import generate_inputs


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
    assert [e.spark for e in minimal.exchanges] == [
        "none",
        "groupBy(user_id, window)",
        "coalesce(4)",
    ]
    assert "redistributes these rows anyway" in minimal.exchanges[0].why
    assert "the parallelism narrows (8 -> 4)" in minimal.exchanges[2].why
