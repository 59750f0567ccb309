"""``flowc diff OLD.flow NEW.flow``: state verdicts, plan changes, exit codes, JSON.

Pure compilation (no Spark): each edit of the restart guard's matrix is diffed and its
verdict and exit code checked; then the plan-change listing, the JSON document, the
text form, ``--against`` a checkpoint folder and the file errors.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from flowc.cli import main as cli
from flowc.diff import DIFF_SCHEMA_VERSION, diff_plans
from flowc.driver import compile

HEAD = """SET parallelism = 2;
SET max_parallelism = 128;
CREATE SOURCE s (k BIGINT, k2 BIGINT, z STRING, v BIGINT, ts TIMESTAMP,
                 WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'data/s', format = 'json');
CREATE SOURCE r (rk BIGINT, w BIGINT, rts TIMESTAMP,
                 WATERMARK FOR rts AS rts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'data/r', format = 'json');
"""
AGG = (
    HEAD
    + """CREATE SINK o WITH (connector = 'console', mode = 'update');
INSERT INTO o
  FROM s
  |> KEY BY k
  |> AGGREGATE count(*) AS n;
"""
)
KEYS2 = AGG.replace("KEY BY k", "KEY BY k, z")
WINDOW = (
    HEAD
    + """CREATE SINK o WITH (connector = 'console', mode = 'append');
INSERT INTO o
  FROM s
  |> KEY BY k
  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
  |> AGGREGATE count(*) AS n;
"""
)
DEDUP = (
    HEAD
    + """CREATE SINK o WITH (connector = 'console', mode = 'append');
INSERT INTO o
  FROM s
  |> DEDUPLICATE ON k, ts;
"""
)
JOIN = (
    HEAD
    + """CREATE SINK o WITH (connector = 'console', mode = 'append');
INSERT INTO o
  FROM s
  |> JOIN r ON k = rk AND rts BETWEEN ts AND ts + INTERVAL 1 HOUR
  |> SELECT k, v, w;
"""
)
TWO = (
    HEAD
    + """CREATE SINK o WITH (connector = 'console', mode = 'append');
INSERT INTO o
  FROM s
  |> DEDUPLICATE ON k, ts
  |> KEY BY k
  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
  |> AGGREGATE count(*) AS n;
"""
)
ONE = TWO.replace("  |> DEDUPLICATE ON k, ts\n", "")
DEDUP_THEN_JOIN = (
    HEAD
    + """CREATE SINK o WITH (connector = 'console', mode = 'append');
INSERT INTO o
  FROM s
  |> DEDUPLICATE ON k, ts
  |> JOIN r ON k = rk AND rts BETWEEN ts AND ts + INTERVAL 1 HOUR
  |> SELECT k, v, w;
