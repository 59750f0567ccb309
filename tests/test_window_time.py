"""Flink's window_time without Spark: where each refusal points, the output's columns, and
what the state manifest says of the column (its lineage) and of adopting it."""

from __future__ import annotations

import re

import pytest

import flowc
from flowc.diagnostics import CompileError
from flowc.state import StateManifest, Verdict, compare, describe_state

HEAD = (
    "SET max_parallelism = 16;\n"
    "CREATE SOURCE s (k STRING, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 1 SECOND)\n"
    "  WITH (connector = 'files', path = 'in', format = 'json');\n"
    "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');\n"
)
WINDOW = "|> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)"


def _refusal(query: str) -> tuple[str, str]:
    """The one error of ``query`` (the last line of the program) and the text it points at."""
    text = HEAD + query + "\n"
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow")
    (error,) = [d for d in raised.value.diagnostics if d.severity.name == "ERROR"]
    line = text.splitlines()[error.span.line - 1]
    assert error.span.end_line == error.span.line
    return error.code, line[error.span.column - 1 : error.span.end_column - 1]


@pytest.mark.parametrize(
    ("query", "code", "at"),
    [
        ("INSERT INTO o FROM s |> KEY BY k |> AGGREGATE count(*) AS n, window_time;",
         "E0730", "window_time"),
        (f"INSERT INTO o FROM s {WINDOW} |> AGGREGATE window_time AS t;", "E0731", "window_time"),
        ("INSERT INTO o SELECT k, window_time(window) AS t, count(*) AS n FROM s GROUP BY k;",
         "E0730", "window_time(window)"),
        ("INSERT INTO o SELECT window_time(ts) AS t, count(*) AS n FROM s\n"
         "  GROUP BY window(ts, '1 minute');", "E0730", "window_time(ts)"),
        ("INSERT INTO o SELECT hour(window_time(window)) AS h, count(*) AS n FROM s\n"
         "  GROUP BY window(ts, '1 minute');", "E0732", "window_time(window)"),
        ("INSERT INTO o SELECT count(*) AS n FROM s WHERE window_time(ts) > ts\n"
         "  GROUP BY window(ts, '1 minute');", "E0730", "window_time(ts)"),
    ],
)  # fmt: skip
def test_each_refusal_points_at_window_time(query: str, code: str, at: str) -> None:
    assert _refusal(query) == (code, at)


def test_asking_twice_points_at_the_second() -> None:
    query = (
        f"INSERT INTO o FROM s {WINDOW}\n"
        "  |> AGGREGATE window_time AS w, count(*) AS n, window_time;"
    )
    text = HEAD + query + "\n"
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow")
    (error,) = raised.value.diagnostics
    assert error.code == "E0731"
    assert error.span.column == text.splitlines()[-1].rindex("window_time") + 1


def _columns(text: str) -> list[str]:
    job = flowc.compile(HEAD + text, "job.flow")
    (insert,) = job.program.inserts
    return [c.name for c in insert.stream.schema]


def test_the_column_follows_window_end_only_when_asked_for() -> None:
    assert _columns(f"INSERT INTO o FROM s {WINDOW} |> AGGREGATE count(*) AS n;") == [
        "k",
        "window_start",
        "window_end",
        "n",
    ]
    assert _columns(
        f"INSERT INTO o FROM s {WINDOW} |> AGGREGATE count(*) AS n, window_time AS t, max(ts) AS m;"
    ) == ["k", "window_start", "window_end", "t", "n", "m"]
    assert _columns(
        "INSERT INTO o SELECT window_time(window), k, count(*) AS n FROM s\n"
        "  GROUP BY k, window(ts, '1 minute');"
    ) == ["window_time", "k", "n"]


CASCADE = (
    "INSERT INTO o FROM s {window} |> AGGREGATE count(*) AS n{asked}\n"
    "  |> WINDOW TUMBLE({time}, INTERVAL 5 MINUTES) |> AGGREGATE sum(n) AS total;\n"
)


def _manifest(asked: str, time: str) -> StateManifest:
    text = HEAD + CASCADE.format(window=WINDOW, asked=asked, time=time)
    return describe_state(flowc.compile(text, "job.flow", for_spark=True))


def test_the_state_manifest_knows_window_time() -> None:
    """The second window's time is the first's end minus 1 ms; asking for window_time
    keeps the first window's state, and moving a cascade from window_end to window_time
    regroups the second window's state (incompatible), as its groups change."""
    by_time = _manifest(", window_time", "window_time")
    (query,) = by_time.queries
    second, first = query.operators
    assert second.window is not None
    assert (second.window.time.name, second.window.time.lineage) == (
        "window_time",
        "TUMBLE(s.ts, 1 minute).end - 1 ms",
    )
    assert [a.name for a in first.aggregates] == ["n"]
    comparison = compare(_manifest("", "window_end"), by_time)
    verdicts = [o.verdict for o in comparison.queries[0].operators]
    assert verdicts == [Verdict.INCOMPATIBLE, Verdict.COMPATIBLE]
    same_cascade = compare(_manifest("", "window_end"), _manifest(", window_time", "window_end"))
    assert [o.verdict for o in same_cascade.queries[0].operators] == [
        Verdict.COMPATIBLE,
        Verdict.COMPATIBLE,
    ]


def test_window_time_not_asked_for_says_how_to_ask() -> None:
    text = (
        HEAD + f"INSERT INTO o FROM s {WINDOW} |> AGGREGATE count(*) AS n |> SELECT window_time;\n"
    )
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow")
    (error,) = raised.value.diagnostics
    assert error.code == "E0201"
    assert error.help is not None and "|> AGGREGATE ..., window_time" in error.help


def _plans(query: str) -> tuple[str, list[list[str]]]:
    """The job's JobGraph and StreamGraph as JSON, positions left out, and the columns
    of its view and its INSERT (the plans name no columns)."""
    job = flowc.compile(HEAD + query, "job.flow", for_spark=True)
    text = job.job_graph.to_json() + job.stream_graph.to_json()
    streams = [v.stream for v in job.program.views] + [i.stream for i in job.program.inserts]
    columns = [[f"{c.name} {c.type}" for c in s.schema] for s in streams]
    return re.sub(r'"(line|column|end_line|end_column)": \d+', "", text), columns


def test_sql_window_time_plans_as_the_pipe_form() -> None:
    sql = _plans(
        "CREATE VIEW v AS SELECT k, window_time(window) AS t, count(*) AS n FROM s\n"
        "  GROUP BY k, window(ts, '1 minute');\n"
        "INSERT INTO o SELECT window_time(window), sum(n) AS total FROM v\n"
        "  GROUP BY window(t, '5 minutes');\n"
    )
    pipe = _plans(
        "CREATE VIEW v AS FROM s |> KEY BY k |> WINDOW TUMBLE(ts, '1 minute')\n"
        "  |> AGGREGATE count(*) AS n, window_time AS t |> SELECT k, t, n;\n"
        "INSERT INTO o FROM v |> WINDOW TUMBLE(t, '5 minutes') |> AGGREGATE sum(n) AS total,\n"
        "  window_time |> SELECT window_time, total;\n"
    )
    assert sql == pipe
    assert sql[1] == [
        ["k STRING", "t TIMESTAMP", "n BIGINT"],
        ["window_time TIMESTAMP", "total BIGINT"],
    ]
