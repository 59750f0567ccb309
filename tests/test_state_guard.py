"""The restart guard on real Spark with real checkpoints: every kind of edit, two runs.

Each base program runs once on input A (a real checkpoint, with flowc's state manifest);
its folder is kept and restored before each edit. The edited program then runs on the
same checkpoint with input B added. It either is refused before Spark starts (E0820 at
the changed line, the old definition shown, the ways out in the help, nothing on disk
touched), or runs and writes exactly the rows a plain-Python computation gives: the old
program over A, the state carried on, the edited program over B. No edit writes a wrong
row. Refusals cost no Spark run, so only the accepted edits run Spark twice.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError, Severity
from flowc.runtime.run import RunReport, run_job
from flowc.runtime.state_guard import (
    STATE_MANIFEST,
    StateGuard,
    guard_state,
)
from flowc.state import (
    StateManifest,
    Verdict,
    compare,
    describe_state,
)

# ---------------------------------------------------------------- programs and input

HEAD = """SET parallelism = 2;
SET max_parallelism = 16;
CREATE SOURCE s (k STRING, z STRING, k2 STRING, v BIGINT, ts TIMESTAMP,
                 WATERMARK FOR ts AS ts - INTERVAL 1 SECOND)
  WITH (connector = 'files', path = 'in', format = 'json');
"""
PROGRAMS = {
    "keyed": HEAD
    + """CREATE SINK o WITH (connector = 'memory', mode = 'complete');
INSERT INTO o
  FROM s
  |> KEY BY k, z
  |> AGGREGATE count(*) AS n WITH (uid = 'counts');
""",
    "window": HEAD
    + """CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o
  FROM s
  |> KEY BY k
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS)
  |> AGGREGATE count(*) AS n;
""",
    "dedup": HEAD
    + """CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o
  FROM s
  |> DEDUPLICATE ON k, v
  |> SELECT k, v;
""",
    "join": """SET parallelism = 2;
SET max_parallelism = 16;
CREATE SOURCE orders (id BIGINT, cust STRING, ots TIMESTAMP,
                      WATERMARK FOR ots AS ots - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'orders', format = 'json');