"""
)
_DEDUP_STEP = "  |> DEDUPLICATE ON k, ts\n"
_JOIN_STEP = "  |> JOIN r ON k = rk AND rts BETWEEN ts AND ts + INTERVAL 1 HOUR\n"
JOIN_THEN_DEDUP = DEDUP_THEN_JOIN.replace(_DEDUP_STEP + _JOIN_STEP, _JOIN_STEP + _DEDUP_STEP)
PROJECTED = AGG.replace("AGGREGATE count(*) AS n;", "AGGREGATE count(*) AS n\n  |> SELECT k, n;")
TOP = AGG.replace("|> KEY BY k\n  |> AGGREGATE count(*) AS n;", "|> TOP 2 BY v DESC PER k;")
PINNED = AGG.replace("count(*) AS n", "count(*) AS n WITH (uid = 'counts')")

INCOMPATIBLE, COMPATIBLE, RESCALED = "incompatible", "compatible", "rescaled"

#: The restart guard's matrix: (old, new, the verdict of the edited operator, the aspect
#: of its finding).
MATRIX: dict[str, tuple[str, str, str, str]] = {
    "count to sum of the same type": (
        AGG,
        AGG.replace("count(*)", "sum(v)"),
        INCOMPATIBLE,
        "aggregates",
    ),
    "key renamed": (
        AGG,
        AGG.replace("KEY BY k", "RENAME k AS id\n  |> KEY BY id"),
        COMPATIBLE,
        "names",
    ),
    "key replaced": (AGG, AGG.replace("KEY BY k", "KEY BY k2"), INCOMPATIBLE, "keys"),
    "keys reordered": (KEYS2, KEYS2.replace("KEY BY k, z", "KEY BY z, k"), INCOMPATIBLE, "keys"),
    "key added": (AGG, KEYS2, INCOMPATIBLE, "keys"),
    "window size": (WINDOW, WINDOW.replace("1 MINUTE", "2 MINUTES"), INCOMPATIBLE, "window"),
    "window kind": (
        WINDOW,
        WINDOW.replace(
            "TUMBLE(ts, INTERVAL 1 MINUTE)", "HOP(ts, INTERVAL 1 MINUTE, INTERVAL 30 SECONDS)"
        ),
        INCOMPATIBLE,
        "window",
    ),
    "dedup columns": (DEDUP, DEDUP.replace("ON k, ts", "ON k, z, ts"), INCOMPATIBLE, "keys"),
    "join type": (JOIN, JOIN.replace("|> JOIN", "|> LEFT JOIN"), INCOMPATIBLE, "join"),
    "join keys": (JOIN, JOIN.replace("k = rk", "v = rk"), INCOMPATIBLE, "join"),
    "join bound": (JOIN, JOIN.replace("1 HOUR", "2 HOURS"), INCOMPATIBLE, "join"),
    "aggregate added": (
        AGG,
        AGG.replace("count(*) AS n", "count(*) AS n, sum(v) AS total"),
        INCOMPATIBLE,
        "aggregates",
    ),
    "stateful step removed": (TWO, ONE, INCOMPATIBLE, "removed"),
    "stateful step added before another": (ONE, TWO, INCOMPATIBLE, "added"),
    "stateful steps reordered": (DEDUP_THEN_JOIN, JOIN_THEN_DEDUP, INCOMPATIBLE, "order"),
    "parallelism": (
        AGG,
        AGG.replace("SET parallelism = 2", "SET parallelism = 4"),
        RESCALED,
        "parallelism",
    ),
    "max parallelism": (
        AGG,
        AGG.replace("max_parallelism = 128", "max_parallelism = 256"),
        RESCALED,
        "max_parallelism",
    ),
    "TOP n": (TOP, TOP.replace("TOP 2", "TOP 3"), INCOMPATIBLE, "aggregates"),
    "TOP order": (TOP, TOP.replace("BY v DESC", "BY v ASC"), INCOMPATIBLE, "aggregates"),
    "TOP order column": (TOP, TOP.replace("BY v DESC", "BY k2 DESC"), INCOMPATIBLE, "aggregates"),
    "TOP per": (TOP, TOP.replace("PER k", "PER k2"), INCOMPATIBLE, "keys"),
    "uid changed": (PINNED, PINNED.replace("'counts'", "'counts-v2'"), INCOMPATIBLE, "uid"),
    "filter added before the aggregate": (
        AGG,
        AGG.replace("FROM s\n", "FROM s\n  |> WHERE v > 0\n"),
        COMPATIBLE,
        "operator_id",
    ),
    "column added to the projection after it": (
        PROJECTED,
        PROJECTED.replace("SELECT k, n", "SELECT k, n, n * 2 AS twice"),
        COMPATIBLE,
        "steps",
    ),
}


def _files(tmp_path: Path, old: str, new: str) -> tuple[str, str]:
    (tmp_path / "old.flow").write_text(old, encoding="utf-8")
    (tmp_path / "new.flow").write_text(new, encoding="utf-8")
    return str(tmp_path / "old.flow"), str(tmp_path / "new.flow")


def _diff(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["diff", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: str, new: str, *extra: str
) -> tuple[int, dict[str, Any]]:
    code, out, err = _diff(capsys, *_files(tmp_path, old, new), "--format", "json", *extra)
    assert err == ""
    document: dict[str, Any] = json.loads(out)
    return code, document


def _operators(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [o for q in document["state"] for o in q["operators"]]


# ---------------------------------------------------------------- the edit matrix


@pytest.mark.parametrize("edit", list(MATRIX))
def test_edit_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str) -> None:
    old, new, verdict, aspect = MATRIX[edit]
    code, document = _json(tmp_path, capsys, old, new)
    assert code == (1 if verdict == INCOMPATIBLE else 0)
    assert document["ok"] is (verdict != INCOMPATIBLE)
    assert document["verdict"] == verdict
    findings = [(o["verdict"], f["aspect"]) for o in _operators(document) for f in o["findings"]]
    assert (verdict, aspect) in findings, findings
    # The text form says the same, with the same exit code.
    code_text, out, _ = _diff(capsys, str(tmp_path / "old.flow"), str(tmp_path / "new.flow"))
    assert code_text == code
    assert out.rstrip("\n").splitlines()[-1].startswith("ok:" if code == 0 else "not ok:")


def test_identical_files_no_changes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _diff(capsys, *_files(tmp_path, TWO, TWO))
    assert (code, err) == (0, "")
    assert out.startswith("no changes")
    code, document = _json(tmp_path, capsys, TWO, TWO)
    assert code == 0
    assert document["ok"] is True and document["changed"] is False
    assert document["verdict"] == "unchanged"
    assert document["plan"]["changed"] is False
    assert all(o["verdict"] == "unchanged" and not o["findings"] for o in _operators(document))


# ---------------------------------------------------------------- the text form


def test_text_shows_the_new_line_the_old_definition_and_the_ways_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = _files(tmp_path, AGG, AGG.replace("count(*)", "sum(v)"))
    code, out, err = _diff(capsys, old, new)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0].startswith("error[E0820]: Keyed Aggregate: 'n' is now sum(v) (BIGINT)")
    assert lines[1].endswith(f"--> {new}:13:6")
    assert lines[3] == "13 |   |> AGGREGATE sum(v) AS n;"
    assert lines[4] == "   |      " + "^" * len("AGGREGATE sum(v) AS n")
    assert lines[5] == f"   = was: AGGREGATE count(*) AS n ({old}:13)"
    assert lines[6].startswith("   = help: revert the change")
    assert "--checkpoint-dir" in lines[6] and "flowc run --reset-state o" in lines[6]
    assert "incompatible Keyed Aggregate" in out
    assert lines[-1] == "not ok: the edit would lose or corrupt state (1 incompatible)"


def test_a_line_still_there_is_not_said_to_be_gone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An AGGREGATE whose text is unchanged but whose input's type changed: the finding
    points at the line in the new file and says no 'was' (nothing to show) and never
    'no longer in' (the operator is there)."""
    sum_of_v = AGG.replace("count(*)", "sum(v)")
    old, new = _files(tmp_path, sum_of_v, sum_of_v.replace("v BIGINT", "v DOUBLE"))
    code, out, _ = _diff(capsys, old, new)
    assert code == 1
    lines = out.splitlines()
    assert lines[0].startswith("error[E0820]: Keyed Aggregate: 'n' is now sum(v) (DOUBLE)")
    assert lines[1].endswith(f"--> {new}:13:6")
    assert "no longer in" not in out and "= was:" not in out
    assert lines[5].startswith("   = help: ")


