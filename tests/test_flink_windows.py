"""Flink SQL's windows in the Flink dialect (issue 27): each group window and window table
function has the plans of the same job written with flowc's pipe steps (JobGraph JSON,
spans aside) and its output columns; what flowc refuses is refused at the construct (the
check cases in tests/data/check/flink_windows.test give the lines, these the columns).
The rows on Spark: tests/test_flink_windows_on_spark.py."""

from __future__ import annotations

import json
import re

import pytest

import flowc
from flowc.diagnostics import Diagnostic, Severity

HEAD = """SET sql.dialect = '{dialect}';
SET max_parallelism = 128;
CREATE SOURCE s (k BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'datagen');
CREATE SINK o WITH (connector = 'console');
"""

#: (Flink SQL, the same job in flowc's pipe steps, the output columns).
FORMS = {
    "tumble_rowtime": (
        "INSERT INTO o SELECT k, TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE) AS rt, count(*) AS n\n"
        "FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);",
        "INSERT INTO o FROM s |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL '1' MINUTE)\n"
        "  |> AGGREGATE count(*) AS n, window_time AS rt |> SELECT k, rt, n;",
        ["k", "rt", "n"],
    ),
    "tvf_window_time": (
        "INSERT INTO o SELECT window_start, window_end, window_time, count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES))\n"
        "GROUP BY window_start, window_end, window_time;",
        "INSERT INTO o FROM s |> WINDOW TUMBLE(ts, INTERVAL '10' MINUTES)\n"
        "  |> AGGREGATE count(*) AS n, window_time\n"
        "  |> SELECT window_start, window_end, window_time, n;",
        ["window_start", "window_end", "window_time", "n"],
    ),
    "tumble": (
        "INSERT INTO o SELECT k, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws,\n"
        "  TUMBLE_END(ts, INTERVAL '1' MINUTE) AS we, count(*) AS n, sum(v) AS total\n"
        "FROM s GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), k;",
        "INSERT INTO o FROM s |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL '1' MINUTE)\n"
        "  |> AGGREGATE count(*) AS n, sum(v) AS total\n"
        "  |> SELECT k, window_start AS ws, window_end AS we, n, total;",
        ["k", "ws", "we", "n", "total"],
    ),
    "tumble_unnamed_properties_and_having": (
        "INSERT INTO o SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE),\n"
        "  TUMBLE_END(ts, INTERVAL '1' MINUTE), count(*) AS n\n"
        "FROM s GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)\n"
        "HAVING count(*) > 2 AND TUMBLE_END(ts, INTERVAL '1' MINUTE) > TIMESTAMP '2026-01-01';",
        "INSERT INTO o FROM s |> WINDOW TUMBLE(ts, INTERVAL '1' MINUTE)\n"
        "  |> AGGREGATE count(*) AS n\n"
        "  |> WHERE n > 2 AND window_end > TIMESTAMP '2026-01-01'\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, n;",
        ["window_start", "window_end", "n"],
    ),
    "hop_slide_then_size": (
        "INSERT INTO o SELECT k, HOP_START(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS ws,\n"
        "  HOP_END(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS we, count(*) AS n\n"
        "FROM s GROUP BY k, HOP(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE);",
        "INSERT INTO o FROM s |> KEY BY k\n"
        "  |> WINDOW HOP(ts, INTERVAL '5' MINUTE, INTERVAL '1' MINUTE)\n"
        "  |> AGGREGATE count(*) AS n |> SELECT k, window_start AS ws, window_end AS we, n;",
        ["k", "ws", "we", "n"],
    ),
    "session": (
        "INSERT INTO o SELECT k, SESSION_START(ts, INTERVAL '30' SECOND) AS ws,\n"
        "  SESSION_END(ts, INTERVAL '30' SECOND) AS we, max(v) AS top\n"
        "FROM s GROUP BY SESSION(ts, INTERVAL '30' SECOND), k;",
        "INSERT INTO o FROM s |> KEY BY k |> WINDOW SESSION(ts, INTERVAL '30' SECOND)\n"
        "  |> AGGREGATE max(v) AS top |> SELECT k, window_start AS ws, window_end AS we, top;",
        ["k", "ws", "we", "top"],
    ),
    "tumble_tvf": (
        "INSERT INTO o SELECT window_start, window_end, k, count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES))\n"
        "WHERE v > 0 GROUP BY window_start, window_end, k;",
        "INSERT INTO o FROM s |> WHERE v > 0 |> KEY BY k\n"
        "  |> WINDOW TUMBLE(ts, INTERVAL '10' MINUTES) |> AGGREGATE count(*) AS n\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, k, n;",
        ["window_start", "window_end", "k", "n"],
    ),
    "hop_tvf_named_arguments_and_alias": (
        "INSERT INTO o SELECT w.window_start, w.window_end, sum(w.v) AS total\n"
        "FROM TABLE(HOP(DATA => TABLE s, TIMECOL => DESCRIPTOR(ts),\n"
        "  SLIDE => INTERVAL '1' MINUTE, SIZE => INTERVAL '5' MINUTES)) AS w\n"
        "GROUP BY w.window_start, w.window_end;",
        "INSERT INTO o FROM s |> WINDOW HOP(ts, INTERVAL '5' MINUTES, INTERVAL '1' MINUTE)\n"
        "  |> AGGREGATE sum(v) AS total\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, total;",
        ["window_start", "window_end", "total"],
    ),
    "hop_tvf_positional": (
        "INSERT INTO o SELECT window_start, window_end, k, count(*) AS n\n"
        "FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTES))\n"
        "GROUP BY window_start, window_end, k;",
        "INSERT INTO o FROM s |> KEY BY k\n"
        "  |> WINDOW HOP(ts, INTERVAL '5' MINUTES, INTERVAL '1' MINUTE)\n"
        "  |> AGGREGATE count(*) AS n\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, k, n;",
        ["window_start", "window_end", "k", "n"],
    ),
    "session_tvf_partitioned": (
        "INSERT INTO o SELECT window_start, window_end, k, count(*) AS n, max(v) AS top\n"
        "FROM TABLE(SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), INTERVAL '30' SECOND))\n"
        "WHERE v > 0 GROUP BY window_start, window_end, k;",
        "INSERT INTO o FROM s |> WHERE v > 0 |> KEY BY k\n"
        "  |> WINDOW SESSION(ts, INTERVAL '30' SECOND) |> AGGREGATE count(*) AS n, max(v) AS top\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, k, n, top;",
        ["window_start", "window_end", "k", "n", "top"],
    ),
    "session_tvf_named_two_keys_window_time_having": (
        "INSERT INTO o SELECT w.window_start, w.window_end, w.window_time, v, k, count(*) AS n\n"
        "FROM TABLE(SESSION(DATA => TABLE s PARTITION BY (k, v), TIMECOL => DESCRIPTOR(ts),\n"
        "  GAP => INTERVAL '1' MINUTE)) AS w\n"
        "GROUP BY k, w.window_start, v, w.window_end, w.window_time HAVING count(*) > 1;",
        "INSERT INTO o FROM s |> KEY BY k, v |> WINDOW SESSION(ts, INTERVAL '1' MINUTE)\n"
        "  |> AGGREGATE count(*) AS n, window_time |> WHERE n > 1\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, window_time, v, k, n;",
        ["window_start", "window_end", "window_time", "v", "k", "n"],
    ),
    "session_tvf_unpartitioned": (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(SESSION(TABLE s, DESCRIPTOR(ts), INTERVAL '30' SECOND))\n"
        "GROUP BY window_start, window_end;",
        "INSERT INTO o FROM s |> WINDOW SESSION(ts, INTERVAL '30' SECOND)\n"
        "  |> AGGREGATE count(*) AS n\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, n;",
        ["window_start", "window_end", "n"],
    ),
    "cumulate_tvf": (
        "INSERT INTO o SELECT window_start, window_end, k, count(*) AS n, sum(v) AS total\n"
        "FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '1' HOUR))\n"
        "WHERE v > 0 GROUP BY window_start, window_end, k;",
        "INSERT INTO o FROM s |> WHERE v > 0 |> KEY BY k\n"
        "  |> WINDOW CUMULATE(ts, INTERVAL '1' HOUR, INTERVAL '1' MINUTE)\n"
        "  |> AGGREGATE count(*) AS n, sum(v) AS total\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, k, n, total;",
        ["window_start", "window_end", "k", "n", "total"],
    ),
    "cumulate_tvf_named_arguments_window_time": (
        "INSERT INTO o SELECT window_start, window_end, window_time, max(v) AS top\n"
        "FROM TABLE(CUMULATE(DATA => TABLE s, TIMECOL => DESCRIPTOR(ts),\n"
        "  STEP => INTERVAL '10' SECONDS, SIZE => INTERVAL '1' MINUTE))\n"
        "GROUP BY window_start, window_end, window_time;",
        "INSERT INTO o FROM s |> WINDOW CUMULATE(ts, INTERVAL '1' MINUTE, INTERVAL '10' SECONDS)\n"
        "  |> AGGREGATE max(v) AS top, window_time\n"
        "  |> SELECT window_start, window_end, window_time, top;",
        ["window_start", "window_end", "window_time", "top"],
    ),
    "window_top_n_over_a_tvf": (
        "INSERT INTO o SELECT * FROM (\n"
        "  SELECT k, v, window_start, window_end,\n"
        "    ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC) AS rn\n"
        "  FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES)))\n"
        "WHERE rn <= 3;",
        "INSERT INTO o FROM s |> WINDOW TUMBLE(ts, INTERVAL '10' MINUTES)\n"
        "  |> TOP 3 BY v DESC AS rn |> SELECT k, v, window_start, window_end, rn;",
        ["k", "v", "window_start", "window_end", "rn"],
    ),
    "window_top_n_per_key_with_where": (
        "INSERT INTO o SELECT k, v, rownum FROM (\n"
        "  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, k, window_end\n"
        "    ORDER BY v) AS rownum\n"
        "  FROM TABLE(HOP(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTES))\n"
        "  WHERE v > 0)\n"
        "WHERE rownum = 1;",
        "CREATE VIEW firsts AS FROM s |> WHERE v > 0\n"
        "  |> WINDOW HOP(ts, INTERVAL '5' MINUTES, INTERVAL '1' MINUTE)\n"
        "  |> TOP 1 BY v PER k AS rownum;\n"
        "INSERT INTO o SELECT k, v, rownum FROM firsts;",
        ["k", "v", "rownum"],
    ),
}


