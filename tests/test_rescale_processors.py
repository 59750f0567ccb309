"""Rescaling the state of flowc's processors (issue 29, item 4): real Spark, real checkpoints.

flowc's OVER, DEDUPLICATE ... WITHIN, CURRENT_WATERMARK and changelog operators run as
``transformWithState`` processors (docs/language.md); Spark's offline repartition takes
their column families (lists, values, both indexes of the timers) by the processor's
grouping key, and flowc repartitions a copy of the checkpoint and swaps it in
(docs/state.md, "Rescaling state to a new parallelism"). One job of two queries over one
source runs three times, at parallelism 2, then 4, then 1, with a new input file (a later
modification time) before each run: an OVER (the row form,
``transformWithStateInPySparkExec``: lists, a value and an event-time timer per seller)
and a DEDUPLICATE ... WITHIN (the pandas form, ``transformWithStateInPandasExec``: a list
and a timer per key group). After every run each query's rows equal plain Python over all
the input so far; the OVER's rows that waited for the watermark at a rescale, of sellers
without a row in the next run, can only come out of their timer, so the timers fire after
a rescale; the WITHIN drops rows only the state carried across the rescale remembers.
A changelog AGGREGATE over a CDC source (a value per key group, no timer) into an upsert
sink is rescaled the same way, its table equal to plain Python after each run; a
``flowc rescale`` of it killed (-9) while Spark writes the copy leaves the checkpoint as it
was (Spark reads the original through the metadata's absolute paths, and writes nothing
there), and the next run rescales and answers right.

Spark starts a Python worker per processor and micro-batch to plan it (its pre-init
runner), which must connect back in time: a CURRENT_WATERMARK filter before the WITHIN
(a processor with no state) rescaled right in a measured run, and is left out here to
spare those workers (on a loaded machine they time out, before any rescale):
tests/test_rescale_processors_more.py rescales it in a job with one other processor.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import flowc
from flowc.analyze.state_store import ROCKSDB_PROVIDER
from flowc.cli import main as cli
from flowc.runtime.rescale import KEPT, STAGING, foreign_schema, obstacle
from flowc.runtime.run import RunReport, run_job
from tests.helpers.files import read_json_dir, upsert_table
from tests.helpers.minute_events import Row, at, minutes, write_batch
from tests.helpers.over_frames import emitted, normal, over_rows
from tests.helpers.rescale import kill_during_repartition

JOB = """\
SET parallelism = {p};
SET max_parallelism = 16;
SET state.backend.type = 'rocksdb';
CREATE SOURCE s (seller INT, id BIGINT, price INT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK over_out WITH (connector = 'files', path = 'out/over', format = 'json');
CREATE SINK within_out WITH (connector = 'files', path = 'out/within', format = 'json');
INSERT INTO over_out SELECT seller, price, ts,
  SUM(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s,
  COUNT(*) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS n
  FROM s;
INSERT INTO within_out FROM s
  |> DEDUPLICATE ON id WITHIN INTERVAL 10 MINUTES
  |> SELECT id, ts;
"""
WITHIN = 10  # minutes
DELAY = 1  # the watermark's, minutes

# (seller, minute, id) per run. Each run's rows are ahead of the watermark the run before
# left (its largest time minus a minute), so nothing is late. At the end of run 0 sellers 2,
# 3, 5 and 6 have rows waiting (after 10:05), and no row in run 1; run 1 leaves 7 and 8
# waiting for run 2, which has none of them. Ids 4 and 5 in run 1 and 0 and 6 in run 2 come
# less than 10 minutes after the row their id kept in the run before.
ROWS: list[list[tuple[int, float, int]]] = [
    [(1, 0, 0), (1, 1, 1), (1, 2, 2), (2, 0.5, 3), (2, 6, 4), (3, 5.5, 5), (4, 1, 0),
     (5, 5.8, 6), (6, 0.2, 7), (6, 5.9, 1)],
    [(1, 10, 4), (1, 12, 0), (4, 11, 5), (7, 16, 6), (8, 15.5, 8)],
    [(1, 20, 0), (1, 26, 8), (2, 21, 6), (4, 22, 2)],
]  # fmt: skip
RUNS = [2, 4, 1]


def _batches() -> list[list[Row]]:
    return [
        [
            {"seller": seller, "id": key, "price": 10 * run + index, "ts": at(minute)}
            for index, (seller, minute, key) in enumerate(rows)
        ]
        for run, rows in enumerate(ROWS)
    ]


def _within(batches: list[list[Row]]) -> list[tuple[int, float]]:
    """DEDUPLICATE ON id WITHIN 10 MINUTES as the language defines it: a micro-batch's rows
    in time order; a key's first row is kept, a later one less than the interval from the
    key's kept row is dropped, one the interval or more from it is kept and becomes it."""
    kept: dict[int, float] = {}
    out = []
    for batch in batches:
        for row in sorted(batch, key=lambda r: minutes(r["ts"])):
            key, time = row["id"], minutes(row["ts"])
            if key in kept and time - kept[key] < WITHIN:
                continue
            kept[key] = time
            out.append((key, time))
    return out


def _over(batches: list[list[Row]]) -> list[tuple[Any, ...]]:
    calls = {"s": lambda f: sum(r["price"] for r in f), "n": len}
    rows = over_rows(emitted(batches, delay=DELAY), calls, 2, None)
    return normal([{k: v for k, v in r.items() if k != "id"} for r in rows])


def _tree(folder: Path) -> list[tuple[str, int, int]]:
    """Every file under ``folder``: its path in it, size and modification time."""
    return sorted(
        (str(f.relative_to(folder)), f.stat().st_size, f.stat().st_mtime_ns)
        for f in folder.rglob("*")
        if f.is_file()
    )


def _run(folder: Path, p: int) -> tuple[RunReport, str]:
    text = JOB.format(p=p)
    flow = folder / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    out = io.StringIO()
    report = run_job(job, available_now=True, master="local[2]", out=out)
    assert [q.error for q in report.queries] == [None, None], out.getvalue()
    return report, out.getvalue()


def test_processors_rescaled_2_4_1_across_three_runs(spark: Any, tmp_path: Path) -> None:
    batches = _batches()
    # The input does what the test needs: rows only a timer can emit after each rescale,
    # and rows of runs 1 and 2 that only the state from the runs before drops.
    for run in (1, 2):
        mark = max(m for _, m, _ in ROWS[run - 1]) - DELAY
        waiting = {s for s, m, _ in ROWS[run - 1] if m > mark}
        assert waiting and not waiting & {s for s, _, _ in ROWS[run]}
        alone = _within(batches[run : run + 1])
        assert len(_within(batches[: run + 1])) < len(_within(batches[:run])) + len(alone)
    checkpoints = tmp_path / ".flowc-checkpoints" / "job"
    queries = ("over_out", "within_out")
    for run, p in enumerate(RUNS):
        write_batch(tmp_path / "in", run, batches[run])
        if run == 1:
            # flowc rescale alone: Spark reads the schemas through the absolute paths the
            # metadata names, the original's, and writes nothing there.
            trees = {q: _tree(checkpoints / q) for q in queries}
            (tmp_path / "job.flow").write_text(JOB.format(p=p), encoding="utf-8")
            assert cli.main(["rescale", str(tmp_path / "job.flow"), "--master", "local[2]"]) == 0
            for query in queries:
                assert _tree(Path(str(checkpoints / query) + KEPT)) == trees[query]
        report, out = _run(tmp_path, p)
        seen = batches[: run + 1]
        if run == 2:
            assert {(r["query"], r["partitions_before"], r["partitions_after"]) for r in
                    report.rescaled} == {(q, RUNS[run - 1], p) for q in queries}, out  # fmt: skip
        else:
            assert report.rescaled == [] and "E0821" not in out
        over = normal(read_json_dir(tmp_path / "out" / "over"))
        assert over == _over(seen), run
        within = sorted(
            (r["id"], minutes(r["ts"])) for r in read_json_dir(tmp_path / "out" / "within")
        )
        assert within == sorted(_within(seen)), run
    assert not [p for p in checkpoints.iterdir() if p.name.endswith(KEPT)]


CDC = """\
SET parallelism = {p};
SET max_parallelism = 8;
CREATE SOURCE customers (id BIGINT, country STRING, score BIGINT)
  WITH (connector = 'files', path = 'in', format = 'debezium-json');
CREATE SINK per_country WITH (connector = 'files', path = 'out', format = 'json',
  mode = 'update', key = 'country');
INSERT INTO per_country FROM customers
  |> KEY BY country
  |> AGGREGATE count(*) AS customers, sum(score) AS total, max(score) AS best;
"""
#: Debezium envelopes (op, before, after) per run, as (id, country, score).
Change = tuple[str, tuple[int, str, int] | None, tuple[int, str, int] | None]
CHANGES: list[list[Change]] = [
    [("c", None, (i, c, 10 * i)) for i, c in enumerate(["FR", "US", "DE", "FR", "IT", "US"])],
    [
        ("u", (1, "US", 10), (1, "US", 70)),  # US's max now 70
        ("d", (3, "FR", 30), None),  # FR's max taken back: 0
        ("u", (4, "IT", 40), (4, "ES", 40)),  # IT gone, ES new
        ("c", None, (6, "NL", 5)),
    ],
    [
        ("d", (0, "FR", 0), None),  # FR gone
        ("u", (1, "US", 70), (1, "US", 1)),  # US's max back to 50
        ("c", None, (7, "IT", 8)),  # IT back
    ],
]


def _write_changes(folder: Path, run: int) -> None:
    def row(values: tuple[int, str, int] | None) -> dict[str, Any] | None:
        return (
            None if values is None else dict(zip(("id", "country", "score"), values, strict=True))
        )

    lines = [
        json.dumps({"before": row(b), "after": row(a), "op": op, "source": {}, "ts_ms": run})
        for op, b, a in CHANGES[run]
    ]
    path = folder / "in" / f"part-{run:03d}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    os.utime(path, (1_700_000_000 + 10 * run,) * 2)


def _per_country(runs: list[list[Change]]) -> dict[str, tuple[int, int, int]]:
    """The table the changes leave: per country, count, sum and max of its rows."""
    rows: dict[int, tuple[str, int]] = {}
    for changes in runs:
        for _, before, after in changes:
            if before is not None:
                del rows[before[0]]
            if after is not None:
                rows[after[0]] = (after[1], after[2])
    scores: dict[str, list[int]] = {}
    for country, score in rows.values():
        scores.setdefault(country, []).append(score)
    return {c: (len(s), sum(s), max(s)) for c, s in scores.items()}


def test_a_changelog_aggregate_rescaled_2_4_1_across_three_runs(spark: Any, tmp_path: Path) -> None:
    """flowc's ChangelogOperator (value state per key group, no timers) over a CDC source,
    into an upsert files sink: the final table after each run equals plain Python, so the
    retractions after a rescale found the accumulators the state carried."""
    flow = tmp_path / "job.flow"
    for run, p in enumerate(RUNS):
        _write_changes(tmp_path, run)
        text = CDC.format(p=p)
        flow.write_text(text, encoding="utf-8")
        job = flowc.compile(text, str(flow), for_spark=True)
        out = io.StringIO()
        report = run_job(job, available_now=True, master="local[2]", out=out)
        assert [q.error for q in report.queries] == [None], out.getvalue()
        if run:
            (done,) = report.rescaled
            assert (done["partitions_before"], done["partitions_after"]) == (RUNS[run - 1], p)
        table = upsert_table(tmp_path / "out")
        got = {r["country"]: (r["customers"], r["total"], r["best"]) for r in table}
        assert got == _per_country(CHANGES[: run + 1]), run


def test_a_kill_during_a_processors_repartition_leaves_the_old_checkpoint(
    spark: Any, tmp_path: Path
) -> None:
    """``flowc rescale`` killed (-9) while Spark writes the repartitioned copy of the
    changelog AGGREGATE's checkpoint: the checkpoint is as it was, and the next run at the
    new parallelism drops the half-done copy, rescales and answers right."""
    flow = tmp_path / "job.flow"
    checkpoint = tmp_path / ".flowc-checkpoints" / "job" / "per_country"
    _write_changes(tmp_path, 0)
    flow.write_text(CDC.format(p=2), encoding="utf-8")
    job = flowc.compile(CDC.format(p=2), str(flow), for_spark=True)
    first = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert [q.error for q in first.queries] == [None]
    before = _tree(checkpoint)
    last = max(int(n.name) for n in (checkpoint / "commits").iterdir() if n.name.isdigit())
    flow.write_text(CDC.format(p=4), encoding="utf-8")
    staging = Path(str(checkpoint) + STAGING)
    # Killed once Spark has written the repartition's offsets in the copy, not its commit.
    kill_during_repartition(
        tmp_path, ["rescale", "job.flow", "--master", "local[2]"], staging, last + 1
    )
    assert _tree(checkpoint) == before
    _write_changes(tmp_path, 1)
    job = flowc.compile(CDC.format(p=4), str(flow), for_spark=True)
    out = io.StringIO()
    report = run_job(job, available_now=True, master="local[2]", out=out)
    assert [q.error for q in report.queries] == [None], out.getvalue()
    assert f"removed {staging}, left by an interrupted rescale" in out.getvalue()
    (done,) = report.rescaled
    assert (done["partitions_before"], done["partitions_after"], done["batch"]) == (2, 4, last + 1)
    table = upsert_table(tmp_path / "out")
    got = {r["country"]: (r["customers"], r["total"], r["best"]) for r in table}
    assert got == _per_country(CHANGES[:2])


# ---------------------------------------------------------------- without Spark


def _processor_checkpoint(folder: Path, schema: str) -> None:
    """A committed batch 3 at 2 partitions, a processor whose metadata names ``schema``."""
    for log in ("offsets", "commits"):
        (folder / log).mkdir(parents=True, exist_ok=True)
    conf = {"conf": {"spark.sql.shuffle.partitions": "2"}}
    (folder / "offsets" / "3").write_text("v1\n" + json.dumps(conf) + "\n")
    (folder / "commits" / "3").write_text("v1\n{}\n")
    v2 = folder / "state" / "0" / "_metadata" / "v2"
    v2.mkdir(parents=True)
    store = {"storeName": "default", "numPartitions": 2, "stateSchemaFilePaths": [schema]}
    metadata = {
        "operatorInfo": {"operatorId": 0, "operatorName": "transformWithStateInPySparkExec"},
        "stateStoreInfo": [store],
    }
    (v2 / "3").write_text("v2\n" + json.dumps(metadata))


def test_a_processor_is_repartitioned_where_its_schema_is_the_checkpoints(tmp_path: Path) -> None:
    names = ["transformWithStateInPySparkExec", "transformWithStateInPandasExec"]
    folder = tmp_path / "o"
    _processor_checkpoint(folder, f"file:{folder}/state/0/_stateSchema/default/0_x")
    assert foreign_schema(str(folder)) is None
    assert obstacle(str(folder), ROCKSDB_PROVIDER, names, (4, 3)) is None
    # Moved since the metadata was written: Spark would read another folder's schema.
    moved = tmp_path / "moved"
    folder.rename(moved)
    assert foreign_schema(str(moved)) == f"file:{folder}/state/0/_stateSchema/default/0_x"
    why = obstacle(str(moved), ROCKSDB_PROVIDER, names, (4, 3))
    assert why is not None and f"state schema at file:{folder}/state" in why