def test_rescaled_is_a_warning_and_exit_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, _, _ = MATRIX["parallelism"]
    code, out, _ = _diff(capsys, *_files(tmp_path, old, new))
    assert code == 0
    assert out.startswith("warning[E0821]: Keyed Aggregate: parallelism 2 → 4")
    assert "ok: every state survives the edit (1 rescaled)" in out


def test_color(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _files(tmp_path, AGG, AGG.replace("count(*)", "sum(v)"))
    _, out, _ = _diff(capsys, *files, "--color", "always")
    assert "\x1b[1;31merror[E0820]\x1b[0m" in out
    _, out, _ = _diff(capsys, *files, "--color", "never")
    assert "\x1b" not in out


# ---------------------------------------------------------------- plan changes


def test_filter_before_the_aggregate_rechains_and_changes_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old, new, _, _ = MATRIX["filter added before the aggregate"]
    code, out, _ = _diff(capsys, *_files(tmp_path, old, new))
    assert code == 0
    assert "~ re-chained: [Source: s] (p 2) is now [Source: s -> Filter] (p 2)" in out
    assert "+ Filter" in out
    assert (
        "~ Keyed Aggregate: operator id 20ba6b65 -> 90bea66d: an auto-generated id changes "
        "whenever the topology before it does"
    ) in out
    assert "= help: pin the operator's id with WITH (uid = '...')" in out
    _, document = _json(tmp_path, capsys, old, new)
    plan = document["plan"]
    assert [v["change"] for v in plan["vertices"]] == ["rechained"]
    (rechained,) = plan["vertices"]
    assert [c["name"] for c in rechained["old"]] == ["Source: s"]
    assert [c["name"] for c in rechained["new"]] == ["Source: s -> Filter"]
    ids = {o["name"]: o for o in plan["operator_ids"]}
    assert set(ids) == {"Source: s", "Keyed Aggregate", "Sink: o"}
    assert ids["Keyed Aggregate"]["reason"] == "topology"
    assert ids["Keyed Aggregate"]["stateful"] is True
    assert "uid" in ids["Keyed Aggregate"]["help"]
    assert [o["name"] for o in plan["operators"]["added"]] == ["Filter"]
    assert plan["operators"]["removed"] == plan["operators"]["changed"] == []
    assert plan["exchanges"] == []  # the aggregate still reads HASH(k)


def test_pinned_uid_keeps_the_id_and_a_changed_uid_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    filtered = PINNED.replace("FROM s\n", "FROM s\n  |> WHERE v > 0\n")
    _, document = _json(tmp_path, capsys, PINNED, filtered)
    names = [o["name"] for o in document["plan"]["operator_ids"]]
    assert "Keyed Aggregate" not in names  # pinned: its id survives the edit before it
    _, document = _json(tmp_path, capsys, PINNED, PINNED.replace("'counts'", "'counts-v2'"))
    (change,) = [o for o in document["plan"]["operator_ids"] if o["name"] == "Keyed Aggregate"]
    assert change["reason"] == "uid_changed"
    assert (change["old_uid"], change["new_uid"]) == ("counts", "counts-v2")


def test_exchange_parallelism_and_spark_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, document = _json(tmp_path, capsys, AGG, AGG.replace("KEY BY k", "KEY BY k2"))
    (exchange,) = document["plan"]["exchanges"]
    assert exchange["change"] == "changed"
    assert exchange["old"]["keys"] == ["k"] and exchange["new"]["keys"] == ["k2"]
    assert exchange["message"] == "Keyed Aggregate <- Source: s: HASH(k) -> HASH(k2)"
    spark = document["plan"]["spark"]
    assert [s["kind"] for s in spark] == ["exchange_changed"]
    assert spark[0]["old"] == "groupBy(k)" and spark[0]["new"] == "groupBy(k2)"

    old, new, _, _ = MATRIX["parallelism"]
    _, document = _json(tmp_path, capsys, old, new)
    changes = [(p["field"], p["old"], p["new"]) for p in document["plan"]["parallelism"]]
    assert changes == [("parallelism", 2, 4), ("parallelism", 2, 4)]
    kinds = [s["kind"] for s in document["plan"]["spark"]]
    assert kinds == ["shuffle_partitions", "exchange_changed"]
    assert "flowc run repartitions the state" in document["plan"]["spark"][0]["message"]

    old, new, _, _ = MATRIX["max parallelism"]
    _, document = _json(tmp_path, capsys, old, new)
    (change,) = [p for p in document["plan"]["parallelism"] if p["vertex"].startswith("Keyed")]
    assert (change["field"], change["old"], change["new"], change["keyed"]) == (
        "max_parallelism",
        128,
        256,
        True,
    )
    assert "Flink cannot restore its keyed state" in change["message"]


def test_default_max_parallelism_moves_with_parallelism(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unset = AGG.replace("SET max_parallelism = 128;\n", "")
    _, document = _json(
        tmp_path, capsys, unset, unset.replace("parallelism = 2", "parallelism = 200")
    )
    (change,) = [
        p for p in document["plan"]["parallelism"] if p["field"] == "max_parallelism" and p["keyed"]
    ]
    assert (change["old"], change["new"]) == (None, None)
    assert (change["old_effective"], change["new_effective"]) == (128, 512)
    assert "unset (default 128) -> unset (default 512)" in change["message"]


def test_an_operator_redefined_keeps_its_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A window's size is in its name: the operator is matched all the same (same id),
    and listed as changed, not as one removed and one added."""
    old, new, _, _ = MATRIX["window size"]
    _, document = _json(tmp_path, capsys, old, new)
    plan = document["plan"]
    assert plan["vertices"] == [] and plan["spark"] == []
    assert plan["operators"]["added"] == plan["operators"]["removed"] == []
    (change,) = plan["operators"]["changed"]
    assert change["old"]["name"] == "Window(TUMBLE(ts, INTERVAL 1 MINUTE))"
    assert change["new"]["name"] == "Window(TUMBLE(ts, INTERVAL 2 MINUTES))"
    _, out, _ = _diff(capsys, str(tmp_path / "old.flow"), str(tmp_path / "new.flow"))
    assert (
        "~ Window(TUMBLE(ts, INTERVAL 1 MINUTE)) is now Window(TUMBLE(ts, INTERVAL 2 MINUTES))"
    ) in out


def test_stateful_step_added_is_a_new_vertex(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, document = _json(tmp_path, capsys, ONE, TWO)
    plan = document["plan"]
    assert [(v["change"], [c["name"] for c in v["new"]]) for v in plan["vertices"]] == [
        ("added", ["Deduplicate"])
    ]
    assert [s["kind"] for s in plan["spark"]] == ["exchange_added"]
    _, document = _json(tmp_path, capsys, TWO, ONE)
    plan = document["plan"]
    assert [(v["change"], [c["name"] for c in v["old"]]) for v in plan["vertices"]] == [
        ("removed", ["Deduplicate"])
    ]
    assert [o["name"] for o in plan["operators"]["removed"]] == ["Deduplicate"]


def test_reordered_steps_rechain_both_vertices(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, document = _json(tmp_path, capsys, DEDUP_THEN_JOIN, JOIN_THEN_DEDUP)
    (change,) = document["plan"]["vertices"]
    assert change["change"] == "rechained"
    assert [c["name"] for c in change["old"]] == ["Deduplicate", "Join -> Map -> Sink: o"]
    assert [c["name"] for c in change["new"]] == ["Join", "Deduplicate -> Map -> Sink: o"]


def test_query_added_and_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    two_queries = AGG + (
        "CREATE SINK p WITH (connector = 'console', mode = 'update');\n"
        "INSERT INTO p FROM s |> KEY BY z |> AGGREGATE count(*) AS m;\n"
    )
    code, document = _json(tmp_path, capsys, AGG, two_queries)
    assert code == 0  # a new query starts with empty state: nothing is lost
    assert [s["kind"] for s in document["plan"]["spark"]] == ["query_added"]
    assert {q["name"]: q["verdict"] for q in document["state"]} == {
        "o": "unchanged",
        "p": "unchanged",
    }
    code, document = _json(tmp_path, capsys, two_queries, AGG)
    assert code == 1  # the removed query's state is left behind
    assert [s["kind"] for s in document["plan"]["spark"]] == ["query_removed"]


def test_plan_diff_is_deterministic() -> None:
    old = compile(DEDUP_THEN_JOIN, "old.flow", for_spark=True)
    new = compile(JOIN_THEN_DEDUP, "new.flow", for_spark=True)
    first = diff_plans(old, new).to_json()
    assert diff_plans(old, new).to_json() == first
    again = diff_plans(
        compile(DEDUP_THEN_JOIN, "old.flow", for_spark=True),
        compile(JOIN_THEN_DEDUP, "new.flow", for_spark=True),
    )
    assert again.to_json() == first
    assert not diff_plans(old, old).changed


def test_job_renamed_only_when_named_on_purpose() -> None:
    a = compile(AGG, "a.flow", for_spark=True)
    b = compile(AGG, "b.flow", for_spark=True)
    assert not diff_plans(a, b).job_renamed  # one job in two files
    named = compile("SET job.name = 'counts';\n" + AGG, "b.flow", for_spark=True)
    assert diff_plans(a, named).job_renamed
    assert "renamed 'a' -> 'counts'" in "\n".join(diff_plans(a, named).to_text())


def test_long_pipeline_diffs_quickly() -> None:
    """Matching is a dictionary lookup per operator and tier: 400 steps, a filter added
    at the front (every auto-generated id after it changes), well under two seconds."""
    import time

    steps = "".join(f"  |> WHERE v > {i}\n  |> REBALANCE\n" for i in range(200))
    old_text = AGG.replace("FROM s\n", "FROM s\n" + steps)
    new_text = AGG.replace("FROM s\n", "FROM s\n  |> WHERE k > 0\n" + steps)
    old = compile(old_text, "old.flow", for_spark=True)
    new = compile(new_text, "new.flow", for_spark=True)
    started = time.perf_counter()
    diff = diff_plans(old, new)
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0
    # The filter added is the one added (its text tells it from the 200 others), and
    # every operator but the source (first, and still chained to one filter) changes id.
    assert [(o.name, o.span.line) for o in diff.operators_added] == [("Filter", 12)]
    assert len(diff.operator_ids) == len(new.stream_graph.nodes) - 2
    assert not diff.operators_removed


# ---------------------------------------------------------------- the JSON document


def test_json_document_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new, _, _ = MATRIX["filter added before the aggregate"]
    _, document = _json(tmp_path, capsys, old, new)
    assert list(document) == [
        "flowc_version",
        "schema_version",
        "old",
        "new",
        "ok",
        "changed",
        "verdict",
        "state",
        "plan",
        "checkpoint",
    ]
    assert document["schema_version"] == DIFF_SCHEMA_VERSION == 1
    assert document["old"] == {"file": str(tmp_path / "old.flow"), "job": "old"}
    assert document["checkpoint"] is None
    (query,) = document["state"]
    assert list(query) == ["name", "verdict", "findings", "operators"]
    (operator,) = query["operators"]
    assert list(operator) == [
        "query",
        "name",
        "old_index",
        "new_index",
        "old",
        "new",
        "verdict",
        "findings",
    ]
    (finding,) = operator["findings"]
    assert list(finding) == ["verdict", "code", "aspect", "message", "help", "old", "new"]
    plan = document["plan"]
    assert list(plan) == [
        "changed",
        "job",
        "vertices",
        "exchanges",
        "parallelism",
        "operator_ids",
        "operators",
        "spark",
    ]
    assert list(plan["vertices"][0]) == ["change", "message", "old", "new"]
    assert list(plan["vertices"][0]["new"][0]) == [
        "id",
        "name",
        "parallelism",
        "max_parallelism",
        "operators",
        "file",
        "line",
    ]
    assert list(plan["operator_ids"][0]) == [
        "name",
        "old_id",
        "new_id",
        "old_uid",
        "new_uid",
        "reason",
        "stateful",
        "message",
        "help",
        "file",
        "line",
    ]
    assert list(plan["operators"]["added"][0]) == [
        "id",
        "name",
        "operator",
        "uid",
        "parallelism",
        "stateful",
        "file",
        "line",
        "column",
    ]
    _, document = _json(tmp_path, capsys, AGG, AGG.replace("KEY BY k", "KEY BY k2"))
    assert list(document["plan"]["exchanges"][0]) == [
        "change",
        "consumer",
        "old",
        "new",
        "message",
        "file",
        "line",
    ]
    assert list(document["plan"]["exchanges"][0]["old"]) == [
        "from",
        "ship_strategy",
        "keys",
        "chained",
    ]
    assert list(document["plan"]["spark"][0]) == ["kind", "query", "old", "new", "message"]
    old, new, _, _ = MATRIX["max parallelism"]
    _, document = _json(tmp_path, capsys, old, new)
    assert list(document["plan"]["parallelism"][0]) == [
        "field",
        "vertex",
        "vertex_id",
        "old",
        "new",
        "old_effective",
        "new_effective",
        "keyed",
        "message",
        "file",
        "line",
    ]


# ---------------------------------------------------------------- errors


def test_compile_error_in_either_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = AGG.replace("KEY BY k", "KEY BY missing")
    code, out, err = _diff(capsys, *_files(tmp_path, broken, AGG))
    assert (code, out) == (1, "")
    assert "error[E0201]: unknown column 'missing'" in err
    assert "old.flow:12" in err
    code, out, err = _diff(capsys, *_files(tmp_path, AGG, broken))
    assert code == 1 and "new.flow:12" in err
    code, out, _ = _diff(capsys, *_files(tmp_path, broken, broken), "--format", "json")
    assert code == 1
    files = {d["file"] for d in json.loads(out)["diagnostics"]}
    assert files == {str(tmp_path / "old.flow"), str(tmp_path / "new.flow")}


def test_unreadable_files_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, _ = _files(tmp_path, AGG, AGG)
    code, out, err = _diff(capsys, old, str(tmp_path / "nope.flow"))
    assert (code, out) == (2, "")
    assert "nope.flow: no such file" in err
    code, _, err = _diff(capsys, str(tmp_path / "a.flow"), str(tmp_path))
    assert code == 2
    assert "a.flow: no such file" in err and "is a directory" in err
    code, _, err = _diff(capsys, old)
    assert code == 2


def test_untrusted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = AGG.replace("path = 'data/s'", "path = '/etc'")
    code, _, err = _diff(capsys, *_files(tmp_path, AGG, outside), "--untrusted")
    assert code == 1 and "error[" in err
    code, _, _ = _diff(capsys, *_files(tmp_path, AGG, outside))
    assert code in (0, 1)  # trusted: compiles; the verdict is the state's


# ---------------------------------------------------------------- --against


def _checkpoint(root: Path, text: str, name: str = "old.flow") -> None:
    """A checkpoint of ``text``'s queries as ``flowc run`` leaves it: an offset log and the
    state manifest the restart guard writes."""
    from flowc.runtime.state_guard import STATE_MANIFEST
    from flowc.state import StateManifest, describe_state

    manifest = describe_state(compile(text, name, for_spark=True))
    for query in manifest.queries:
        folder = root.joinpath(*query.checkpoint)
        (folder / "offsets").mkdir(parents=True)
        (folder / "offsets" / "0").write_text(
            'v1\n{"conf": {"spark.sql.shuffle.partitions": "2"}}\n', encoding="utf-8"
        )
        single = StateManifest(
            manifest.version,
            manifest.job,
            manifest.file,
            manifest.flowc_version,
            manifest.engine,
            (query,),
        )
        (folder / STATE_MANIFEST).write_text(json.dumps(single.to_json()), encoding="utf-8")


def test_against_a_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "checkpoints"
    _checkpoint(root, AGG)
    old, new = _files(tmp_path, AGG, AGG.replace("count(*)", "sum(v)"))
    code, document = _json(tmp_path, capsys, AGG, AGG, "--against", str(root))
    assert code == 0
    checkpoint = document["checkpoint"]
    assert checkpoint["ok"] is True and checkpoint["diagnostics"] == []
    assert checkpoint["job_folder"] == str(root / "old")  # NEW, named after its file
    code, document = _json(
        tmp_path, capsys, AGG, AGG.replace("count(*)", "sum(v)"), "--against", str(root)
    )
    assert code == 1
    (diagnostic,) = document["checkpoint"]["diagnostics"]
    assert (diagnostic["code"], diagnostic["severity"]) == ("E0820", "error")
    code, out, _ = _diff(capsys, old, new, "--against", str(root))
    assert code == 1
    assert "the checkpoint holds OLD's state: 1 finding as above" in out


def test_against_a_checkpoint_written_by_another_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checkpoint is the job's truth: OLD and NEW agree, but the checkpoint was written
    by a job that counted, and NEW sums."""
    root = tmp_path / "checkpoints"
    _checkpoint(root, AGG, "new.flow")
    summed = AGG.replace("count(*)", "sum(v)")
    code, document = _json(tmp_path, capsys, summed, summed, "--against", str(root))
    assert code == 1
    assert document["state"][0]["verdict"] == "unchanged"
    assert document["checkpoint"]["ok"] is False
    code, out, _ = _diff(capsys, *_files(tmp_path, summed, summed), "--against", str(root))
    assert code == 1
    assert "error[E0820]" in out and "not ok: the checkpoint in" in out


def test_against_a_checkpoint_without_a_manifest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Plain Spark's checkpoint (or an older flowc's): what can be checked is, the rest is
    said to be unverified (E0822), and the command does not fail on it."""
    folder = tmp_path / "checkpoints" / "old" / "o" / "offsets"
    folder.mkdir(parents=True)
    (folder / "0").write_text('v1\n{"conf": {"spark.sql.shuffle.partitions": "2"}}\n')
    code, document = _json(tmp_path, capsys, AGG, AGG, "--against", str(tmp_path / "checkpoints"))
    assert code == 0
    codes = [(d["code"], d["severity"]) for d in document["checkpoint"]["diagnostics"]]
    assert codes == [("E0822", "warning")]


def test_against_without_the_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, document = _json(tmp_path, capsys, AGG, AGG, "--against", str(empty))
    assert code == 0
    assert document["checkpoint"]["job_folder"] is None
    assert "nothing was checked" in document["checkpoint"]["note"]
    code, _, err = _diff(capsys, *_files(tmp_path, AGG, AGG), "--against", str(tmp_path / "x"))
    assert code == 2 and "--against" in err and "no such folder" in err


def test_against_a_renamed_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "checkpoints"
    _checkpoint(root, AGG)
    named = "SET job.name = 'counts';\n" + AGG
    code, document = _json(tmp_path, capsys, AGG, named, "--against", str(root))
    assert code == 1
    (diagnostic,) = document["checkpoint"]["diagnostics"]
    assert "left behind" in diagnostic["message"]
    assert document["plan"]["job"]["renamed"] is True


def test_diff_never_imports_pyspark(tmp_path: Path) -> None:
    root = tmp_path / "checkpoints"
    _checkpoint(root, AGG)
    old, new = _files(tmp_path, AGG, AGG.replace("count(*)", "sum(v)"))
    script = (
        "import sys\n"
        "from flowc.cli import main as cli\n"
        f"code = cli.main(['diff', {old!r}, {new!r}, '--against', {str(root)!r}])\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')]\n"
        "sys.stderr.write(f'{code} {loaded}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1"},
        check=False,
    )
    assert done.stderr.strip().endswith("1 []"), done.stderr


# ---------------------------------------------------------------- options, settings, functions

FILES_SINK = AGG.replace(
    "CREATE SINK o WITH (connector = 'console', mode = 'update');",
    "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'csv', header = true,\n"
    "  partition_by = 'z');",
).replace("  |> KEY BY k\n  |> AGGREGATE count(*) AS n;", "  |> SELECT k, z, v;")
POSTGRES = AGG.replace(
    "CREATE SINK o WITH (connector = 'console', mode = 'update');",
    "CREATE SINK o WITH (connector = 'postgres', database = 'd', table = 't', key = 'k',\n"
    "  mode = 'update');",
)
CSV_SOURCE = AGG.replace(
    "path = 'data/s', format = 'json');",
    "path = 'data/s', format = 'csv',\n    timestamp_format = 'yyyy-MM-dd HH:mm:ss');",
)

#: (old, new, exit code, the code of the query's finding (None: a compatible note), a
#: text on the line the finding is at).
OPTION_MATRIX: dict[str, tuple[str, str, int, str | None, str]] = {
    "partition_by": (
        FILES_SINK,
        FILES_SINK.replace("partition_by = 'z'", "partition_by = 'k'"),
        1,
        "E0820",
        "partition_by = 'k'",
    ),
    "csv sink header": (
        FILES_SINK,
        FILES_SINK.replace("header = true", "header = false"),
        1,
        "E0820",
        "header = false",
    ),
    "source timestamp format": (
        CSV_SOURCE,
        CSV_SOURCE.replace("yyyy-MM-dd HH:mm:ss", "dd/MM/yyyy HH:mm"),
        0,
        "E0825",
        "timestamp_format",
    ),
    "session time zone": (
        "SET spark.sql.session.timeZone = 'UTC';\n" + AGG,
        "SET spark.sql.session.timeZone = 'Europe/Paris';\n" + AGG,
        0,
        "E0825",
        "spark.sql.session.timeZone",
    ),
    "frozen spark setting": (
        AGG,
        "SET spark.sql.streaming.stateStore.compression.codec = 'zstd';\n" + AGG,
        0,
        "E0825",
        "compression.codec",
    ),
    "postgres table of an updating query": (
        POSTGRES,
        POSTGRES.replace("table = 't'", "table = 't2'"),
        1,
        "E0820",
        "table = 't2'",
    ),
    "postgres key": (POSTGRES, POSTGRES.replace("key = 'k'", "key = 'n'"), 1, "E0820", "key"),
    "source rate limit": (
        AGG.replace("format = 'json'", "format = 'json', max_files_per_trigger = 1"),
        AGG.replace("format = 'json'", "format = 'json', max_files_per_trigger = 2"),
        0,
        None,
        "max_files_per_trigger",
    ),
}


@pytest.mark.parametrize("edit", list(OPTION_MATRIX))
def test_option_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str) -> None:
    old, new, exit_code, code, at = OPTION_MATRIX[edit]
    result, document = _json(tmp_path, capsys, old, new)
    assert result == exit_code
    (query,) = document["state"]
    found = [f for f in query["findings"] if f["aspect"].endswith(("options", "settings"))]
    assert found, query["findings"]
    (finding,) = found
    assert finding["code"] == code
    assert at in finding["new"]["text"]
    assert finding["new"]["line"] == next(
        n for n, line in enumerate(new.split("\n"), 1) if at in line
    )
    _, out, _ = _diff(capsys, str(tmp_path / "old.flow"), str(tmp_path / "new.flow"))
    assert not out.startswith("no changes")
    if code is not None:
        assert f"[{code}]" in out


def test_checkpoint_dir_changed_is_a_plan_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, document = _json(tmp_path, capsys, AGG, "SET checkpoint.dir = 'ck';\n" + AGG)
    assert code == 0
    (change,) = [s for s in document["plan"]["spark"] if s["kind"] == "checkpoint_root"]
    assert (change["old"], change["new"]) == (".flowc-checkpoints", "ck")
    assert "starts over with empty state" in change["message"]


UDF_HEAD = "CREATE FUNCTION f(v BIGINT) RETURNS BIGINT LANGUAGE python AS '{target}';\n"
UDF_STATE = UDF_HEAD + AGG.replace("count(*) AS n", "sum(f(v)) AS n")
UDF_OUTPUT = UDF_HEAD + AGG.replace(
    "  |> KEY BY k\n  |> AGGREGATE count(*) AS n;", "  |> SELECT k, f(v) AS fv;"
).replace("mode = 'update'", "mode = 'append'")
MODULE = (
    "import math\n\n\nSCALE = 2\n\n\ndef helper(v):\n    return v * SCALE\n\n\n"
    "def f(v):\n    '''Doubles.'''\n    return helper(v)\n\n\ndef g(v):\n    return v + 1\n"
)


def _udf_files(tmp_path: Path, old: str, new: str, old_module: str, new_module: str) -> list[str]:
    for side, text, module in (("old", old, old_module), ("new", new, new_module)):
        folder = tmp_path / side
        folder.mkdir(exist_ok=True)
        (folder / "job.flow").write_text(text, encoding="utf-8")
        (folder / "udfs.py").write_text(module, encoding="utf-8")
    return [str(tmp_path / "old" / "job.flow"), str(tmp_path / "new" / "job.flow")]


def _function_findings(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    old: str,
    new: str,
    old_module: str = MODULE,
    new_module: str = MODULE,
) -> tuple[int, list[dict[str, Any]]]:
    files = _udf_files(tmp_path, old, new, old_module, new_module)
    code, out, err = _diff(capsys, *files, "--format", "json")
    assert err == "", err
    (query,) = json.loads(out)["state"]
    return code, [f for f in query["findings"] if f["aspect"] == "functions"]


def test_a_function_swapped_for_another_of_the_same_signature_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = UDF_STATE.format(target="udfs:f")
    code, findings = _function_findings(tmp_path, capsys, old, UDF_STATE.format(target="udfs:g"))
    assert code == 1
    (finding,) = findings
    assert finding["code"] == "E0820"
    assert "function 'f' (udfs:g) now runs udfs:g, was udfs:f" in finding["message"]
    assert finding["new"]["line"] == 1 and finding["new"]["text"].startswith("CREATE FUNCTION f")
    files = _udf_files(tmp_path, old, UDF_STATE.format(target="udfs:g"), MODULE, MODULE)
    _, out, _ = _diff(capsys, *files)
    assert "error[E0820]: function 'f'" in out and "job.flow:1:1" in out


@pytest.mark.parametrize(
    ("module", "verdict", "code"),
    [
        (MODULE.replace("return v * SCALE", "return v * SCALE + 1"), "incompatible", "E0820"),
        (MODULE.replace("SCALE = 2", "SCALE = 3"), "incompatible", "E0820"),
        (MODULE.replace("'''Doubles.'''", "# doubles\n    '''Twice.'''"), "compatible", None),
        (MODULE.replace("return v + 1", "return v + 2"), "compatible", None),
        (MODULE, None, None),
    ],
    ids=["helper", "constant", "comment_and_docstring", "another_function", "same"],
)
def test_a_functions_code_changed(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    module: str,
    verdict: str | None,
    code: str | None,
) -> None:
    text = UDF_STATE.format(target="udfs:f")
    result, findings = _function_findings(tmp_path, capsys, text, text, MODULE, module)
    if verdict is None:
        assert findings == [] and result == 0
        return
    (finding,) = findings
    if verdict == "compatible":
        assert "not the function's code nor what it uses" in finding["message"]
    assert (finding["verdict"], finding["code"]) == (verdict, code)
    assert result == (1 if verdict == "incompatible" else 0)
    if verdict == "incompatible":
        assert "its code in udfs.py changed" in finding["message"]


def test_a_function_feeding_only_stateless_output_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = UDF_OUTPUT.format(target="udfs:f")
    code, findings = _function_findings(tmp_path, capsys, old, UDF_OUTPUT.format(target="udfs:g"))
    assert code == 0
    (finding,) = findings
    assert (finding["verdict"], finding["code"]) == ("compatible", "E0825")
    assert "feeds only the output" in finding["message"]


def test_state_store_compared_as_planned(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Flink's default written out is the same store; another store is a warning (Spark
    keeps the checkpoint's, which flowc run says with E0824 from the checkpoint itself)."""
    code, document = _json(tmp_path, capsys, AGG, "SET state.backend.type = 'hashmap';\n" + AGG)
    assert code == 0
    assert [f for f in document["state"][0]["findings"] if f["aspect"] == "state_store"] == []
    code, document = _json(tmp_path, capsys, AGG, "SET state.backend.type = 'rocksdb';\n" + AGG)
    assert code == 0
    found = [f for f in document["state"][0]["findings"] if f["aspect"] == "state_store"]
    # RocksDB's changelog checkpointing comes with it (allowed), and the store (a warning)
    assert [f["code"] for f in found] == [None, "E0825"]
    assert "Spark keeps the store the checkpoint froze" in found[1]["message"]


def test_a_function_in_a_filter_before_the_state_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A filter decides which rows reach the state, not what a stored value means: as an
    edited WHERE is compatible, so is a changed function in one (a warning, E0825)."""
    filtered = UDF_HEAD + AGG.replace("FROM s\n", "FROM s\n  |> WHERE f(v) > 0\n")
    old, new = filtered.format(target="udfs:f"), filtered.format(target="udfs:g")
    code, findings = _function_findings(tmp_path, capsys, old, new)
    assert code == 0
    (finding,) = findings
    assert (finding["verdict"], finding["code"]) == ("compatible", "E0825")
