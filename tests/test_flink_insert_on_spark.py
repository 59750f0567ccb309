"""Flink's INSERT INTO in the Flink dialect on Spark (docs/language.md, "Flink tables"):
the query's columns written to the sink's by position, cast as Flink casts them (INT into
BIGINT, BIGINT into DOUBLE, a DECIMAL into a narrower one rounded half up, NULL where it
overflows: run in Flink 2.3), into an append and an upsert files table, over several
micro-batches and a restart, against plain Python."""

from __future__ import annotations

import json
import os
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import flowc
from tests.helpers.files import Row, committed_files, write_batches
from tests.helpers.spark_run import run_in

JOB = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE bids (auction INT, bidder BIGINT, price BIGINT)
  WITH (connector = 'files', path = 'bids', format = 'json', max_files_per_trigger = 1);
CREATE TABLE euros (id BIGINT, who BIGINT, euros DECIMAL(23, 3), k DECIMAL(10, 2), d DOUBLE)
  WITH (connector = 'files', path = 'out/euros', format = 'json');
CREATE TABLE totals (id BIGINT, n BIGINT, total DECIMAL(30, 2), PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'files', path = 'out/totals', format = 'parquet');
INSERT INTO euros SELECT auction, bidder, 0.908 * price, 0.001 * price AS thousands, price
  FROM bids;
INSERT INTO totals SELECT auction, count(*), sum(price) FROM bids GROUP BY auction;
"""

BATCHES: list[list[Row]] = [
    [
        {"auction": 1, "bidder": 10, "price": 1005},
        {"auction": 2, "bidder": 11, "price": 7655},
    ],
    [
        {"auction": 1, "bidder": 12, "price": 7645},
        {"auction": 3, "bidder": 13, "price": 123456789012345},  # k overflows: NULL
    ],
    [{"auction": 2, "bidder": 14, "price": 2}, {"auction": 1, "bidder": 15, "price": 9995}],
    [{"auction": 3, "bidder": 16, "price": 5}],
]


def _half_up(value: Decimal, places: int, digits: int) -> Decimal | None:
    """Flink's cast into DECIMAL(digits, places): rounded half up, NULL past its digits."""
    rounded = value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return None if abs(rounded) >= Decimal(10) ** (digits - places) else rounded


def test_positional_insert_with_casts_across_a_restart(spark: Any, tmp_path: Path) -> None:
    job = flowc.compile(JOB, str(tmp_path / "job.flow"), for_spark=True)
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    write_batches(tmp_path / "bids", BATCHES[:3])
    assert [q.error for q in run_in(job, tmp_path).queries] == [None, None]
    write_batches(tmp_path / "later", BATCHES[3:])
    target = tmp_path / "bids" / "part-099.json"
    (tmp_path / "later" / "part-000.json").rename(target)
    os.utime(target, (1_700_001_000, 1_700_001_000))
    assert [q.error for q in run_in(job, tmp_path).queries] == [None, None]

    rows = [row for batch in BATCHES for row in batch]
    written = [
        json.loads(line, parse_float=Decimal)
        for part in committed_files(tmp_path / "out" / "euros")
        for line in part.read_text().splitlines()
        if line
    ]
    got = sorted(
        (
            r["id"],
            r["who"],
            Decimal(r["euros"]),
            None if r.get("k") is None else Decimal(r["k"]),
            float(r["d"]),
        )
        for r in written
    )
    expected = sorted(
        (
            r["auction"],
            r["bidder"],
            Decimal("0.908") * r["price"],
            _half_up(Decimal("0.001") * r["price"], 2, 10),
            float(r["price"]),
        )
        for r in rows
    )
    assert got == expected
    assert len(got) == len(rows) and sum(k is None for _, _, _, k, _ in got) == 1
    # 1.005, 7.645 and 9.995 round half up (1.01, 7.65, 10.00), not half even
    assert {Decimal("1.01"), Decimal("7.65"), Decimal("10.00")} <= {k for _, _, _, k, _ in got}

    totals: dict[int, tuple[int, Decimal]] = {}
    for r in rows:
        n, total = totals.get(r["auction"], (0, Decimal(0)))
        totals[r["auction"]] = (n + 1, total + r["price"])
    pointer = json.loads((tmp_path / "out" / "totals" / "_current").read_text(encoding="utf-8"))
    table = spark.read.parquet(str(tmp_path / "out" / "totals" / pointer["version"])).collect()
    assert {r["id"]: (r["n"], r["total"]) for r in table} == totals
    schema = spark.read.parquet(str(tmp_path / "out" / "totals" / pointer["version"])).schema
    assert [f.dataType.simpleString() for f in schema.fields] == [
        "bigint",
        "bigint",
        "decimal(30,2)",
    ]
