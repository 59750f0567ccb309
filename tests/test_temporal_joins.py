"""FOR SYSTEM_TIME AS OF on a CREATE TABLE (issue 25, item 3).

Flink reads ``JOIN t FOR SYSTEM_TIME AS OF s.x`` two ways: with ``x`` the stream's
processing time it is a lookup join (each row meets the table's current rows), with ``x``
its event time a temporal join (each row meets the one version per key valid at its
time). A flowc table is the rows its files hold when the job starts, so the first is its
dimension join; the second was run as that join too and met every version, future ones
included. It is refused (E0265) at the AS OF clause, in check, compile and run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_dimension_joins import write_table
from test_streaming_rules_on_spark import (
    Row,
    at,
    compiled,
    run_generated,
    source,
    table,
    write_batches,
)

import flowc
from flowc.cli import main
from flowc.diagnostics import CompileError

HEAD = """CREATE SOURCE tx (id BIGINT, cur STRING, amount DOUBLE, ts TIMESTAMP, pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'tx', format = 'json');
CREATE TABLE rates (cur STRING, rate DOUBLE, since TIMESTAMP)
  WITH (connector = 'files', path = 'rates', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
"""
#: The issue's query: a rates table with several versions per currency, joined as of the
#: transactions' event time.
EVENT_TIME = (
    HEAD + "INSERT INTO o SELECT t.id, t.amount * r.rate AS converted\n"
    "  FROM tx AS t JOIN rates FOR SYSTEM_TIME AS OF t.ts AS r ON t.cur = r.cur;\n"
)
CLAUSE = "FOR SYSTEM_TIME AS OF t.ts"


def _refusal(text: str, for_spark: bool) -> flowc.Diagnostic:
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow", for_spark=for_spark)
    (error,) = [d for d in raised.value.diagnostics if d.severity.name == "ERROR"]
    return error


@pytest.mark.parametrize("for_spark", [False, True])
def test_event_time_as_of_is_refused_at_its_clause(for_spark: bool) -> None:
    """Flink's plans as well as Spark's: an event-time temporal join is neither."""
    error = _refusal(EVENT_TIME, for_spark)
    assert error.code.value == "E0265"
    line = EVENT_TIME.splitlines()[error.span.line - 1]
    assert line[error.span.column - 1 : error.span.end_column - 1] == CLAUSE
    assert error.span.end_line == error.span.line
    assert "PROCTIME()" in (error.help or "")


@pytest.mark.parametrize(
    "clause",
    [
        "TIMESTAMP AS OF t.pt",
        "VERSION AS OF 3",
        "FOR SYSTEM_TIME AS OF PROCTIME()",
        "FOR SYSTEM_TIME AS OF t.pt + INTERVAL 1 HOUR",
        "FOR SYSTEM_TIME AS OF r.since",
    ],
)
def test_other_as_of_forms_are_refused_at_their_clause(clause: str) -> None:
    """Spark's time travel, PROCTIME() (Flink takes a time attribute column only), an
    expression, and a time of the table itself: each underlined whole."""
    text = HEAD + (
        f"INSERT INTO o SELECT t.id, r.rate FROM tx AS t LEFT JOIN rates {clause} AS r\n"
        "  ON t.cur = r.cur;\n"
    )
    error = _refusal(text, for_spark=True)
    assert error.code.value == "E0265"
    line = text.splitlines()[error.span.line - 1]
    assert line[error.span.column - 1 : error.span.end_column - 1] == clause


def test_check_compile_and_run_refuse_it_before_spark_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    flow = tmp_path / "job.flow"
    flow.write_text(EVENT_TIME, encoding="utf-8")
    write_batches(tmp_path / "tx", [[{"id": 1, "cur": "EUR", "amount": 1.0, "ts": at(0)}]])
    write_table(tmp_path / "rates", [{"cur": "EUR", "rate": 1.1, "since": at(0)}])
    for command in (
        ["check", str(flow)],
        ["compile", str(flow)],
        ["compile", str(flow), "--emit", "pyspark"],
        ["run", str(flow), "--available-now"],
    ):
        assert main(command) == 1, command
        err = capsys.readouterr().err
        assert "error[E0265]: FOR SYSTEM_TIME AS OF: 'ts' is not the processing time" in err
        assert f"JOIN rates {CLAUSE} AS r" in err and "^" * len(CLAUSE) in err
        assert "Traceback" not in err
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / ".flowc-checkpoints").exists()


TX: list[list[Row]] = [
    [{"id": 1, "cur": "EUR", "amount": 10.0}, {"id": 2, "cur": "USD", "amount": 20.0}],
    [{"id": 3, "cur": "EUR", "amount": 30.0}, {"id": 4, "cur": "GBP", "amount": 40.0}],
    [{"id": 5, "cur": "USD", "amount": 50.0}],
]
#: Several rows per currency: a lookup returns each of them.
RATES: list[Row] = [
    {"cur": "EUR", "rate": 1.1},
    {"cur": "EUR", "rate": 1.2},
    {"cur": "USD", "rate": 0.9},
    {"cur": "JPY", "rate": 0.01},
]


def test_processing_time_as_of_is_the_lookup_of_the_tables_rows(spark: Any, tmp_path: Path) -> None:
    """AS OF the stream's PROCTIME() column is Flink's lookup join: each row meets every
    row of its key the table holds (a flowc table does not change during a run), as a
    lookup of a key with several rows returns them all; LEFT keeps a row with none."""
    write_batches(tmp_path / "tx", TX)
    write_table(tmp_path / "rates", RATES)
    job = compiled(
        tmp_path,
        source("tx", "id BIGINT, cur STRING, amount DOUBLE, pt AS PROCTIME()")
        + "CREATE TABLE rates (cur STRING, rate DOUBLE)\n"
        "  WITH (connector = 'files', path = 'rates', format = 'json');\n"
        + "CREATE SINK converted WITH (connector = 'memory');\n"
        + "INSERT INTO converted SELECT t.id, t.amount * r.rate AS value\n"
        "  FROM tx AS t LEFT JOIN rates FOR SYSTEM_TIME AS OF t.pt AS r ON t.cur = r.cur;\n",
    )
    assert not job.spark_diagnostics
    run_generated(spark, tmp_path, job)
    expected = sorted(
        (t["id"], t["amount"] * r["rate"] if r else None)
        for batch in TX
        for t in batch
        for r in [r for r in RATES if r["cur"] == t["cur"]] or [None]
    )
    assert len(expected) == 7 and (4, None) in expected
    got = table(spark, "converted")
    assert [(i, None if v is None else round(v, 9)) for i, v in got] == [
        (i, None if v is None else round(v, 9)) for i, v in expected
    ]