def _compile(query: str, dialect: str = "flink") -> flowc.CompiledJob:
    return flowc.compile(HEAD.format(dialect=dialect) + query + "\n", "job.flow", for_spark=True)


def _without_spans(text: str) -> str:
    data = json.loads(text)
    return re.sub(r'"span": \{[^}]*\}', "", json.dumps(data))


def _without_lines(text: str) -> str:
    return re.sub(r"\(line \d+\)", "", text)


@pytest.mark.parametrize("form", FORMS)
def test_a_flink_window_plans_as_its_pipe_form(form: str) -> None:
    flink, pipe, columns = FORMS[form]
    sql_job, pipe_job = _compile(flink), _compile(pipe)
    assert _without_spans(sql_job.job_graph.to_json()) == _without_spans(
        pipe_job.job_graph.to_json()
    )
    assert _without_lines(sql_job.transformations.to_text()) == _without_lines(
        pipe_job.transformations.to_text()
    )
    (insert,) = sql_job.program.inserts
    assert [c.name for c in insert.stream.schema] == columns


def test_hop_takes_slide_before_size() -> None:
    """Flink's HOP(ts, slide, size) is flowc's HOP(ts, size, slide): a 5-minute window every
    minute, not the other way round."""
    job = _compile(FORMS["hop_slide_then_size"][0])
    assert "Window(HOP(ts, INTERVAL '5' MINUTE, INTERVAL '1' MINUTE))" in job.job_graph.to_text()


