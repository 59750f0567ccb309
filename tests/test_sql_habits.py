"""Habits of Spark and Flink users get the right answer (the cases are in
tests/data/check/sql_habits.test; this file checks what they cannot: plans, spans, help
lines, paths on disk, and one run on Spark)."""

from __future__ import annotations

import io
import json
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.cli.main import main
from flowc.diagnostics import Diagnostic, Severity
from flowc.sql.habits import run_blockers

HEAD = """SET max_parallelism = 128;
CREATE SOURCE s (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'datagen');
CREATE SINK o WITH (connector = 'console');
"""


def compile_insert(query: str) -> flowc.CompiledJob:
    return flowc.compile(HEAD + query + "\n", "job.flow", for_spark=True)


def errors(text: str, filename: str = "job.flow") -> list[Diagnostic]:
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(text, filename, for_spark=True)
    return [d for d in raised.value.diagnostics if d.severity is Severity.ERROR]


def output_columns(job: flowc.CompiledJob) -> list[tuple[str, str]]:
    (insert,) = job.program.inserts
    return [(c.name, c.type) for c in insert.stream.schema]


# ---------------------------------------------------------------- window.start in SQL


PIPE_FORM = (
    "INSERT INTO o FROM s |> KEY BY k |> WINDOW TUMBLE(ts, '1 minute') "
    "|> AGGREGATE count(*) AS n |> SELECT k, window_start AS start, window_end AS `end`, n;"
)

SPARK_FORMS = [
    "INSERT INTO o SELECT k, window.start, window.end, count(*) AS n "
    "FROM s GROUP BY window(ts, '1 minute'), k;",
    "INSERT INTO o SELECT k, window.start AS start, window.end AS `end`, count(*) AS n "
    "FROM s GROUP BY k, window(ts, '1 minute');",
    "INSERT INTO o SELECT k, window(ts, '1 minute').start, window(ts, '1 minute').end, "
    "count(*) AS n FROM s GROUP BY k, window(ts, '1 minute');",
]


@pytest.mark.parametrize("query", SPARK_FORMS)
def test_window_start_lowers_to_the_pipe_querys_plans(query: str) -> None:
    sql = compile_insert(query)
    pipe = compile_insert(PIPE_FORM)
    assert sql.job_graph.to_text() == pipe.job_graph.to_text()
    assert sql.transformations.to_text() == pipe.transformations.to_text()
    assert (
        output_columns(sql)
        == output_columns(pipe)
        == [
            ("k", "BIGINT"),
            ("start", "TIMESTAMP"),
            ("end", "TIMESTAMP"),
            ("n", "BIGINT"),
        ]
    )


def test_group_by_a_window_first_parses() -> None:
    """sqlglot takes ``GROUP BY window`` for a WINDOW clause; flowc reads Spark's call."""
    job = compile_insert(
        "INSERT INTO o SELECT window.start, count(*) AS n FROM s GROUP BY window(ts, '1 minute');"
    )
    assert output_columns(job) == [("start", "TIMESTAMP"), ("n", "BIGINT")]


def test_the_window_struct_and_its_alias() -> None:
    job = compile_insert(
        "INSERT INTO o SELECT window(ts, '1 minute') AS w, w.start AS ws, window, count(*) AS n "
        "FROM s GROUP BY w;"
    )
    names = [name for name, _ in output_columns(job)]
    assert names == ["w", "ws", "window", "n"]
    types = dict(output_columns(job))
    assert types["w"] == types["window"] and types["w"].startswith("STRUCT<start: TIMESTAMP")


def test_a_view_with_the_window_struct_is_read_with_w_start_and_w_end() -> None:
    view = (
        "CREATE VIEW v AS SELECT k, window(ts, '1 minute') AS w, count(*) AS n "
        "FROM s GROUP BY k, window(ts, '1 minute');\n"
    )
    sql = compile_insert(view + "INSERT INTO o SELECT k, w.start, w.end, n FROM v;")
    pipe = compile_insert(view + "INSERT INTO o FROM v |> SELECT k, w.start, w.end, n;")
    assert output_columns(sql) == output_columns(pipe)
    assert [name for name, _ in output_columns(sql)] == ["k", "start", "end", "n"]
    assert sql.job_graph.to_text() == pipe.job_graph.to_text()


