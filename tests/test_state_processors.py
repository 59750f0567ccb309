"""The state of the processors flowc generates (OverAggregate, DeduplicateWithin) in the
state manifest, and what `flowc.state.compare`, the restart guard and `flowc diff` say of
an edit to them (docs/state.md, "Processors").

The fast tests compare the manifests of two versions of a program; the Spark tests run a
real OVER job on one checkpoint: a widened frame is refused before Spark starts, and an
allowed edit (a narrower frame, a call added) runs on and gives the rows plain Python
computes from the frames' definition.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.cli import main as cli
from flowc.diagnostics import CompileError, Severity
from flowc.runtime.run import run_job
from flowc.runtime.state_guard import STATE_MANIFEST, guard_state
from flowc.state import StateManifest, Verdict, compare, describe_state
from flowc.state.manifest import ParameterRule
from tests.helpers.fake_state import Handle
from tests.helpers.files import read_json_dir
from tests.helpers.minute_events import Row, write_batch
from tests.helpers.over_frames import BATCHES, avg, emitted, normal, over_rows

OVER = """\
SET max_parallelism = 16;
CREATE SOURCE bids (seller INT, price INT, ts TIMESTAMP, ts2 TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o SELECT seller, price, ts,
  AVG(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW) AS a
  FROM bids WHERE seller < 100;
"""
FRAME = "ROWS BETWEEN 5 PRECEDING"

WITHIN = """\
SET max_parallelism = 16;
CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 1 SECOND)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM s |> DEDUPLICATE ON k WITHIN INTERVAL 10 SECONDS |> SELECT k, v;
"""


def _manifest(text: str) -> StateManifest:
    return describe_state(flowc.compile(text, "job.flow", for_spark=True))


def _verdict(old: str, new: str) -> tuple[Verdict, list[str]]:
    comparison = compare(_manifest(old), _manifest(new))
    return comparison.verdict, [f.message for _, f in comparison.findings()]


def test_over_state_is_described_as_its_processor() -> None:
    (query,) = _manifest(OVER).queries
    (operator,) = query.operators
    processor = operator.processor
    assert processor is not None and processor.name == "OverAggregate"
    assert processor.keyed_by == "PARTITION BY seller"
    shown = {p.name: (p.value, p.rule, p.amount) for p in processor.parameters}
    assert shown == {
        "order": ("bids.ts", ParameterRule.SAME, None),
        "frame": ("ROWS", ParameterRule.SAME, None),
        "preceding": ("5 rows", ParameterRule.AT_MOST, 5),
        "calls": ("AVG(bids.price) AS a", ParameterRule.FREE, None),
    }
    assert [(c.name, c.type) for c in processor.row] == [
        ("seller", "INT"),
        ("price", "INT"),
        ("ts", "TIMESTAMP"),
        ("ts2", "TIMESTAMP"),
    ]
    # the manifest round-trips, and one written before processors were described reads
    data = json.loads(json.dumps(_manifest(OVER).to_json()))
    assert StateManifest.from_json(data) == _manifest(OVER)
    del data["queries"][0]["operators"][0]["processor"]
    older = StateManifest.from_json(data)
    assert older.queries[0].operators[0].processor is None
    assert compare(older, _manifest(OVER)).verdict is Verdict.UNCHANGED


RANGE = "RANGE BETWEEN INTERVAL 10 MINUTES PRECEDING"

#: edit: (old text, new text, verdict, a phrase of the finding)
OVER_EDITS: dict[str, tuple[str, str, Verdict, str]] = {
    "rows narrowed": (FRAME, "ROWS BETWEEN 2 PRECEDING", Verdict.COMPATIBLE, "covers the new"),
    "rows widened": (FRAME, "ROWS BETWEEN 10 PRECEDING", Verdict.INCOMPATIBLE, "too few rows"),
    "range narrowed": (
        RANGE,
        "RANGE BETWEEN INTERVAL 2 MINUTES PRECEDING",
        Verdict.COMPATIBLE,
        "now 120000 ms, was 600000 ms; the state kept",
    ),
    "range widened": (
        RANGE,
        "RANGE BETWEEN INTERVAL 1 HOUR PRECEDING",
        Verdict.INCOMPATIBLE,
        "now 3600000 ms, was 600000 ms: it kept only the rows of the old, narrower frame",
    ),
    "rows to range": (
        FRAME,
        "RANGE BETWEEN INTERVAL 1 SECOND PRECEDING",
        Verdict.INCOMPATIBLE,
        "frame is now RANGE, was ROWS",
    ),
    "partition by": (
        "PARTITION BY seller",
        "PARTITION BY price",
        Verdict.INCOMPATIBLE,
        "key 'price' is now bids.price, was bids.seller",
    ),
    "call added": (
        " AS a\n",
        " AS a, MAX(price) OVER (PARTITION BY seller ORDER BY ts"
        " ROWS BETWEEN 5 PRECEDING AND CURRENT ROW) AS m\n",
        Verdict.COMPATIBLE,
        "computes the calls when it emits",
    ),
    "call changed": ("AVG(price)", "MIN(price)", Verdict.COMPATIBLE, "MIN(bids.price) AS a"),
    "stored row changed": (
        "ts2 TIMESTAMP,",
        "ts2 TIMESTAMP, note STRING,",
        Verdict.INCOMPATIBLE,
        "the rows OverAggregate stores are now",
    ),
    "max parallelism": (
        "max_parallelism = 16",
        "max_parallelism = 32",
        Verdict.RESCALED,
        "Flink would refuse",
    ),
    "filter after": ("seller < 100", "seller < 50", Verdict.COMPATIBLE, "steps around"),
}


@pytest.mark.parametrize("edit", list(OVER_EDITS))
def test_over_edit_verdicts(edit: str) -> None:
    old, new, verdict, phrase = OVER_EDITS[edit]
    base = OVER.replace(FRAME, RANGE) if old == RANGE else OVER
    assert old in base
    got, messages = _verdict(base, base.replace(old, new))
    assert got is verdict, messages
    assert any(phrase in m for m in messages), messages


def test_range_narrowed_is_compared_in_milliseconds() -> None:
    base = OVER.replace(FRAME, "RANGE BETWEEN INTERVAL 5 MINUTES PRECEDING")
    got, messages = _verdict(base, base.replace("5 MINUTES", "299 SECONDS"))
    assert got is Verdict.COMPATIBLE and "299000 ms, was 300000 ms" in messages[0], messages
    got, messages = _verdict(base, base.replace("5 MINUTES", "301 SECONDS"))
    assert got is Verdict.INCOMPATIBLE, messages


def test_order_column_changed_is_refused() -> None:
    """The ORDER BY column's lineage is a ``same`` parameter (a source has one event-time
    column, so the edit is made in the manifest)."""
    old = _manifest(OVER)
    (query,) = old.queries
    (operator,) = query.operators
    assert operator.processor is not None
    parameters = tuple(
        replace(p, value="bids.ts2") if p.name == "order" else p
        for p in operator.processor.parameters
    )
    edited = replace(operator, processor=replace(operator.processor, parameters=parameters))
    new = replace(old, queries=(replace(query, operators=(edited,)),))
    comparison = compare(old, new)
    assert comparison.verdict is Verdict.INCOMPATIBLE
    (message,) = [f.message for _, f in comparison.findings()]
    assert "order is now bids.ts2, was bids.ts" in message
    assert "by the old ORDER BY column's time" in message


def test_within_key_groups_changed_is_refused() -> None:
    """DeduplicateWithin keeps each key's time in its key group's list: another count of
    key groups looks keys up in other lists (max_parallelism is no mere Flink matter here)."""
    (query,) = _manifest(WITHIN).queries
    (operator,) = query.operators
    assert operator.processor is not None and operator.processor.name == "DeduplicateWithin"
    assert operator.processor.keyed_by == "key group: hash(k) mod 16"
    got, messages = _verdict(WITHIN, WITHIN.replace("= 16", "= 32"))
    assert got is Verdict.INCOMPATIBLE
    assert any("key_groups is now 32, was 16" in m for m in messages), messages
    got, _ = _verdict(WITHIN, WITHIN.replace("SELECT k, v", "SELECT k"))
    assert got is Verdict.COMPATIBLE


def test_within_changing_form_is_refused() -> None:
    """A DOUBLE column makes DEDUPLICATE ... WITHIN run in the row form, which Spark runs as
    another operator than the pandas form (it fails the other's checkpoint): refused both
    ways; the same form either side (no DOUBLE, or one kept) is compatible."""
    double = WITHIN.replace("v BIGINT,", "v BIGINT, x DOUBLE,")
    (query,) = _manifest(WITHIN).queries
    (operator,) = query.operators
    assert operator.processor is not None and operator.processor.parameter("form") is not None
    for old, new in ((WITHIN, double), (double, WITHIN)):
        got, messages = _verdict(old, new)
        assert got is Verdict.INCOMPATIBLE
        assert any("form" in m and "STREAMING_STATEFUL_OPERATOR" in m for m in messages), messages
    assert _verdict(double, double.replace("x DOUBLE", "y DOUBLE"))[0] is Verdict.COMPATIBLE
    assert _verdict(WITHIN, WITHIN.replace("v BIGINT,", "v BIGINT, y INT,"))[0] is (
        Verdict.COMPATIBLE
    )


def test_batch_over_keeps_no_processor_state() -> None:
    (query,) = _manifest("SET execution.mode = batch;\n" + OVER).queries
    assert all(o.processor is None for o in query.operators)


def _write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_flowc_diff_says_what_an_over_edit_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _write(tmp_path, "old.flow", OVER)
    wide = _write(tmp_path, "wide.flow", OVER.replace(FRAME, "ROWS BETWEEN 10 PRECEDING"))
    narrow = _write(tmp_path, "narrow.flow", OVER.replace(FRAME, "ROWS BETWEEN 2 PRECEDING"))
    code = cli.main(["diff", old, wide, "--color", "never"])
    out = capsys.readouterr()
    assert code == 1
    text = out.out + out.err
    assert "error[E0820]" in text and "wide.flow:7:" in text
    assert "OverAggregate's preceding is now 10 rows, was 5 rows" in text
    assert "= was: AVG(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 5" in text
    assert "--reset-state o" in text
    code = cli.main(["diff", old, narrow, "--format", "json"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    (query,) = [q for q in document["state"] if q["name"] == "o"]
    (operator,) = query["operators"]
    assert operator["verdict"] == "compatible"
    assert [f["aspect"] for f in operator["findings"]] == ["processor"]


# ---------------------------------------------------------------- on Spark


def _run(folder: Path, text: str) -> str:
    flow = folder / "over.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    out = io.StringIO()
    report = run_job(job, available_now=True, master="local[2]", out=out)
    assert [q.error for q in report.queries] == [None]
    return out.getvalue()


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _max(frame: list[Row]) -> Any:
    return max((r["price"] for r in frame if r["price"] is not None), default=None)


def test_over_frame_widened_is_refused_and_narrowed_runs_on(spark: Any, tmp_path: Path) -> None:
    """Two micro-batches with a 5-row frame; then a 10-row frame is refused before Spark
    starts (nothing on disk touched); then a 2-row frame with a MAX call added runs three
    more on the same checkpoint: the rows emitted before are the 5-row frame's, the later
    ones the 2-row frame's over rows the state kept, with the new call."""
    first, later = BATCHES[:2], BATCHES[2:]
    for index, batch in enumerate(first):
        write_batch(tmp_path / "in", index, batch)
        _run(tmp_path, OVER)
    wide = OVER.replace(FRAME, "ROWS BETWEEN 10 PRECEDING")
    flow = tmp_path / "over.flow"
    flow.write_text(wide, encoding="utf-8")
    write_batch(tmp_path / "in", len(first), later[0])
    before = _files(tmp_path)
    job = flowc.compile(wide, str(flow), for_spark=True)
    with pytest.raises(CompileError) as caught:
        run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    errors = [d for d in caught.value.diagnostics if d.severity is Severity.ERROR]
    assert [d.code for d in errors] == ["E0820"], errors
    assert errors[0].span.line == 7 and "preceding is now 10 rows, was 5 rows" in errors[0].message
    assert errors[0].help is not None and "--reset-state o" in errors[0].help
    assert _files(tmp_path) == before
    narrow = OVER.replace(FRAME, "ROWS BETWEEN 2 PRECEDING").replace(
        " AS a\n",
        " AS a, MAX(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 2 PRECEDING"
        " AND CURRENT ROW) AS m\n",
    )
    for index in range(len(later)):
        if index:
            write_batch(tmp_path / "in", len(first) + index, later[index])
        out = _run(tmp_path, narrow)
        assert "E0820" not in out
    small = lambda rows: {k: v for k, v in rows.items() if k < 100}  # noqa: E731
    before_edit = small(emitted(first, delay=1))
    every = small(emitted(BATCHES, delay=1))
    wanted = over_rows(before_edit, {"a": avg}, 5, None)
    for key, rows in every.items():
        done = len(before_edit.get(key, []))
        assert rows[:done] == before_edit.get(key, [])
        frames = over_rows({key: rows}, {"a": avg, "m": _max}, 2, None)
        wanted += frames[done:]
    assert len(wanted) > len(over_rows(before_edit, {"a": avg}, 5, None)) > 0
    assert normal(read_json_dir(tmp_path / "out")) == normal(wanted)


class _Schema:
    def fieldNames(self) -> list[str]:
        return ["price", "ms"]


def test_over_rows_frame_holds_every_row_until_it_has_preceding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OverAggregate's ROWS frame while fewer than PRECEDING rows were emitted is every row
    so far (it once cut the list from a negative index and lost its oldest rows), within
    one emission and across two, as the state carries them."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql import types

    from flowc.spark import generated_runtime

    monkeypatch.setattr(generated_runtime, "Row", SparkRow, raising=False)
    for name in ("StructType", "StructField", "LongType"):
        monkeypatch.setattr(generated_runtime, name, getattr(types, name), raising=False)
    wanted = [sum(range(max(1, i - 5), i + 1)) for i in range(1, 9)]
    for split in (8, 3):
        processor = generated_runtime.OverAggregate(
            [("sum", "price", "s", 0, None)], "ms", "g", True, 5, _Schema()
        )
        processor.init(Handle())
        rows = [(i, i) for i in range(1, 9)]
        out = list(processor.emit(split, rows[:split])) + list(processor.emit(100, rows[split:]))
        assert [r["s"] for r in out] == wanted, split


READER = """\
SET max_parallelism = 16;
CREATE SOURCE s (k STRING, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 1 SECOND)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM s
  |> WHERE ts > CURRENT_WATERMARK(ts)
  |> KEY BY k
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS)
  |> AGGREGATE count(*) AS n;
"""


def test_a_watermark_reader_takes_its_place_among_sparks_operators() -> None:
    """CURRENT_WATERMARK runs as a processor that keeps nothing but is a stateful operator
    of Spark's plan: it is listed where Spark numbers it (after the aggregate, nearer the
    source), so adding or removing one in a stateful query is refused as any operator
    added or removed; editing its condition is not."""
    (query,) = _manifest(READER).queries
    assert [(o.index, o.kind) for o in query.operators] == [
        (0, "window_aggregate"),
        (1, "processor"),
    ]
    reader = query.operators[1].processor
    assert reader is not None and reader.name == "WatermarkReader" and reader.row == ()
    plain = READER.replace("  |> WHERE ts > CURRENT_WATERMARK(ts)\n", "")
    got, messages = _verdict(plain, READER)
    assert got is Verdict.INCOMPATIBLE and any("was added" in m for m in messages), messages
    got, messages = _verdict(READER, plain)
    assert got is Verdict.INCOMPATIBLE and any("was removed" in m for m in messages), messages
    edited = READER.replace("WHERE ts > CURRENT", "WHERE v > 0 AND ts > CURRENT")
    got, messages = _verdict(READER, edited)
    assert got is Verdict.COMPATIBLE, messages
    got, messages = _verdict(READER, READER.replace("= 16", "= 32"))
    assert sum("max parallelism" in m for m in messages) == 1, messages  # the aggregate's


def test_a_version_1_manifest_is_compared_without_the_readers() -> None:
    """A manifest of an older flowc never listed the readers: the new one is compared as
    it would have been written then, not as an operator added."""
    new = _manifest(READER)
    data = new.to_json()
    data["version"] = 1
    (query,) = data["queries"]
    query["operators"] = [o for o in query["operators"] if o["kind"] != "processor"]
    old = StateManifest.from_json(data)
    assert compare(old, new).verdict is Verdict.UNCHANGED
    reader_only = READER.split("  |> KEY BY k")[0] + "  |> SELECT k;\n"
    new = _manifest(reader_only)
    data = new.to_json()
    data["version"] = 1
    data["queries"][0]["operators"] = []
    assert compare(StateManifest.from_json(data), new).verdict is Verdict.UNCHANGED
    assert compare(new, new).verdict is Verdict.UNCHANGED


def test_a_watermark_reader_is_one_of_sparks_stateful_operators(spark: Any, tmp_path: Path) -> None:
    """On Spark the reader's processor takes a position among the checkpoint's stateful
    operators, where the manifest lists it; removing it is refused before Spark starts."""
    write_batch(
        tmp_path / "in",
        0,
        [{"k": "a", "v": i, "ts": f"2026-01-01T10:00:{i:02d}"} for i in range(5)],
    )
    flow = tmp_path / "job.flow"
    flow.write_text(READER, encoding="utf-8")
    job = flowc.compile(READER, str(flow), for_spark=True)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert [q.error for q in report.queries] == [None]
    state = tmp_path / ".flowc-checkpoints" / "job" / "o" / "state"
    (query,) = describe_state(job).queries
    # Spark's operator 0 the aggregate's (stateStoreSave), 1 the reader's transformWithState
    # (its metadata under _metadata/v2), as the manifest numbers them
    assert sorted(p.name for p in state.iterdir() if p.name.isdigit()) == ["0", "1"]
    assert (state / "0" / "_metadata" / "metadata").is_file()
    assert (state / "1" / "_metadata" / "v2").is_dir()
    assert [o.kind for o in query.operators] == ["window_aggregate", "processor"]
    plain = READER.replace("  |> WHERE ts > CURRENT_WATERMARK(ts)\n", "")
    flow.write_text(plain, encoding="utf-8")
    before = _files(tmp_path)
    with pytest.raises(CompileError) as caught:
        run_job(
            flowc.compile(plain, str(flow), for_spark=True),
            available_now=True,
            master="local[2]",
            out=io.StringIO(),
        )
    errors = [d for d in caught.value.diagnostics if d.severity is Severity.ERROR]
    assert [d.code for d in errors] == ["E0820"] and "was removed" in errors[0].message
    assert _files(tmp_path) == before
    # Without its manifest, the checkpoint is checked from Spark's files: the reader's
    # transformWithState metadata (under _metadata/v2) counts as an operator there too.
    (state.parent / STATE_MANIFEST).unlink()
    root, base = str(tmp_path / ".flowc-checkpoints"), str(tmp_path)
    guard = guard_state(flowc.compile(READER, str(flow), for_spark=True), root, base)
    assert [d.code for d in guard.warnings] == ["E0822"]
    assert "2 stateful operators" in guard.warnings[0].help
    with pytest.raises(CompileError) as caught:
        guard_state(flowc.compile(plain, str(flow), for_spark=True), root, base)
    (error,) = [d for d in caught.value.diagnostics if d.severity is Severity.ERROR]
    assert error.code == "E0820" and "transformWithStateInPySparkExec" in error.message


LAG = OVER.replace(
    "AVG(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW)",
    "LAG(price, 2) OVER (PARTITION BY seller ORDER BY ts)",
)


def test_lag_offset_is_the_rows_kept() -> None:
    """LAG keeps only as many past rows as its largest offset: a smaller offset runs on, a
    larger one would read rows the state no longer has (refused)."""
    assert "LAG(price, 2)" in LAG
    (query,) = _manifest(LAG).queries
    (operator,) = query.operators
    assert operator.processor is not None
    shown = {p.name: (p.value, p.amount) for p in operator.processor.parameters}
    assert shown["lag rows kept"] == ("2 rows", 2)
    got, messages = _verdict(LAG, LAG.replace("LAG(price, 2)", "LAG(price, 1)"))
    assert got is Verdict.COMPATIBLE, messages
    got, messages = _verdict(LAG, LAG.replace("LAG(price, 2)", "LAG(price, 3)"))
    assert got is Verdict.INCOMPATIBLE and any("no longer has" in m for m in messages), messages


UPDATING = """\
SET max_parallelism = 16;
CREATE SOURCE c (customer_id BIGINT, country STRING, updated_at TIMESTAMP)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json', mode = 'update',
  key = 'country');
INSERT INTO o FROM c |> TOP 1 BY updated_at DESC PER customer_id
  |> KEY BY country |> AGGREGATE count(*) AS customers;
"""


def test_updating_pipeline_processors_are_described_and_key_groups_guarded() -> None:
    """Both ChangelogOperators of an updating pipeline (the TOP producing the changelog,
    the AGGREGATE consuming it) keep their state per key group: another max parallelism
    looks keys up in other groups, refused, where Spark's own operators only warn."""
    (query,) = _manifest(UPDATING).queries
    roles = {
        p.value
        for o in query.operators
        if o.processor is not None and o.processor.name == "ChangelogOperator"
        for p in o.processor.parameters
        if p.name == "role"
    }
    assert roles == {"TOP that produces a changelog", "AGGREGATE that consumes a changelog"}
    got, messages = _verdict(UPDATING, UPDATING.replace("= 16", "= 32"))
    assert got is Verdict.INCOMPATIBLE and any("key group" in m for m in messages), messages
    got, _ = _verdict(UPDATING, UPDATING.replace("count(*) AS customers", "count(*) AS n"))
    assert got is not Verdict.INCOMPATIBLE


TOP_OVER_UPDATES = """\
SET max_parallelism = 16;
CREATE SOURCE b (category STRING, seller STRING, region STRING, price BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json', mode = 'update',
  key = 'category, seller');
INSERT INTO o FROM b |> KEY BY category, seller |> AGGREGATE sum(price) AS total
  |> TOP 3 BY total DESC PER category;
"""


def test_a_top_over_updates_is_described_with_its_row_keys() -> None:
    """The TOP consuming an AGGREGATE's changelog keeps its partitions' current rows and
    names its changes by the AGGREGATE's keys: recorded, and another row key (its emitted
    changes would name other rows) is refused."""
    (query,) = _manifest(TOP_OVER_UPDATES).queries
    shown = {
        p.name: p.value
        for o in query.operators
        if o.processor is not None and o.processor.name == "ChangelogOperator"
        for p in o.processor.parameters
        if p.name in ("role", "row_keys") and "TOP" in o.processor.parameters[1].value
    }
    assert shown == {"role": "TOP that consumes a changelog", "row_keys": "category, seller"}
    other = TOP_OVER_UPDATES.replace(
        "KEY BY category, seller", "KEY BY category, seller, region"
    ).replace("key = 'category, seller'", "key = 'category, seller, region'")
    got, messages = _verdict(TOP_OVER_UPDATES, other)
    assert got is Verdict.INCOMPATIBLE and any("would name other rows" in m for m in messages), (
        messages
    )
