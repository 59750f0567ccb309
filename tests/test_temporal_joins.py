"""FOR SYSTEM_TIME AS OF on a CREATE TABLE (issue 25, item 3).

Flink reads ``JOIN t FOR SYSTEM_TIME AS OF s.x`` two ways: with ``x`` the stream's
processing time it is a lookup join (each row meets the table's current rows), with ``x``
its event time a temporal join (each row meets the one version per key valid at its
time). A flowc table is the rows its files hold when the job starts, so the first is its
dimension join. The second needs versions: a table that declares ``key`` and
``version_time`` gets Flink's temporal join (each version valid from its time until its
key's next version); any other table is refused (E0265) at the AS OF clause, in check,
compile and run, rather than joined with every version, future ones included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.cli.main import main
from flowc.diagnostics import CompileError
from tests.helpers.files import Row, at, source, write_batches, write_table
from tests.helpers.rates import ORDERS, VERSIONS, naive_time, version_of, written_versions
from tests.helpers.spark_run import compiled, run_generated, table

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
        assert "error[E0265]: FOR SYSTEM_TIME AS OF the event time 'ts': an event-time " in err
        assert "table 'rates' declares no versions" in err
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


VERSIONED = """CREATE TABLE rates (cur STRING, rate DOUBLE, since TIMESTAMP)
  WITH (connector = 'files', path = 'rates', format = 'json', key = 'cur',
  version_time = 'since');
"""


def test_event_time_as_of_a_versioned_table_meets_the_version_valid_then(
    spark: Any, tmp_path: Path
) -> None:
    """Flink's event-time temporal join: each order meets the version of its currency
    with the greatest version time not after the order's time (never a future one);
    INNER drops an order with none, LEFT pads it. Three micro-batches, the third after a
    restart on the same checkpoint; rows equal plain Python's."""
    write_table(tmp_path / "rates", VERSIONS)
    write_batches(tmp_path / "orders", ORDERS[:2])
    program = (
        source("orders", "id BIGINT, cur STRING, amount DOUBLE, ts TIMESTAMP", "5 SECONDS")
        + VERSIONED
        + "CREATE SINK inner_out WITH (connector = 'files', path = 'inner', format = 'json');\n"
        + "CREATE SINK left_out WITH (connector = 'files', path = 'left', format = 'json');\n"
        + "INSERT INTO inner_out SELECT o.id, r.rate, r.since FROM orders AS o\n"
        "  JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;\n"
        + "INSERT INTO left_out SELECT o.id, r.rate, r.since FROM orders AS o\n"
        "  LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;\n"
    )
    job = compiled(tmp_path, program)
    assert not job.spark_diagnostics
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "orders", ORDERS)  # the same two files, then the third
    run_generated(spark, tmp_path, compiled(tmp_path, program))

    def expected(left: bool) -> list[tuple[Any, ...]]:
        out = []
        for order in (o for batch in ORDERS for o in batch):
            version = version_of(order)
            if version is not None:
                out.append((order["id"], version["rate"], naive_time(version["since"])))
            elif left:
                out.append((order["id"], None, None))
        return sorted(out, key=repr)

    inner, left = expected(False), expected(True)
    assert {i for i, _, _ in left} - {i for i, _, _ in inner} == {2, 9, 10}
    assert (3, 1.15, naive_time(at(12))) in inner and (8, 1.2, naive_time(at(20))) in inner
    assert written_versions(tmp_path / "inner") == inner
    assert written_versions(tmp_path / "left") == left