def test_session_window_start() -> None:
    job = compile_insert(
        "INSERT INTO o SELECT k, session_window.start, session_window.end AS e, count(*) AS n "
        "FROM s GROUP BY k, session_window(ts, '5 minutes');"
    )
    assert [name for name, _ in output_columns(job)] == ["k", "start", "e", "n"]
    assert "Window(SESSION(ts, '5 minutes'))" in job.job_graph.to_text()


def test_window_start_without_a_window_says_to_group_by_one() -> None:
    (error,) = errors(
        HEAD + "INSERT INTO o SELECT k, window.start AS ws, count(*) AS n FROM s GROUP BY k;\n"
    )
    assert error.code == "E0601"
    assert (error.span.line, error.span.column, error.span.end_column) == (5, 25, 37)
    assert error.help is not None and "GROUP BY window(ts, ...)" in error.help


# ---------------------------------------------------------------- Flink SQL


def test_flink_tumble_has_the_spark_and_pipe_spellings_in_its_help() -> None:
    (error,) = errors(
        HEAD + "INSERT INTO o SELECT k, count(*) AS n FROM s\n"
        "  GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);\n"
    )
    assert error.code == "E0602"
    assert (error.span.line, error.span.column, error.span.end_column) == (6, 15, 46)
    assert error.help is not None
    assert "window(ts, '1 minute')" in error.help
    assert "|> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)" in error.help


def test_flink_hop_takes_slide_then_size() -> None:
    (error,) = errors(
        HEAD + "INSERT INTO o SELECT count(*) AS n FROM s "
        "GROUP BY HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE);\n"
    )
    assert error.code == "E0602"
    assert error.help is not None
    assert "window(ts, '5 minutes', '1 minute')" in error.help
    assert "WINDOW HOP(ts, INTERVAL 5 MINUTE, INTERVAL 1 MINUTE)" in error.help


def test_flink_session_and_window_properties() -> None:
    (error,) = errors(
        HEAD + "INSERT INTO o SELECT k, count(*) AS n FROM s "
        "GROUP BY k, SESSION(ts, INTERVAL '30' SECOND);\n"
    )
    assert error.code == "E0602"
    assert error.help is not None and "session_window(ts, '30 seconds')" in error.help
    (error,) = errors(
        HEAD + "INSERT INTO o SELECT k, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws FROM s;\n"
    )
    assert error.code == "E0602"
    assert (error.span.line, error.span.column) == (5, 25)
    assert error.help is not None and "window.start" in error.help


def test_flink_window_table_function() -> None:
    (error,) = errors(
        HEAD + "INSERT INTO o SELECT window_start, count(*) AS n\n"
        "  FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE))\n"
        "  GROUP BY window_start, window_end;\n"
    )
    assert error.code == "E0602"
    assert (error.span.line, error.span.column) == (6, 8)
    assert error.help is not None and "window(ts, '1 minute')" in error.help


def test_a_cumulate_table_function_in_spark_sql_points_to_flinks_dialect() -> None:
    """Spark SQL has no cumulating window; flowc reads Flink's in the Flink dialect and
    has the pipe step, which the help names."""
    (error,) = errors(
        HEAD + "INSERT INTO o SELECT window_start, count(*) AS n\n"
        "  FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '1' HOUR))\n"
        "  GROUP BY window_start, window_end;\n"
    )
    assert error.code == "E0602"
    assert error.help is not None
    assert "sql.dialect = 'flink'" in error.help and "WINDOW CUMULATE(" in error.help


