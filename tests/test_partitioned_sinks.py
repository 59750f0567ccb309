"""Files sinks with ``partition_by``: Hive-style folders, on Spark (issue 13, item 7).

Nexmark q10's shape: bids written under ``dt=<day>/hm=<hour:minute>`` folders. The job
runs on the shared local SparkSession over three micro-batches; the folders on disk and
the rows in each are compared with plain Python's grouping of the same input.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import flowc
from tests.helpers.files import Row, at, source, write_batches
from tests.helpers.spark_run import compiled, run_generated

BIDS: list[list[Row]] = [
    [
        {"auction": 1, "price": 10, "ts": at(0)},
        {"auction": 2, "price": 20, "ts": at(59)},
        {"auction": 1, "price": 11, "ts": at(61)},
    ],
    [{"auction": 3, "price": 30, "ts": at(62)}, {"auction": 1, "price": 12, "ts": at(3600)}],
    [{"auction": 2, "price": 21, "ts": at(86400 + 5)}],
]

PROGRAM = (
    source("bids", "auction BIGINT, price BIGINT, ts TIMESTAMP")
    + "CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json',\n"
    + "  partition_by = 'dt, hm');\n"
    + "INSERT INTO out FROM bids |> SELECT auction, price,\n"
    + "  date_format(ts, 'yyyy-MM-dd') AS dt, date_format(ts, 'HH:mm') AS hm;\n"
)


def written(folder: Path) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """The rows in each dt=/hm= folder, read as files (no Spark), by folder name."""
    out: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for part in folder.glob("dt=*/hm=*/part-*.json"):
        key = (part.parent.parent.name, part.parent.name)
        for line in part.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            assert set(row) == {"auction", "price"}, "partition columns are folders, not fields"
            out[key].append((row["auction"], row["price"]))
    return {k: sorted(v) for k, v in out.items()}


def test_rows_land_in_hive_style_folders(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "bids", BIDS)
    job = compiled(tmp_path, PROGRAM)
    assert not job.spark_diagnostics
    run_generated(spark, tmp_path, job)
    expected: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    for batch in BIDS:
        for row in batch:
            ts = datetime.fromisoformat(row["ts"])
            # Spark escapes ':' in a folder name as %3A, as Hive does.
            key = (f"dt={ts:%Y-%m-%d}", f"hm={quote(f'{ts:%H:%M}', safe='')}")
            expected[key].append((row["auction"], row["price"]))
    assert len(expected) == 4
    assert written(tmp_path / "out") == {k: sorted(v) for k, v in expected.items()}
    back = spark.read.json(str(tmp_path / "out")).collect()
    # Reading back, Spark infers the type of dt=... (a DATE) and unescapes hm=....
    assert sorted((r["auction"], r["price"], str(r["dt"]), r["hm"]) for r in back) == sorted(
        (
            r["auction"],
            r["price"],
            f"{datetime.fromisoformat(r['ts']):%Y-%m-%d}",
            f"{datetime.fromisoformat(r['ts']):%H:%M}",
        )
        for batch in BIDS
        for r in batch
    )


def test_the_plan_shows_the_partitioning(tmp_path: Path) -> None:
    job = compiled(tmp_path, PROGRAM)
    query = job.spark_plan.queries[0]
    assert query.partition_by == ("dt", "hm")
    assert query.to_json()["partition_by"] == ["dt", "hm"]
    assert "partitioned by: dt, hm" in "\n".join(job.spark_plan.to_text())


def test_partition_columns_must_be_written(tmp_path: Path) -> None:
    program = PROGRAM.replace("'dt, hm'", "'dt, minute'")
    try:
        compiled(tmp_path, program)
    except flowc.CompileError as error:
        codes = [d.code for d in error.diagnostics if d.severity.name == "ERROR"]
        assert codes == ["E0420"], codes
        return
    raise AssertionError("a partition column the query does not write compiled")