def _errors(query: str, dialect: str = "flink") -> list[Diagnostic]:
    with pytest.raises(flowc.CompileError) as raised:
        _compile(query, dialect)
    return [d for d in raised.value.diagnostics if d.severity is Severity.ERROR]


def _under(query: str, diagnostic: Diagnostic) -> str:
    """The text of the program under the diagnostic's span."""
    lines = (HEAD.format(dialect="flink") + query + "\n").split("\n")
    span = diagnostic.span
    if span.line == span.end_line:
        return lines[span.line - 1][span.column - 1 : span.end_column - 1]
    head = lines[span.line - 1][span.column - 1 :]
    middle = lines[span.line : span.end_line - 1]
    return "\n".join([head, *middle, lines[span.end_line - 1][: span.end_column - 1]])


#: (query, code, the text the error points at).
REFUSED = [
    (
        "INSERT INTO o SELECT k, TUMBLE_START(ts, INTERVAL '2' MINUTE) AS ws, count(*) AS n\n"
        "FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);",
        "E0603",
        "TUMBLE_START(ts, INTERVAL '2' MINUTE)",
    ),
    (
        "INSERT INTO o SELECT k, HOP_END(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) AS we,\n"
        "  count(*) AS n FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);",
        "E0603",
        "HOP_END(ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)",
    ),
    (
        "INSERT INTO o SELECT k, count(*) AS n FROM s\n"
        "WHERE TUMBLE_END(ts, INTERVAL '1' MINUTE) > ts\n"
        "GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);",
        "E0603",
        "TUMBLE_END(ts, INTERVAL '1' MINUTE)",
    ),
    (
        "INSERT INTO o SELECT k, TUMBLE_PROCTIME(ts, INTERVAL '1' MINUTE) AS pt, count(*) AS n\n"
        "FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);",
        "E0617",  # over an event-time window (a processing-time one reads it)
        "TUMBLE_PROCTIME(ts, INTERVAL '1' MINUTE)",
    ),
    (
        "INSERT INTO o SELECT k, TUMBLE_ROWTIME(ts, INTERVAL '2' MINUTE) AS rt, count(*) AS n\n"
        "FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE);",
        "E0603",
        "TUMBLE_ROWTIME(ts, INTERVAL '2' MINUTE)",
    ),
    (
        "INSERT INTO o SELECT k, count(*) AS n\n"
        "FROM s GROUP BY k, TUMBLE(ts, INTERVAL '1' MINUTE)\n"
        "HAVING TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE) > TIMESTAMP '2026-01-01';",
        "E0602",
        "TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE)",
    ),
    (
        "INSERT INTO o SELECT count(*) AS n FROM s GROUP BY HOP(ts, INTERVAL '5' MINUTE);",
        "E0605",
        "HOP(ts, INTERVAL '5' MINUTE)",
    ),
    (
        "INSERT INTO o SELECT *\n"
        "FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES));",
        "E0604",
        "TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES))",
    ),
    (
        "INSERT INTO o SELECT * FROM (\n"
        "  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC)"
        " AS rn\n"
        "  FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES)))\n"
        "WHERE rn <= 3;",
        "E0602",
        "TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES))",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '4' MINUTE,\n"
        "  INTERVAL '10' MINUTES))\n"
        "GROUP BY window_start, window_end;",
        "E0737",
        "CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '4' MINUTE,\n  INTERVAL '10' MINUTES)",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MONTH,\n"
        "  INTERVAL '1' YEAR))\n"
        "GROUP BY window_start, window_end;",
        "E0737",
        "CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MONTH,\n  INTERVAL '1' YEAR)",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), SLIDE => INTERVAL '1' MINUTE,\n"
        "  SIZE => INTERVAL '10' MINUTES))\n"
        "GROUP BY window_start, window_end;",
        "E0605",
        "SLIDE => INTERVAL '1' MINUTE",
    ),
    (
        "INSERT INTO o SELECT * FROM (\n"
        "  SELECT k, v, window_start, window_end,\n"
        "    ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC) AS rn\n"
        "  FROM TABLE(CUMULATE(TABLE s, DESCRIPTOR(ts), INTERVAL '1' MINUTE,\n"
        "    INTERVAL '2' HOURS)))\n"
        "WHERE rn <= 2;",
        "E0736",
        "ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC)",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), INTERVAL '30' SECOND))\n"
        "GROUP BY window_start, window_end;",
        "E0735",
        "GROUP BY window_start, window_end",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, k, count(*) AS n\n"
        "FROM TABLE(SESSION(TABLE s, DESCRIPTOR(ts), INTERVAL '30' SECOND))\n"
        "GROUP BY window_start, window_end, k;",
        "E0735",
        "GROUP BY window_start, window_end, k",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, k, count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE s PARTITION BY k, DESCRIPTOR(ts), INTERVAL '1' MINUTE))\n"
        "GROUP BY window_start, window_end, k;",
        "E0605",
        "PARTITION BY k",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, k, count(*) AS n\n"
        "FROM TABLE(SESSION(TABLE s PARTITION BY (k, s.v), DESCRIPTOR(ts), INTERVAL '1' MINUTE))\n"
        "GROUP BY window_start, window_end, k;",
        "E0605",
        "s.v",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(SESSION(TABLE s, DESCRIPTOR(ts), SIZE => INTERVAL '1' MINUTE))\n"
        "GROUP BY window_start, window_end;",
        "E0605",
        "SIZE => INTERVAL '1' MINUTE",
    ),
    (
        "INSERT INTO o SELECT * FROM (\n"
        "  SELECT k, v, window_start, window_end,\n"
        "    ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY v DESC) AS rn\n"
        "  FROM TABLE(SESSION(TABLE s PARTITION BY k, DESCRIPTOR(ts), INTERVAL '30' SECOND)))\n"
        "WHERE rn <= 2;",
        "E0734",
        "ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY v DESC)",
    ),
    (
        "INSERT INTO o SELECT k, v FROM (\n"
        "  SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn\n"
        "  FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES)))\n"
        "WHERE rn <= 3;",
        "E0604",
        "ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC)",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE s, ts, INTERVAL '10' MINUTES)) GROUP BY window_start, window_end;",
        "E0605",
        "ts",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE nope, DESCRIPTOR(ts), INTERVAL '10' MINUTES))\n"
        "GROUP BY window_start, window_end;",
        "E0101",
        "TABLE nope",
    ),
    (
        "INSERT INTO o SELECT window_start, window_end, count(*) AS n\n"
        "FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES))\n"
        "WHERE window_time > TIMESTAMP '2026-01-01' GROUP BY window_start, window_end;",
        "E0602",
        "window_time",
    ),
]