@pytest.mark.parametrize(
    ("statement", "wanted"),
    [
        ("CREATE TABLE t (k BIGINT) WITH ('connector' = 'kafka');", "CREATE SOURCE"),
        ("CREATE TABLE t (k BIGINT) WITH ('connector' = 'kafka');", "CREATE SINK"),
        ("CREATE TABLE t WITH (connector = 'console');", "CREATE SINK name"),
        ("CREATE TABLE t (k BIGINT) WITH (connector = 'datagen');", "CREATE SOURCE name"),
        ("create or replace view v as select k from s;", "CREATE VIEW"),
    ],
)
def test_create_table_says_what_to_write(statement: str, wanted: str) -> None:
    """Flink's CREATE TABLE over a stream or sink connector: flowc's tables are bounded
    files (E0260 where the statement parses as one), otherwise a syntax error; both say
    what to write."""
    (error,) = [
        e for e in errors(statement + "\n" + HEAD + "INSERT INTO o FROM s;\n") if e.code != "W0004"
    ]
    if error.code == "E0260":
        assert (error.span.line, error.span.column) == (1, 1)
    else:
        assert error.code == "E0001"
        assert error.span.line == 1 and error.span.column in (8, 16)
    assert error.help is not None and wanted in error.help


# ---------------------------------------------------------------- E0601 at the construct

LOCATED = [
    ("SELECT k FROM s\n  ORDER BY k DESC NULLS LAST;", "ORDER BY", (6, 3, 29)),
    ("SELECT k FROM s\n  WHERE k > 0\n  LIMIT 10;", "LIMIT", (7, 3, 11)),
    ("SELECT k FROM s WHERE k IN (SELECT k FROM s);", "a subquery", (5, 42, 59)),
    (
        "SELECT count(*) AS n,\n  k % 10 FROM s GROUP BY k % 10;",
        "'k % 10' without a name",
        (6, 3, 9),
    ),
    (
        "SELECT k, count(*) AS n FROM s\n  GROUP BY k, max(k) + 1;",
        "GROUP BY an aggregate",
        (6, 15, 25),
    ),
]


@pytest.mark.parametrize(("query", "what", "where"), LOCATED, ids=[w for _, w, _ in LOCATED])
def test_unsupported_sql_points_at_its_construct(
    query: str, what: str, where: tuple[int, int, int]
) -> None:
    (error,) = errors(HEAD + "INSERT INTO o " + query + "\n")
    assert error.code == "E0601"
    assert error.message == f"not supported in a streaming query: {what}"
    assert (error.span.line, error.span.column, error.span.end_column) == where


OVER_LOCATED = [
    (
        "SELECT k,\n  row_number() OVER (PARTITION BY k ORDER BY ts) AS r FROM s;",
        "E0753",
        (6, 3, 49),
    ),
    (
        "SELECT k,\n  max(k) OVER (PARTITION BY k ORDER BY ts DESC) AS m FROM s;",
        "E0750",
        (6, 40, 42),
    ),
    ("SELECT k,\n  lead(k) OVER (ORDER BY ts) AS m FROM s;", "E0752", (6, 3, 29)),
]


@pytest.mark.parametrize(
    ("query", "code", "where"), OVER_LOCATED, ids=[c for _, c, _ in OVER_LOCATED]
)
def test_over_windows_are_refused_at_the_call(
    query: str, code: str, where: tuple[int, int, int]
) -> None:
    """An OVER window (docs/language.md, "OVER windows") is refused at the call, or at the
    part of it Flink refuses (the descending key), not at the whole SELECT."""
    (error,) = errors(HEAD + "INSERT INTO o " + query + "\n")
    assert error.code == code
    assert (error.span.line, error.span.column, error.span.end_column) == where


# ---------------------------------------------------------------- files source paths

FILES_JOB = """CREATE SOURCE s (line STRING)
  WITH (connector = 'files', format = 'text', path = 'in');
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s;
"""


def _warnings(job: flowc.CompiledJob, code: str = "W0020") -> list[Diagnostic]:
    return [d for d in job.diagnostics if d.code == code]


def test_missing_path_is_w0020_at_the_path_relative_to_the_flow_file(tmp_path: Path) -> None:
    flow = tmp_path / "jobs" / "job.flow"
    flow.parent.mkdir()
    flow.write_text(FILES_JOB, encoding="utf-8")
    job = flowc.compile(FILES_JOB, str(flow), for_spark=True)
    (warning,) = _warnings(job)
    assert warning.severity is Severity.WARNING
    assert warning.span.file == str(flow)
    assert (warning.span.line, warning.span.column, warning.span.end_column) == (2, 54, 58)
    assert str(tmp_path / "jobs" / "in") in warning.message
    # the folder beside the .flow file, not the working directory, is what counts
    (tmp_path / "in").mkdir()
    assert _warnings(flowc.compile(FILES_JOB, str(flow)))
    (tmp_path / "jobs" / "in").mkdir()
    assert not _warnings(flowc.compile(FILES_JOB, str(flow)))
    assert flowc.compile(FILES_JOB, str(flow)).diagnostics == ()


