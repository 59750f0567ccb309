"""A debezium-json source on real Spark (docs/language.md, "Change-data capture input:
debezium-json"): the changes it reads, through row-wise steps into a memory sink that
shows each change's kind, equal plain Python's reading of the same envelopes, across
micro-batches (one file each, increasing modification times) and a restart on the same
checkpoint; malformed envelopes routed or failing as Flink's format fails on them."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError
from flowc.runtime.run import load_program, run_job
from tests.helpers.files import read_json_dir
from tests.helpers.spark_run import compiled, run_generated

Change = tuple[Any, ...]

SIGNS = {"c": ["+I"], "r": ["+I"], "u": ["-U", "+U"], "d": ["-D"]}


def changes(lines: list[str], payload: bool = False) -> list[tuple[str, dict[str, Any]]]:
    """Flink's debezium-json, in plain Python: each envelope's rows, in order."""
    out: list[tuple[str, dict[str, Any]]] = []
    for line in lines:
        if not line.strip():
            continue  # a tombstone: no rows
        envelope = json.loads(line)
        if payload:
            envelope = envelope["payload"]
        for sign in SIGNS[envelope["op"]]:
            out.append((sign, envelope["after" if sign in ("+I", "+U") else "before"]))
    return out


def envelope(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    return json.dumps(
        {"before": before, "after": after, "op": op, "source": {"table": "t"}, "ts_ms": 1}
    )


def row(i: int, name: str, n: int) -> dict[str, Any]:
    return {"id": i, "name": name, "n": n}


def write_files(folder: Path, files: list[list[str]], first: int) -> None:
    """One file per micro-batch, each modified after the one before."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, lines in enumerate(files, start=first):
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        stamp = 1_700_000_000 + index * 10
        os.utime(path, (stamp, stamp))


FIRST = [
    [
        envelope("r", None, row(1, "ann", 1)),
        envelope("r", None, row(2, "bob", 5)),
        envelope("c", None, row(3, "cy", 7)),
    ],
    [
        envelope("u", row(1, "ann", 1), row(1, "ann", 4)),  # -U filtered out, +U kept
        "",
        envelope("u", row(2, "bob", 5), row(2, "bob", 0)),  # -U kept, +U filtered out
        envelope("d", row(3, "cy", 7), None),
    ],
    [
        envelope("c", None, row(4, "dan", 9)),
        envelope("u", row(4, "dan", 9), row(4, "dan", 10)),
        envelope("u", row(4, "dan", 10), row(4, "dan", 11)),
    ],
]
AFTER_RESTART = [
    [envelope("d", row(4, "dan", 11), None), envelope("c", None, row(5, "eve", 3))],
    [envelope("u", row(5, "eve", 3), row(5, "eve", 6)), envelope("d", row(1, "ann", 4), None)],
]

PROGRAM = """
CREATE SOURCE s (id BIGINT, name STRING, n INT)
  WITH (connector = 'files', path = 'in', format = 'debezium-json', max_files_per_trigger = 1);
CREATE SINK {sink} WITH (connector = 'memory');
CREATE VIEW big AS FROM s |> WHERE n > 1 |> EXTEND n * 10 AS tens;
INSERT INTO {sink} FROM big |> SELECT id, tens |> RENAME tens AS t;
"""


def expected(files: list[list[str]]) -> list[Change]:
    """WHERE n > 1, EXTEND, SELECT, RENAME over each change, keeping its kind."""
    return [
        (values["id"], values["n"] * 10, sign)
        for lines in files
        for sign, values in changes(lines)
        if values["n"] > 1
    ]


def memory_rows(spark: Any, name: str) -> list[Change]:
    """The memory sink's rows in the order written: micro-batch by micro-batch, each
    file's rows as the file holds them."""
    return [tuple(r) for r in spark.table(name).collect()]


def test_changes_through_row_wise_steps_into_a_memory_sink(spark: Any, tmp_path: Path) -> None:
    """WHERE keeps or drops each change with its kind; EXTEND, SELECT and RENAME keep the
    hidden column (Spark's memory sink takes no restart: see the next test)."""
    job = compiled(tmp_path, PROGRAM.format(sink="cdc_rows"))
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"]
    write_files(tmp_path / "in", FIRST, 0)
    run_generated(spark, tmp_path, job)
    assert spark.table("cdc_rows").columns == ["id", "t", "__flowc_op"]
    assert memory_rows(spark, "cdc_rows") == expected(FIRST)


