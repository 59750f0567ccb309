"""Malformed records in json and csv file sources, on a real local SparkSession.

Default (``on_error = 'fail'``): the query stops with flowc's error E0801 naming the
source, the file and its first malformed line. ``on_error = 'route'``: malformed records go
to the side output ``errors`` (raw, file, error) and every other record to the main output,
so no record is lost or counted twice.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import flowc
from flowc.runtime.run import RunReport, load_program, run_job
from tests.helpers.files import read_json_dir

GOOD = [
    {"user": "ann", "n": 1, "ts": "2024-01-01T00:00:00"},
    {"user": "bob", "n": 2, "ts": "2024-01-01T00:00:01"},
    {"user": "cy", "n": 3, "ts": "2024-01-01T00:00:02"},
]
BAD_TYPE = '{"user": "dan", "n": "two", "ts": "2024-01-01T00:00:03"}'
BAD_TIME = '{"user": "eve", "n": 5, "ts": "yesterday"}'
NOT_JSON = "this is not json"


def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def run(tmp_path: Path, program: str) -> RunReport:
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True)
    return run_job(job, available_now=True, master="local[2]", out=io.StringIO())


ROUTE = """
CREATE SOURCE clicks (user STRING, n INT, ts TIMESTAMP)
  WITH (connector = 'files', path = 'in', format = 'json', on_error = 'route');
CREATE SINK good WITH (connector = 'files', path = 'out/good', format = 'json');
CREATE SINK bad WITH (connector = 'files', path = 'out/bad', format = 'json');
INSERT INTO good FROM clicks |> SELECT user;
INSERT INTO bad FROM clicks.errors;
"""


def test_route_sends_each_malformed_record_to_errors_and_no_other(
    spark: Any, tmp_path: Path
) -> None:
    lines = [json.dumps(GOOD[0]), BAD_TYPE, json.dumps(GOOD[1]), NOT_JSON, BAD_TIME]
    write_lines(tmp_path / "in" / "a.json", lines)
    write_lines(tmp_path / "in" / "b.json", [json.dumps(GOOD[2])])
    report = run(tmp_path, ROUTE)
    assert [q.error for q in report.queries] == [None, None]
    # The good query reads only `user`: a bad `n` or `ts` must still keep the record out.
    good = sorted(r["user"] for r in read_json_dir(tmp_path / "out" / "good"))
    assert good == ["ann", "bob", "cy"]
    bad = {r["raw"]: r for r in read_json_dir(tmp_path / "out" / "bad")}
    assert set(bad) == {BAD_TYPE, NOT_JSON, BAD_TIME}
    file = (tmp_path / "in" / "a.json").as_uri().replace("file:///", "file:/")
    assert {r["file"] for r in bad.values()} == {file}
    assert bad[BAD_TYPE]["error"] == "column 'n' (INT): cannot read 'two'"
    assert bad[BAD_TIME]["error"] == "column 'ts' (TIMESTAMP): cannot read 'yesterday'"
    assert bad[NOT_JSON]["error"] == "not a JSON object"


def test_route_csv_with_header(spark: Any, tmp_path: Path) -> None:
    write_lines(tmp_path / "in" / "rows.csv", ["name,n", "x,1", "y,zz", "z", "w,4,extra", "v,5"])
    program = """
    CREATE SOURCE rows (name STRING, n INT)
      WITH (connector = 'files', path = 'in', format = 'csv', header = true,
            on_error = 'route');
    CREATE SINK good WITH (connector = 'files', path = 'out/good', format = 'json');
    CREATE SINK bad WITH (connector = 'files', path = 'out/bad', format = 'json');
    INSERT INTO good FROM rows;
    INSERT INTO bad FROM rows.errors |> SELECT raw, error;
    """
    report = run(tmp_path, program)
    assert [q.error for q in report.queries] == [None, None]
    good = sorted((r["name"], r["n"]) for r in read_json_dir(tmp_path / "out" / "good"))
    assert good == [("v", 5), ("x", 1)]
    bad = {r["raw"]: r["error"] for r in read_json_dir(tmp_path / "out" / "bad")}
    assert bad == {
        "y,zz": "column 'n' (INT): cannot read 'zz'",
        "z": "expected 2 fields (name STRING, n INT)",
        "w,4,extra": "expected 2 fields (name STRING, n INT)",
    }


FAIL = """
CREATE SOURCE `odd 'src'` (user STRING, n INT, ts TIMESTAMP)
  WITH (connector = 'files', path = 'in dir', format = 'json');
CREATE SINK good WITH (connector = 'files', path = 'out/good', format = 'json');
INSERT INTO good FROM `odd 'src'` |> SELECT user;
"""


def test_default_fails_naming_the_file_and_its_first_bad_line(spark: Any, tmp_path: Path) -> None:
    lines = [json.dumps(GOOD[0]), json.dumps(GOOD[1]), BAD_TIME, json.dumps(GOOD[2]), BAD_TYPE]
    write_lines(tmp_path / "in dir" / "a b.json", lines)
    report = run(tmp_path, FAIL)
    (query,) = report.queries
    assert query.diagnostic is not None
    assert query.error == (
        "error[E0801]: malformed record in source \"odd 'src'\": "
        "column 'ts' (TIMESTAMP): cannot read 'yesterday'"
    )
    # Outside the working folder the path is absolute (inside it, relative: see below).
    assert f"--> {tmp_path / 'in dir' / 'a b.json'}:3\n" in query.diagnostic
    assert f"3 | {BAD_TIME}\n" in query.diagnostic
    assert "FROM `odd 'src'`.errors" in query.diagnostic
    assert read_json_dir(tmp_path / "out" / "good") == []  # the failed batch never committed


def test_flowc_run_exits_1_with_the_error_and_no_traceback(tmp_path: Path) -> None:
    write_lines(tmp_path / "in dir" / "a b.json", [json.dumps(GOOD[0]), NOT_JSON])
    (tmp_path / "job.flow").write_text(FAIL, encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "flowc",
            "run",
            "job.flow",
            "--available-now",
            "--master",
            "local[1]",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    tail = result.stderr[result.stderr.index("error[E0801]") :]
    assert tail.startswith(
        "error[E0801]: malformed record in source \"odd 'src'\": not a JSON object\n"
        " --> in dir/a b.json:2\n"
        "  |\n"
        f"2 | {NOT_JSON}\n"
    )


def test_the_error_locates_a_multi_line_record(tmp_path: Path) -> None:
    program = FAIL
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    module = load_program(flowc.compile(program, str(flow), for_spark=True))
    data = tmp_path / "in dir" / "multi.json"
    write_lines(data, ['{"user": "a",', ' "n": 1}', '{"user": "b",', ' "n": "x"}'])
    raw = '{"user": "b",\n "n": "x"}'
    separator, end = module.FIELD_SEPARATOR, module.END
    text = separator.join(
        [module.MALFORMED, "0", data.as_uri(), "column 'n' (INT): cannot read 'x'", raw, end]
    )
    message = module.malformed_record(RuntimeError(f"[USER_RAISED_EXCEPTION] {text} SQLSTATE"))
    assert f"{data}:3\n" in message
    assert '3 | {"user": "b",\n' in message
    assert module.malformed_record(RuntimeError("some other failure")) is None