CREATE SOURCE payments (oid BIGINT, payer STRING, pts TIMESTAMP,
                        WATERMARK FOR pts AS pts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'payments', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o
  FROM orders
  |> JOIN payments ON id = oid AND pts BETWEEN ots AND ots + INTERVAL 1 MINUTE
  |> SELECT id, cust, payer, pts;
""",
}

START = datetime(2026, 1, 1, tzinfo=UTC)
#: The watermark delay of HEAD's source.
DELAY = timedelta(seconds=1)


def _ts(seconds: int) -> str:
    return (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _row(i: int, second: int) -> dict[str, Any]:
    return {"k": f"k{i % 3}", "z": f"z{i % 2}", "k2": f"k{i % 4}", "v": i, "ts": _ts(second)}


#: Input A (the first run) and B (the run of the edited program). B starts one second
#: before A's last event, so the window [10 s, 20 s) holds rows of both runs.
ROWS_A = [_row(i, i) for i in range(20)]
ROWS_B = [_row(i, i - 1) for i in range(20, 35)]
ORDERS_A = [{"id": i, "cust": f"c{i % 2}", "ots": _ts(10 * i)} for i in range(1, 6)]
PAYMENTS_A = [{"oid": i, "payer": f"p{i}", "pts": _ts(10 * i + 5)} for i in range(1, 4)]

INPUTS_A = {
    "keyed": {"in/a.json": ROWS_A},
    "window": {"in/a.json": ROWS_A},
    "dedup": {"in/a.json": ROWS_A},
    "join": {"orders/a.json": ORDERS_A, "payments/a.json": PAYMENTS_A},
}
INPUTS_B = {
    "keyed": {"in/b.json": ROWS_B},
    "window": {"in/b.json": ROWS_B},
    "dedup": {"in/b.json": ROWS_B},
    "join": {"orders/b.json": [{"id": 9, "cust": "c1", "ots": _ts(90)}]},
}
#: Input files get increasing modification times: A's, then B's.
MTIME_A = 1_767_225_600
MTIME_B = MTIME_A + 100


def _write_rows(folder: Path, files: dict[str, list[dict[str, Any]]], mtime: int) -> None:
    for name, rows in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        os.utime(path, (mtime, mtime))


@dataclass
class Base:
    """A base program after its run on A: ``folder`` is where every run happens (the
    checkpoint's paths stay the same), ``pristine`` a copy of it with B's input added."""

    kind: str
    folder: Path
    pristine: Path

    @property
    def text(self) -> str:
        return PROGRAMS[self.kind]

    def restore(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        shutil.copytree(self.pristine, self.folder, symlinks=True)

    @property
    def checkpoint(self) -> Path:
        return self.folder / ".flowc-checkpoints" / "job" / "o"


def _run(folder: Path, text: str, **options: Any) -> tuple[RunReport, str]:
    flow = folder / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    out = io.StringIO()
    report = run_job(job, available_now=True, master="local[2]", out=out, **options)
    for query in report.queries:
        assert query.error is None, query.error
    return report, out.getvalue()


@pytest.fixture(scope="module")
def bases(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Base]:
    """Each base program run once on A, on first use."""
    made: dict[str, Base] = {}

    def get(kind: str) -> Base:
        if kind not in made:
            root = tmp_path_factory.mktemp(kind)
            folder = root / "job"
            folder.mkdir()
            _write_rows(folder, INPUTS_A[kind], MTIME_A)
            _run(folder, PROGRAMS[kind])
            assert (folder / ".flowc-checkpoints" / "job" / "o" / STATE_MANIFEST).is_file()
            pristine = root / "pristine"
            shutil.copytree(folder, pristine, symlinks=True)
            _write_rows(pristine, INPUTS_B[kind], MTIME_B)
            made[kind] = Base(kind, folder, pristine)
        made[kind].restore()
        return made[kind]

    return get


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` with its size and modification time."""
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _line_of(text: str, marker: str) -> int:
    lines = [n for n, line in enumerate(text.split("\n"), 1) if marker in line]
    assert len(lines) == 1, (marker, lines)
    return lines[0]


def _committed_rows(folder: Path) -> list[dict[str, Any]]:
    """The rows a file sink committed (its _spark_metadata log names the files)."""
    log = folder / "_spark_metadata"
    names: set[str] = set()
    for entry in log.iterdir():
        if entry.name.split(".")[0].isdigit():
            for line in entry.read_text().splitlines()[1:]:
                names.add(json.loads(line)["path"].rsplit("/", 1)[-1])
    rows = []
    for name in sorted(names):
        rows += [json.loads(x) for x in (folder / name).read_text().splitlines() if x]
    return rows


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


# ---------------------------------------------------------------- refused edits

#: kind of base, text replaced, replacement, a text on the line the caret must be on,
#: and the old definition the message must show.
REFUSED: dict[str, tuple[str, str, str, str, str]] = {
    "count_to_sum_same_type": (
        "keyed",
        "count(*) AS n",
        "sum(v) AS n",
        "AGGREGATE sum(v)",
        "was: AGGREGATE count(*) AS n WITH (uid = 'counts') (line 10)",
    ),
    "key_replaced_by_another_column": (
        "keyed",
        "KEY BY k, z",
        "KEY BY k2, z",
        "KEY BY k2, z",
        "was: KEY BY k, z (line 9)",
    ),
    "key_same_name_other_column": (
        "keyed",
        "  |> KEY BY k, z",
        "  |> SELECT k2 AS k, z, v\n  |> KEY BY k, z",
        "KEY BY k, z",
        "was: KEY BY k, z (line 9)",
    ),
    "keys_reordered": ("keyed", "KEY BY k, z", "KEY BY z, k", "KEY BY z, k", "was: KEY BY k, z"),
    "key_added": ("keyed", "KEY BY k, z", "KEY BY k, z, k2", "KEY BY k, z, k2", "was: KEY BY k, z"),
    "aggregate_argument_changed": (
        "keyed",
        "count(*) AS n",
        "count(k2) AS n",
        "AGGREGATE count(k2)",
        "was: AGGREGATE count(*) AS n",
    ),
    "key_expression_changed": (
        "keyed",
        "  |> KEY BY k, z",
        "  |> EXTEND upper(k) AS ku\n  |> RENAME k AS k_old, ku AS k\n  |> KEY BY k, z",
        "KEY BY k, z",
        "was: KEY BY k, z (line 9)",
    ),
    "aggregate_added": (
        "keyed",
        "count(*) AS n",
        "count(*) AS n, sum(v) AS total",
        "AGGREGATE count(*) AS n, sum(v)",
        "was: AGGREGATE count(*) AS n",
    ),
    "uid_changed": (
        "keyed",
        "uid = 'counts'",
        "uid = 'counts-v2'",
        "counts-v2",
        "was: AGGREGATE count(*) AS n WITH (uid = 'counts')",
    ),
    "window_size_changed": (
        "window",
        "INTERVAL 10 SECONDS",
        "INTERVAL 20 SECONDS",
        "WINDOW TUMBLE",
        "was: WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE count(*) AS n (line 10)",
    ),
    "window_kind_changed": (
        "window",
        "TUMBLE(ts, INTERVAL 10 SECONDS)",
        "HOP(ts, INTERVAL 10 SECONDS, INTERVAL 5 SECONDS)",
        "WINDOW HOP",
        "was: WINDOW TUMBLE(ts, INTERVAL 10 SECONDS)",
    ),
    "window_to_session": (
        "window",
        "TUMBLE(ts, INTERVAL 10 SECONDS)",
        "SESSION(ts, INTERVAL 10 SECONDS)",
        "WINDOW SESSION",
        "was: WINDOW TUMBLE(ts, INTERVAL 10 SECONDS)",
    ),
    "stateful_step_added_before_another": (
        "window",
        "  |> KEY BY k\n",
        "  |> DEDUPLICATE ON k, ts\n  |> KEY BY k\n",
        "DEDUPLICATE ON k, ts",
        "added before Window(TUMBLE(ts, INTERVAL 10 SECONDS))",
    ),
    "dedup_columns_changed": (
        "dedup",
        "DEDUPLICATE ON k, v",
        "DEDUPLICATE ON k",
        "DEDUPLICATE ON k",
        "was: DEDUPLICATE ON k, v (line 9)",
    ),
    "stateful_step_removed": (
        "dedup",
        "  |> DEDUPLICATE ON k, v\n",
        "",
        "INSERT INTO o",
        "was: DEDUPLICATE ON k, v (line 9)",
    ),
    "join_type_changed": (
        "join",
        "|> JOIN",
        "|> LEFT JOIN",
        "LEFT JOIN",
        "was: JOIN payments ON id = oid AND pts BETWEEN ots AND ots + INTERVAL 1 MINUTE",
    ),
    "join_keys_changed": (
        "join",
        "ON id = oid",
        "ON cust = payer",
        "JOIN payments ON cust = payer",
        "was: JOIN payments ON id = oid",
    ),
    "join_bound_changed": (
        "join",
        "INTERVAL 1 MINUTE",
        "INTERVAL 2 MINUTES",
        "JOIN payments",
        "was: JOIN payments ON id = oid AND pts BETWEEN ots AND ots + INTERVAL 1 MINUTE",
    ),
}


@pytest.mark.parametrize("edit", list(REFUSED))
def test_incompatible_edit_is_refused_before_spark(bases: Callable[[str], Base], edit: str) -> None:
    kind, old, new, at, was = REFUSED[edit]
    base = bases(kind)
    assert old in base.text
    text = base.text.replace(old, new)
    flow = base.folder / "job.flow"
    flow.write_text(text, encoding="utf-8")
    before = _files(base.folder)
    job = flowc.compile(text, str(flow), for_spark=True)
    with pytest.raises(CompileError) as caught:
        run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    errors = [d for d in caught.value.diagnostics if d.severity is Severity.ERROR]
    assert errors and all(d.code == "E0820" for d in errors), errors
    first = errors[0]
    assert first.span.file == str(flow)
    assert first.span.line == _line_of(text, at), first
    assert was in first.message, first.message
    assert first.help is not None
    for way_out in ("revert", "--checkpoint-dir", "flowc run --reset-state o"):
        assert way_out in first.help
    assert _files(base.folder) == before  # nothing written: not the manifest, not the sink


# ---------------------------------------------------------------- accepted edits


def _keyed_result(spark: Any, key: str = "k") -> Counter[tuple[str, str]]:
    rows = spark.sql("SELECT * FROM o").collect()
    return Counter({(r[key], r["z"]): r["n"] for r in rows})


def _counts(rows: list[dict[str, Any]]) -> Counter[tuple[str, str]]:
    return Counter((r["k"], r["z"]) for r in rows)


def test_parallelism_changed_on_the_default_store_is_refused(
    bases: Callable[[str], Base],
) -> None:
    """The default store (hashmap: Spark's HDFS-backed one) cannot be repartitioned
    (tests/test_rescale.py rescales RocksDB's): E0826 before Spark, at the setting."""
    base = bases("keyed")
    text = base.text.replace("SET parallelism = 2;", "SET parallelism = 3;")
    job = flowc.compile(text, str(base.folder / "job.flow"), for_spark=True)
    before = _files(base.folder)
    with pytest.raises(CompileError) as raised:
        guard_state(job, str(base.folder / ".flowc-checkpoints"), str(base.folder))
    codes = [(d.code, d.severity) for d in raised.value.diagnostics]
    assert ("E0826", Severity.ERROR) in codes
    assert not any(code == "E0821" for code, _ in codes)
    assert _files(base.folder) == before


def test_max_parallelism_changed_runs_with_a_warning(
    spark: Any, bases: Callable[[str], Base]
) -> None:
    base = bases("keyed")
    text = base.text.replace("SET max_parallelism = 16;", "SET max_parallelism = 32;")
    _, out = _run(base.folder, text)
    assert "warning[E0821]" in out and "max parallelism 16 → 32" in out
    assert "Flink would refuse to restore" in out
    assert _keyed_result(spark) == _counts(ROWS_A + ROWS_B)


def test_filter_added_before_the_aggregate_applies_from_now_on(
    spark: Any, bases: Callable[[str], Base]
) -> None:
    base = bases("keyed")
    text = base.text.replace("  |> KEY BY k, z", "  |> WHERE v % 2 = 0\n  |> KEY BY k, z")
    _, out = _run(base.folder, text)
    assert "E08" not in out
    # The state holds A's counts; the filter applies to B's rows.
    assert _keyed_result(spark) == _counts(ROWS_A + [r for r in ROWS_B if r["v"] % 2 == 0])


def test_key_renamed_keeps_the_state(spark: Any, bases: Callable[[str], Base]) -> None:
    base = bases("keyed")
    text = base.text.replace("  |> KEY BY k, z", "  |> RENAME k AS key\n  |> KEY BY key, z")
    _run(base.folder, text)
    assert _keyed_result(spark, key="key") == _counts(ROWS_A + ROWS_B)


def _closed_windows(rows: list[dict[str, Any]]) -> Counter[tuple[str, float]]:
    """Counts per (k, window start) of the 10 s windows the watermark has closed."""
    watermark = max(_epoch(r["ts"]) for r in rows) - DELAY.total_seconds()
    counts: Counter[tuple[str, float]] = Counter()
    for r in rows:
        start = _epoch(r["ts"]) // 10 * 10
        if start + 10 <= watermark:
            counts[(r["k"], start)] += 1
    return counts


def test_projection_added_after_the_window(spark: Any, bases: Callable[[str], Base]) -> None:
    base = bases("window")
    first = {
        (r["k"], _epoch(r["window_start"])): r["n"] for r in _committed_rows(base.folder / "out")
    }
    assert first == dict(_closed_windows(ROWS_A))
    text = base.text.replace(
        "AGGREGATE count(*) AS n;", "AGGREGATE count(*) AS n\n  |> EXTEND n * 10 AS n10;"
    )
    _, out = _run(base.folder, text)
    assert "E08" not in out
    rows = _committed_rows(base.folder / "out")
    got = Counter({(r["k"], _epoch(r["window_start"])): r["n"] for r in rows})
    assert len(got) == len(rows)  # every window written once
    assert got == _closed_windows(ROWS_A + ROWS_B)  # [10 s, 20 s) counts rows of A and B
    added = [r for r in rows if (r["k"], _epoch(r["window_start"])) not in first]
    assert added and all(r["n10"] == 10 * r["n"] for r in added)


# ---------------------------------------------------------------- --reset-state


def test_reset_state_moves_the_checkpoint_aside_and_starts_over(
    spark: Any, bases: Callable[[str], Base]
) -> None:
    base = bases("keyed")
    old_manifest = (base.checkpoint / STATE_MANIFEST).read_text(encoding="utf-8")
    text = base.text.replace("count(*) AS n", "sum(v) AS n")
    _, out = _run(base.folder, text, reset_state=["o"])
    assert "reset-state: moved" in out
    moved = [p for p in base.checkpoint.parent.iterdir() if p.name.startswith("o.reset-")]
    assert len(moved) == 1
    assert (moved[0] / STATE_MANIFEST).read_text(encoding="utf-8") == old_manifest
    assert (moved[0] / "offsets" / "0").is_file()  # the old checkpoint, whole
    # Started over: the sums of every row, read again from the start.
    expected: Counter[tuple[str, str]] = Counter()
    for r in ROWS_A + ROWS_B:
        expected[(r["k"], r["z"])] += r["v"]
    assert _keyed_result(spark) == expected


def test_reset_state_moves_a_file_sinks_folder_too(bases: Callable[[str], Base]) -> None:
    base = bases("window")
    text = base.text.replace("INTERVAL 10 SECONDS", "INTERVAL 20 SECONDS")
    job = flowc.compile(text, str(base.folder / "job.flow"), for_spark=True)
    out = io.StringIO()
    guard = guard_state(job, str(base.folder / ".flowc-checkpoints"), str(base.folder), ["o"], out)
    moved = {Path(a).name: Path(b) for a, b in guard.moved}
    assert set(moved) == {"o", "out"}
    assert not base.checkpoint.exists() and not (base.folder / "out").exists()
    assert (moved["out"] / "_spark_metadata").is_dir()
    assert moved["o"].name.startswith("o.reset-") and (moved["o"] / "offsets").is_dir()


# ---------------------------------------------------------------- no manifest (E0822)


def _without_manifest(base: Base) -> None:
    (base.checkpoint / STATE_MANIFEST).unlink()


def test_checkpoint_without_manifest_is_checked_from_sparks_files(
    bases: Callable[[str], Base],
) -> None:
    base = bases("keyed")
    _without_manifest(base)
    job = flowc.compile(base.text, str(base.folder / "job.flow"), for_spark=True)
    out = io.StringIO()
    guard = guard_state(job, str(base.folder / ".flowc-checkpoints"), str(base.folder), (), out)
    (warning,) = guard.warnings
    assert warning.code == "E0822" and warning.severity is Severity.WARNING
    assert "has no _flowc_state.json" in warning.message
    assert warning.help is not None
    assert "1 stateful operator, their kinds and key types, its 2 shuffle partitions" in (
        warning.help
    )
    assert "not checked: which columns the keys are, the aggregate functions" in warning.help
    assert "warning[E0822]" in out.getvalue()


@pytest.mark.parametrize(
    ("kind", "old", "new", "found"),
    [
        ("keyed", "KEY BY k, z", "KEY BY k, v", "keyed on (k string, z string)"),
        (
            "window",
            "  |> KEY BY k\n",
            "  |> DEDUPLICATE ON k, ts\n  |> KEY BY k\n",
            "holds the state of 1 stateful operator (stateStoreSave), and the query now has 2",
        ),
        ("dedup", "", "", "holds a dedupe"),
    ],
    ids=["key_type", "operator_added", "operator_replaced"],
)
def test_checkpoint_without_manifest_refuses_what_sparks_files_contradict(
    bases: Callable[[str], Base], kind: str, old: str, new: str, found: str
) -> None:
    base = bases(kind)
    _without_manifest(base)
    # operator_replaced: the deduplicating query's checkpoint, and an aggregate now
    text = base.text.replace(old, new) if old else PROGRAMS["keyed"]
    job = flowc.compile(text, str(base.folder / "job.flow"), for_spark=True)
    with pytest.raises(CompileError) as caught:
        guard_state(job, str(base.folder / ".flowc-checkpoints"), str(base.folder))
    codes = {d.code for d in caught.value.diagnostics}
    assert codes >= {"E0820", "E0822"}
    assert any(found in d.message for d in caught.value.diagnostics), caught.value.diagnostics


def test_without_a_manifest_spark_reads_old_counts_as_sums(
    spark: Any, bases: Callable[[str], Base]
) -> None:
    """Why the manifest: with none, count(*) → sum(v) can only be warned about (E0822),
    and Spark goes on from the old counts as if they were sums."""
    base = bases("keyed")
    _without_manifest(base)
    text = base.text.replace("count(*) AS n", "sum(v) AS n")
    _, out = _run(base.folder, text)
    assert "warning[E0822]" in out
    wrong = _counts(ROWS_A)
    for r in ROWS_B:
        wrong[(r["k"], r["z"])] += r["v"]
    assert _keyed_result(spark) == wrong  # Spark's answer, not sum(v) of any rows


# ---------------------------------------------------------------- the command line


def test_flowc_run_refuses_with_a_located_diagnostic(bases: Callable[[str], Base]) -> None:
    base = bases("keyed")
    text = base.text.replace("count(*) AS n", "sum(v) AS n")
    (base.folder / "job.flow").write_text(text, encoding="utf-8")
    before = _files(base.folder)
    result = subprocess.run(
        [sys.executable, "-m", "flowc", "run", "job.flow", "--available-now"],
        capture_output=True,
        text=True,
        cwd=base.folder,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert result.returncode == 1, result.stderr
    # refused before any JVM: no line says one starts
    assert result.stderr.startswith(
        "error[E0820]: Keyed Aggregate: 'n' is now sum(v) (BIGINT), was count(*)"
    ), result.stderr
    assert " --> job.flow:10:6\n" in result.stderr
    assert "10 |   |> AGGREGATE sum(v) AS n WITH (uid = 'counts');" in result.stderr
    assert "was: AGGREGATE count(*) AS n WITH (uid = 'counts') (line 10)" in result.stderr
    assert "= help: revert the change" in result.stderr
    assert "Traceback" not in result.stderr and "\tat " not in result.stderr
    after = _files(base.folder)
    assert {k: v for k, v in after.items() if ".flowc-logs" not in k} == before
    unknown = subprocess.run(
        [sys.executable, "-m", "flowc", "run", "job.flow", "--reset-state", "nope"],
        capture_output=True,
        text=True,
        cwd=base.folder,
    )
    assert unknown.returncode == 2
    assert "--reset-state nope: the job has no query of that name (o)" in unknown.stderr


# ---------------------------------------------------------------- the manifest itself


def test_manifest_is_deterministic_and_round_trips() -> None:
    for text in PROGRAMS.values():
        first = describe_state(flowc.compile(text, "job.flow", for_spark=True))
        second = describe_state(flowc.compile(text, "job.flow", for_spark=True))
        assert json.dumps(first.to_json()) == json.dumps(second.to_json())
        assert StateManifest.from_json(json.loads(json.dumps(first.to_json()))) == first
        assert compare(first, second).verdict is Verdict.UNCHANGED


def test_manifest_describes_each_operator_in_sparks_order() -> None:
    text = PROGRAMS["window"].replace(
        "  |> KEY BY k\n", "  |> DEDUPLICATE ON k, ts\n  |> KEY BY k\n"
    )
    (query,) = describe_state(flowc.compile(text, "job.flow", for_spark=True)).queries
    window, dedup = query.operators  # Spark numbers from the sink upstream
    assert (window.index, window.kind, dedup.index, dedup.kind) == (
        0,
        "window_aggregate",
        1,
        "deduplicate",
    )
    assert [(k.name, k.type, k.lineage) for k in window.keys] == [("k", "STRING", "s.k")]
    assert window.window is not None and window.window.size == "10 seconds"
    assert [(a.name, a.function, a.arguments, a.type) for a in window.aggregates] == [
        ("n", "count", ("*",), "BIGINT")
    ]
    assert [(w.column, w.delay) for w in window.watermarks] == [("ts", "1 second")]
    assert (window.parallelism, window.max_parallelism, window.key_groups) == (2, 16, 16)
    assert window.keys_location is not None and window.keys_location.text == "KEY BY k"
    assert [c.name for c in dedup.keys] == ["k", "ts"]
    assert [(s.name, s.connector, s.path) for s in query.sources] == [("s", "files", "in")]
    assert (query.sink.connector, query.sink.path, query.checkpoint) == (
        "files",
        "out",
        ("job", "o"),
    )


class _Failed:
    name = "o"

    def exception(self) -> Exception:
        return RuntimeError("failed at its first batch")


def test_a_query_that_failed_to_start_keeps_the_old_manifest(tmp_path: Path) -> None:
    job = flowc.compile(PROGRAMS["keyed"], str(tmp_path / "job.flow"), for_spark=True)
    guard = guard_state(job, str(tmp_path / "ck"), str(tmp_path))
    assert guard.started([_Failed()]) == []
    assert not (tmp_path / "ck" / "job" / "o" / STATE_MANIFEST).exists()
    assert guard.started([]) == [str(tmp_path / "ck" / "job" / "o" / STATE_MANIFEST)]


def test_batch_mode_writes_no_manifest(tmp_path: Path) -> None:
    text = "SET execution.mode = batch;\n" + PROGRAMS["window"]
    job = flowc.compile(text, str(tmp_path / "job.flow"), for_spark=True)
    guard = guard_state(job, str(tmp_path / "ck"), str(tmp_path))
    assert isinstance(guard, StateGuard) and guard.started([]) == []
    assert not (tmp_path / "ck").exists()


# ---------------------------------------------------------------- SET checkpoint.dir


def test_set_checkpoint_dir_is_the_checkpoint_the_run_uses(spark: Any, tmp_path: Path) -> None:
    """The plan shows ``<checkpoint.dir>/<job>/<query>``: flowc run keeps the checkpoint
    (and the state manifest) there, the restart guard reads it there, and
    ``--checkpoint-dir`` still wins over the setting."""
    folder = tmp_path / "job"
    folder.mkdir()
    _write_rows(folder, INPUTS_A["keyed"], MTIME_A)
    text = "SET checkpoint.dir = 'state/ck';\n" + PROGRAMS["keyed"]
    job = flowc.compile(text, str(folder / "job.flow"), for_spark=True)
    assert job.spark_plan.query("o").checkpoint_location == "state/ck/job/o"
    _run(folder, text)
    shown = folder / "state" / "ck" / "job" / "o"
    assert (shown / "offsets" / "0").is_file() and (shown / STATE_MANIFEST).is_file()
    assert not (folder / ".flowc-checkpoints" / "job" / "o" / "offsets").exists()
    assert _keyed_result(spark) == _counts(ROWS_A)
    # A restart on it goes on from its state: B's rows are added to A's counts.
    _write_rows(folder, INPUTS_B["keyed"], MTIME_B)
    _run(folder, text)
    assert _keyed_result(spark) == _counts(ROWS_A + ROWS_B)
    # The guard reads the checkpoint the plan shows: an incompatible edit is refused.
    edited = text.replace("count(*) AS n", "sum(v) AS n")
    job = flowc.compile(edited, str(folder / "job.flow"), for_spark=True)
    with pytest.raises(CompileError) as caught:
        run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert [d.code for d in caught.value.diagnostics] == ["E0820"]
    # --checkpoint-dir wins over the setting: a new folder, state started over.
    _run(folder, edited, checkpoint_dir=str(tmp_path / "elsewhere"))
    assert (tmp_path / "elsewhere" / "job" / "o" / STATE_MANIFEST).is_file()
    sums: Counter[tuple[str, str]] = Counter()
    for r in ROWS_A + ROWS_B:
        sums[(r["k"], r["z"])] += r["v"]
    assert _keyed_result(spark) == sums


def test_generated_program_uses_the_plans_checkpoint_dir() -> None:
    from flowc.spark.codegen import generate_pyspark

    text = "SET checkpoint.dir = 'state/ck';\n" + PROGRAMS["keyed"]
    code = generate_pyspark(flowc.compile(text, "job.flow", for_spark=True))
    assert "checkpoint_dir = args.checkpoint_dir or os.path.join(BASE_DIR, 'state/ck')" in code
    absolute = text.replace("'state/ck'", "'/var/ck'")
    code = generate_pyspark(flowc.compile(absolute, "job.flow", for_spark=True))
    assert "checkpoint_dir = args.checkpoint_dir or '/var/ck'" in code
    default = generate_pyspark(flowc.compile(PROGRAMS["keyed"], "job.flow", for_spark=True))
    assert "args.checkpoint_dir or os.path.join(BASE_DIR, '.flowc-checkpoints')" in default


def test_untrusted_checkpoint_dir_stays_in_the_base_directory(tmp_path: Path) -> None:
    text = "SET checkpoint.dir = '/tmp/elsewhere';\n" + PROGRAMS["keyed"]
    with pytest.raises(CompileError) as caught:
        flowc.compile(text, str(tmp_path / "job.flow"), trusted=False)
    (error,) = [d for d in caught.value.diagnostics if d.code == "E0953"]
    assert "checkpoint.dir '/tmp/elsewhere' is absolute" in error.message
    assert error.span.line == 1
    inside = "SET checkpoint.dir = 'ck';\n" + PROGRAMS["keyed"]
    flowc.compile(inside, str(tmp_path / "job.flow"), trusted=False)


# ---------------------------------------------------------------- functions and options


UDF_MODULE = "def f(v):\n    return v * 2\n\n\ndef g(v):\n    return v * 3\n"
UDF_PROGRAM = (
    "CREATE FUNCTION f(v BIGINT) RETURNS BIGINT LANGUAGE python AS 'udfs:f';\n"
    + PROGRAMS["keyed"].replace("count(*) AS n", "sum(f(v)) AS n")
)


def test_a_function_swapped_on_a_restart_is_refused(spark: Any, tmp_path: Path) -> None:
    """sum(f(v)) over A with f = udfs:f; then f is declared as udfs:g, same signature:
    Spark would add g's values to f's sums. The guard refuses it at the CREATE FUNCTION,
    and so it does when the module's body of f changes; nothing on disk is touched."""
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "udfs.py").write_text(UDF_MODULE, encoding="utf-8")
    _write_rows(folder, INPUTS_A["keyed"], MTIME_A)
    _run(folder, UDF_PROGRAM)
    expected: Counter[tuple[str, str]] = Counter()
    for r in ROWS_A:
        expected[(r["k"], r["z"])] += 2 * r["v"]
    assert _keyed_result(spark) == expected
    _write_rows(folder, INPUTS_B["keyed"], MTIME_B)
    flow = folder / "job.flow"
    for text, module, said in (
        (UDF_PROGRAM.replace("'udfs:f'", "'udfs:g'"), UDF_MODULE, "now runs udfs:g, was udfs:f"),
        (UDF_PROGRAM, UDF_MODULE.replace("v * 2", "v * 4"), "its code in udfs.py changed"),
    ):
        flow.write_text(text, encoding="utf-8")
        (folder / "udfs.py").write_text(module, encoding="utf-8")
        before = _files(folder)
        job = flowc.compile(text, str(flow), for_spark=True)
        with pytest.raises(CompileError) as caught:
            run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        (error,) = [d for d in caught.value.diagnostics if d.severity is Severity.ERROR]
        assert error.code == "E0820" and "function 'f'" in error.message, error
        assert said in error.message
        assert (error.span.file, error.span.line) == (str(flow), 1)  # the CREATE FUNCTION
        assert error.help is not None and "--reset-state o" in error.help
        assert _files(folder) == before
    # The same function again goes on from the state: A's sums and B's.
    (folder / "udfs.py").write_text(UDF_MODULE, encoding="utf-8")
    _run(folder, UDF_PROGRAM)
    for r in ROWS_B:
        expected[(r["k"], r["z"])] += 2 * r["v"]
    assert _keyed_result(spark) == expected


def test_partition_by_changed_on_a_restart_is_refused(bases: Callable[[str], Base]) -> None:
    """A files sink's partition_by changed: Spark would write the new micro-batches under
    other folders and the sink's folder could no longer be read
    (CONFLICTING_PARTITION_COLUMN_NAMES). Refused at the option, before Spark."""
    base = bases("window")
    text = base.text.replace(
        "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');",
        "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json',\n"
        "  partition_by = 'k');",
    )
    flow = base.folder / "job.flow"
    flow.write_text(text, encoding="utf-8")
    before = _files(base.folder)
    job = flowc.compile(text, str(flow), for_spark=True)
    with pytest.raises(CompileError) as caught:
        run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    (error,) = [d for d in caught.value.diagnostics if d.severity is Severity.ERROR]
    assert error.code == "E0820"
    assert "option partition_by is now 'k', was unset" in error.message
    assert "CONFLICTING_PARTITION_COLUMN_NAMES" in error.message
    assert error.span.line == _line_of(text, "partition_by = 'k'")
    assert error.help is not None and "--reset-state o" in error.help
    assert _files(base.folder) == before