def test_run_blockers_are_the_w0020s_as_errors(tmp_path: Path) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(FILES_JOB, encoding="utf-8")
    job = flowc.compile(FILES_JOB, str(flow), for_spark=True)
    (blocker,) = run_blockers(job)
    (warning,) = _warnings(job)
    assert blocker.severity is Severity.ERROR
    assert (blocker.code, blocker.message, blocker.span, blocker.help) == (
        warning.code,
        warning.message,
        warning.span,
        warning.help,
    )
    assert run_blockers(job.diagnostics) == [blocker]
    (tmp_path / "in").mkdir()
    assert run_blockers(flowc.compile(FILES_JOB, str(flow))) == []


def test_no_path_check_without_a_file_name(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    text = FILES_JOB.replace("'in'", repr(missing))
    assert not _warnings(flowc.compile(text))  # "<string>": nothing to resolve against
    assert _warnings(flowc.compile(text, "job.flow"))  # absolute: checked all the same
    assert not _warnings(flowc.compile(FILES_JOB, "job.flow"))  # no such file: unchecked


def test_file_uris_globs_and_overrides(tmp_path: Path) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(FILES_JOB, encoding="utf-8")
    uri = FILES_JOB.replace("'in'", repr((tmp_path / "nope").as_uri()))
    assert _warnings(flowc.compile(uri, str(flow)))
    glob = FILES_JOB.replace("'in'", "'nope/*.txt'")
    assert not _warnings(flowc.compile(glob, str(flow)))
    (tmp_path / "in").mkdir()
    assert not _warnings(flowc.compile(FILES_JOB, str(flow)))
    overridden = flowc.compile(FILES_JOB, str(flow), option_overrides={"s.path": "elsewhere"})
    (warning,) = _warnings(overridden)
    assert "'elsewhere'" in warning.message


def test_check_and_compile_warn_and_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    flow = tmp_path / "job.flow"
    flow.write_text(FILES_JOB, encoding="utf-8")
    assert main(["check", str(flow)]) == 0
    assert "warning[W0020]: source 's' reads 'in', which does not exist" in capsys.readouterr().err
    assert main(["compile", str(flow), "--emit", "jobgraph"]) == 0
    assert "warning[W0020]" in capsys.readouterr().err
    assert main(["check", "--format", "json", str(flow)]) == 0
    (diagnostic,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert (diagnostic["code"], diagnostic["severity"]) == ("W0020", "warning")


# ---------------------------------------------------------------- the answer on Spark


def test_window_start_counts_on_spark(spark: Any, tmp_path: Path) -> None:
    from flowc.runtime.run import run_job

    start = datetime(2026, 1, 1, 12, 0, 0)
    rows = [
        {"user": f"u{i % 2}", "ts": (start + timedelta(seconds=17 * i)).isoformat()}
        for i in range(30)
    ]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "clicks.json").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    program = """
        SET max_parallelism = 8;
        CREATE SOURCE clicks (user STRING, ts TIMESTAMP,
                              WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
          WITH (connector = 'files', path = 'in', format = 'json');
        CREATE SINK per_minute WITH (connector = 'memory', mode = 'complete');
        INSERT INTO per_minute
          SELECT user, window.start, window.end, count(*) AS clicks
          FROM clicks
          GROUP BY window(ts, '1 minute'), user;
        """
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True)
    assert run_blockers(job) == []
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert all(query.error is None for query in report.queries)
    got = {
        (r["user"], r["start"].replace(tzinfo=None), r["end"].replace(tzinfo=None), r["clicks"])
        for r in spark.sql("SELECT * FROM per_minute").collect()
    }
    expected = Counter((r["user"], datetime.fromisoformat(r["ts"]).replace(second=0)) for r in rows)
    assert got == {
        (user, minute, minute + timedelta(minutes=1), n) for (user, minute), n in expected.items()
    }