def source_batches(
    spark: Any, tmp_path: Path, job: flowc.CompiledJob
) -> list[tuple[int, list[Change]]]:
    """The generated program's source function, read with availableNow into a
    foreachBatch that keeps each micro-batch's rows in order, on the job's checkpoint."""
    module = load_program(job)
    module.__dict__["BASE_DIR"] = str(tmp_path)
    (read,) = [f for name, f in vars(module).items() if name.startswith("source_s_")]
    batches: list[tuple[int, list[Change]]] = []

    def keep(batch: Any, batch_id: int) -> None:
        batches.append((batch_id, [tuple(r) for r in batch.collect()]))

    query = (
        read(spark)
        .writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(tmp_path / "checkpoints" / "source"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    assert query.exception() is None
    return batches


def test_source_changes_per_micro_batch_and_after_a_restart(spark: Any, tmp_path: Path) -> None:
    """Each file one micro-batch, its changes in the file's order with their kinds; after
    a restart on the same checkpoint, only the new files' changes, each once."""
    job = compiled(tmp_path, PROGRAM.format(sink="cdc_unused"))
    write_files(tmp_path / "in", FIRST, 0)

    def rows(files: list[list[str]]) -> list[list[Change]]:
        return [
            [(v["id"], v["name"], v["n"], sign) for sign, v in changes(lines)] for lines in files
        ]

    first = source_batches(spark, tmp_path, job)
    assert [i for i, _ in first] == [0, 1, 2]
    assert [r for _, r in first] == rows(FIRST)
    write_files(tmp_path / "in", AFTER_RESTART, len(FIRST))
    second = source_batches(spark, tmp_path, job)
    assert [i for i, _ in second] == [3, 4]
    assert [r for _, r in second] == rows(AFTER_RESTART)


def wrapped(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """An envelope as Debezium's JSON converter writes it with schemas on."""
    payload = {"before": before, "after": after, "op": op}
    return json.dumps({"schema": {"type": "struct"}, "payload": payload})


#: Malformed envelopes (with schema-include), each with the reason flowc gives; Flink
#: fails on each (asked of Flink 2.3: "Corrupt Debezium JSON message").
MALFORMED = {
    "not json": "not a JSON object",
    "null": "not a JSON object",
    wrapped("d", {"id": 4, "name": "y", "n": "two"}, None): "before.n (INT): cannot read 'two'",
    wrapped("x", row(3, "x", 5), None): "unknown op 'x'",
    wrapped("u", None, row(2, "b", 6)): (
        "no 'before' for op 'u' (Debezium writes it when the table's REPLICA IDENTITY is FULL)"
    ),
    wrapped("d", None, None): (
        "no 'before' for op 'd' (Debezium writes it when the table's REPLICA IDENTITY is FULL)"
    ),
    wrapped("c", None, None): "no 'after' for op 'c'",
    json.dumps({"payload": {"after": row(1, "a", 1)}}): "no 'op'",
    envelope("c", None, row(9, "unwrapped", 1)): (
        "no 'payload' (debezium-json.schema-include is true)"
    ),
}

ROUTE = """
CREATE SOURCE s (id BIGINT, name STRING, n INT)
  WITH (connector = 'files', path = 'in', format = 'debezium-json', on_error = 'route',
        'debezium-json.schema-include' = 'true');
CREATE SINK cdc_routed WITH (connector = 'memory');
CREATE SINK bad (raw STRING, file STRING, error STRING)
  WITH (connector = 'files', path = 'out/bad', format = 'json');
INSERT INTO cdc_routed FROM s |> SELECT id, n;
INSERT INTO bad FROM s.errors;
"""


def test_route_sends_each_malformed_envelope_to_errors_and_keeps_the_rest(
    spark: Any, tmp_path: Path
) -> None:
    good = [
        wrapped("c", None, row(1, "a", 1)),
        wrapped("u", row(1, "a", 1), row(1, "a", 2)),
        wrapped("d", row(1, "a", 2), None),
    ]
    lines = [good[0], *list(MALFORMED)[:5], good[1], *list(MALFORMED)[5:], good[2]]
    write_files(tmp_path / "in", [lines], 0)
    job = compiled(tmp_path, ROUTE)
    run_generated(spark, tmp_path, job)
    assert memory_rows(spark, "cdc_routed") == [
        (v["id"], v["n"], sign) for sign, v in changes(good, payload=True)
    ]
    bad = {r["raw"]: r["error"] for r in read_json_dir(tmp_path / "out" / "bad")}
    assert bad == MALFORMED


FAIL = """
CREATE SOURCE s (id BIGINT, name STRING, n INT)
  WITH (connector = 'files', path = 'in', format = 'debezium-json');
CREATE SINK o WITH (connector = 'memory');
INSERT INTO o FROM s |> SELECT id;
"""


def test_fail_names_the_file_and_line_of_the_first_malformed_envelope(tmp_path: Path) -> None:
    """on_error = 'fail' (the default): E0801 at the envelope, as Flink fails the job on
    an update without ``before``; a query that reads only ``id`` still checks ``n``."""
    bad_type = envelope("d", {"id": 4, "name": "y", "n": "two"}, None)
    lines = [envelope("c", None, row(1, "a", 1)), "", bad_type, envelope("x", None, None)]
    write_files(tmp_path / "in", [lines], 0)
    flow = tmp_path / "job.flow"
    flow.write_text(FAIL, encoding="utf-8")
    job = flowc.compile(FAIL, str(flow), for_spark=True)
    report = run_job(job, available_now=True, master="local[1]", out=io.StringIO())
    (query,) = report.queries
    assert query.error == (
        "error[E0801]: malformed record in source 's': before.n (INT): cannot read 'two'"
    )
    assert query.diagnostic is not None
    assert f"--> {tmp_path / 'in' / 'part-000.json'}:3\n" in query.diagnostic


def test_batch_mode_refuses_the_source_as_flink(tmp_path: Path) -> None:
    """SET execution.mode = batch: E0299 at the source's format, as Flink 2.3 refuses a
    debezium-json table in batch mode whatever reads it ("Querying a table in batch mode is
    currently only possible for INSERT-only table sources", asked of it). flowc once ran
    it, printing the changes, where Flink runs nothing."""
    program = "SET execution.mode = batch;\n" + PROGRAM.format(sink="cdc_batch")
    flow = tmp_path / "job.flow"
    with pytest.raises(CompileError) as raised:
        flowc.compile(program, str(flow), for_spark=True)
    (refusal,) = raised.value.diagnostics
    assert refusal.code == "E0299"
    assert "a batch job reads only insert-only sources" in refusal.message
    line = program.splitlines()[refusal.span.line - 1]
    assert line[refusal.span.column - 1 :].startswith("format = 'debezium-json'")