@pytest.mark.parametrize(("query", "code", "text"), REFUSED, ids=[r[2][:24] for r in REFUSED])
def test_a_refused_flink_window_is_refused_at_its_construct(
    query: str, code: str, text: str
) -> None:
    (error,) = _errors(query)
    assert (error.code, _under(query, error)) == (code, text)
    assert error.help


def test_the_spark_dialect_keeps_e0602() -> None:
    """Without ``sql.dialect = 'flink'`` Flink's windows stay E0602, as before issue 27."""
    for form in ("tumble", "tumble_tvf"):
        (error,) = _errors(FORMS[form][0], dialect="spark")
        assert error.code == "E0602"


def test_a_window_top_n_over_a_window_aggregation_plans_as_top_over_its_view() -> None:
    """Flink's window Top-N over a grouped window table function: the Top-N's subquery is
    a view, and its ROW_NUMBER() the TOP over that view, as the pipe query writes it."""
    flink = (
        "INSERT INTO o SELECT * FROM (\n"
        "  SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end\n"
        "    ORDER BY total DESC) AS rownum\n"
        "  FROM (SELECT window_start, window_end, k, SUM(v) AS total\n"
        "        FROM TABLE(TUMBLE(TABLE s, DESCRIPTOR(ts), INTERVAL '10' MINUTES))\n"
        "        GROUP BY window_start, window_end, k))\n"
        "WHERE rownum <= 3;"
    )
    pipe = (
        "CREATE VIEW totals AS FROM s |> KEY BY k\n"
        "  |> WINDOW TUMBLE(ts, INTERVAL '10' MINUTES) |> AGGREGATE SUM(v) AS total\n"
        "  |> SELECT window_start AS window_start, window_end AS window_end, k, total;\n"
        "INSERT INTO o FROM totals\n"
        "  |> TOP 3 BY total DESC PER window_start, window_end AS rownum;"
    )
    sql_job, pipe_job = _compile(flink), _compile(pipe)
    assert _without_spans(sql_job.job_graph.to_json()) == _without_spans(
        pipe_job.job_graph.to_json()
    )
    (insert,) = sql_job.program.inserts
    assert [c.name for c in insert.stream.schema] == [
        "window_start",
        "window_end",
        "k",
        "total",
        "rownum",
    ]