def test_two_versions_of_a_key_at_one_time_are_refused_when_the_run_starts(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files give two rows of one key and one version time no order (Flink would keep the
    one it read last): E0269 at the CREATE TABLE before any row is written, exit 1, no
    stack trace; a NULL key or time never clashes."""
    monkeypatch.setenv("NO_COLOR", "1")
    flow = tmp_path / "job.flow"
    flow.write_text(
        source("orders", "id BIGINT, cur STRING, ts TIMESTAMP", "5 SECONDS")
        + VERSIONED
        + "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');\n"
        + "INSERT INTO o SELECT o.id, r.rate FROM orders AS o\n"
        "  JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;\n",
        encoding="utf-8",
    )
    write_batches(tmp_path / "orders", ORDERS[:1])
    write_table(
        tmp_path / "rates",
        [
            {"cur": "EUR", "rate": 1.1, "since": at(0)},
            {"cur": None, "rate": 1.0, "since": at(3)},
            {"cur": None, "rate": 1.0, "since": at(3)},
            {"cur": "USD", "rate": 1.0, "since": None},
            {"cur": "USD", "rate": 2.0, "since": None},
            {"cur": "EUR", "rate": 1.2, "since": at(10)},
            {"cur": "EUR", "rate": 1.3, "since": at(10)},
        ],
    )
    assert main(["run", str(flow), "--available-now"]) == 1
    err = capsys.readouterr().err
    assert "error[E0269]: table 'rates' has 2 rows with cur = 'EUR' and since = " in err
    assert "CREATE TABLE rates" in err and "Traceback" not in err
    assert "USD" not in err.split("error[E0269]")[1].splitlines()[0]
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("part-*"))


@pytest.mark.parametrize(
    ("options", "code", "underlined"),
    [
        ("key = 'cur'", "E0266", "key"),
        ("key = 'cur', version_time = 'rate'", "E0266", "'rate'"),
        ("key = 'cur', version_time = 'when'", "E0266", "'when'"),
        ("key = 'cur, rate', version_time = 'since'", "E0267", "t.cur = r.cur"),
    ],
)
def test_versioned_table_refusals_are_located(options: str, code: str, underlined: str) -> None:
    """E0266 at the option (its key, or its value), E0267 at the ON that leaves a key
    column out: in compile as in check."""
    text = HEAD.replace(
        "path = 'rates', format = 'json');", f"path = 'rates', format = 'json', {options});"
    )
    text += (
        "INSERT INTO o SELECT t.id, r.rate FROM tx AS t JOIN rates FOR SYSTEM_TIME AS OF t.ts"
        " AS r\n  ON t.cur = r.cur;\n"
    )
    error = _refusal(text, for_spark=False)
    assert error.code.value == code
    line = text.splitlines()[error.span.line - 1]
    assert line[error.span.column - 1 : error.span.end_column - 1] == underlined


def test_a_versioned_table_as_of_processing_time_is_refused_at_its_clause() -> None:
    """Flink has no processing-time temporal join of a versioned table: E0268."""
    text = HEAD.replace(
        "path = 'rates', format = 'json');",
        "path = 'rates', format = 'json', key = 'cur', version_time = 'since');",
    ) + (
        "INSERT INTO o SELECT t.id, r.rate FROM tx AS t JOIN rates FOR SYSTEM_TIME AS OF t.pt"
        " AS r ON t.cur = r.cur;\n"
    )
    error = _refusal(text, for_spark=True)
    assert error.code.value == "E0268"
    line = text.splitlines()[error.span.line - 1]
    assert line[error.span.column - 1 : error.span.end_column - 1] == "FOR SYSTEM_TIME AS OF t.pt"


def test_flink_plans_show_a_temporal_join_on_the_key_of_both_inputs() -> None:
    """Flink's TemporalJoin, both inputs hash-partitioned on the join key; Spark's plan
    says how the versions are joined."""
    text = HEAD.replace(
        "path = 'rates', format = 'json');",
        "path = 'rates', format = 'json', key = 'cur', version_time = 'since');",
    ) + (
        "INSERT INTO o SELECT t.id, r.rate FROM tx AS t LEFT JOIN rates FOR SYSTEM_TIME AS OF"
        " t.ts AS r ON t.cur = r.cur;\n"
    )
    job = flowc.compile(text, "job.flow")
    (join,) = [n for n in job.stream_graph.nodes.values() if "TemporalJoin" in n.name]
    assert join.name == "TemporalJoin(joinType=[LeftOuterJoin])"
    assert sorted((e.partitioner.value, e.keys) for e in join.in_edges) == [
        ("HASH", ("cur",)),
        ("HASH", ("cur",)),
    ]
    (query,) = job.spark_plan.queries
    assert all("broadcast(table's versions)" in e.spark for e in query.exchanges)


USER_JOB = (
    "CREATE SOURCE orders (id BIGINT, cur STRING, ts TIMESTAMP,\n"
    "  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)\n"
    "  WITH (connector = 'files', path = 'orders', format = 'json');\n"
    + VERSIONED
    + "CREATE SINK priced WITH (connector = 'console');\n"
    "INSERT INTO priced SELECT o.id, r.rate FROM orders AS o\n"
    "  LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;\n"
)
USER_TESTS = """tests:
  - name: versions
    given:
      rates:
        - - {cur: EUR, rate: 1.1, since: "2026-03-01 09:00:00"}
          - {cur: EUR, rate: 1.2, since: "2026-03-01 09:00:10"}
      orders:
        - - {id: 1, cur: EUR, ts: "2026-03-01 08:59:59"}
          - {id: 2, cur: EUR, ts: "2026-03-01 09:00:09"}
        - - {id: 3, cur: EUR, ts: "2026-03-01 09:00:10"}
    expect:
      priced:
        - {id: 1, rate: null}
        - {id: 2, rate: 1.1}
        - {id: 3, rate: 1.2}
  - name: two versions at one time
    given:
      rates:
        - - {cur: EUR, rate: 1.1, since: "2026-03-01 09:00:00"}
          - {cur: EUR, rate: 1.2, since: "2026-03-01 09:00:00"}
      orders:
        - - {id: 1, cur: EUR, ts: "2026-03-01 09:00:01"}
    expect:
      priced: []
"""


def test_flowc_test_runs_a_temporal_join_and_reports_two_versions_at_one_time(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``flowc test``: a versioned table given in a test meets each order with its version;
    two versions of a key at one time are that test's error, not a crash."""
    flow = tmp_path / "job.flow"
    flow.write_text(USER_JOB, encoding="utf-8")
    (tmp_path / "job.test.yaml").write_text(USER_TESTS, encoding="utf-8")
    assert main(["test", str(flow)]) == 1
    out = capsys.readouterr().out
    assert "PASS" in out and "versions" in out
    assert "table 'rates' has 2 rows with cur = 'EUR' and since = " in out
    assert out.strip().splitlines()[-1].startswith("1 passed")
