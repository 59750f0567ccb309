"""Rescaling state on a restart (flowc.runtime.rescale): real Spark, real checkpoints.

A keyed aggregate and a deduplication run three times, at parallelism 2, then 4, then 1,
with a new input file (a later modification time) before each run: flowc repartitions
the state before the second and third runs, and every run's rows equal a plain-Python
computation over all the input so far. The deduplication writes a files sink whose
commit log compacts every 3 batches, and the first rescale's batch is a compaction batch:
Spark reads the folder through that log. A ``flowc run`` killed (-9) while Spark
repartitions leaves the checkpoint the next run uses. The rest (the swap's other
windows, the sink log's entries, the reasons a rescale is refused) needs no Spark.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.analyze.state_store import HDFS_PROVIDER, ROCKSDB_PROVIDER
from flowc.cli import main as cli
from flowc.diagnostics import CompileError
from flowc.runtime.rescale import (
    KEPT,
    MARKER,
    STAGING,
    align_sink_log,
    compact_interval,
    obstacle,
    recover,
)
from flowc.runtime.run import RunReport, run_job
from flowc.runtime.state_guard import guard_state, read_manifest
from tests.helpers.files import read_json_dir
from tests.helpers.rescale import kill_during_repartition, offsets_partitions, run_flow

HEAD = """SET parallelism = {p};
SET state.backend.type = 'rocksdb';
SET spark.sql.streaming.fileSink.log.compactInterval = 3;
CREATE SOURCE s (k STRING, v BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json', max_files_per_trigger = 1);
"""
PROGRAMS = {
    "keyed": HEAD
    + """CREATE SINK o WITH (connector = 'memory', mode = 'complete');
INSERT INTO o
  FROM s
  |> KEY BY k
  |> AGGREGATE count(*) AS n, sum(v) AS total;
""",
    "dedup": HEAD
    + """CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o
  FROM s
  |> DEDUPLICATE ON k, v
  |> SELECT k, v;
""",
}
MTIME = 1_800_000_000


def _rows(run: int, file: int) -> list[dict[str, Any]]:
    """Keys repeat within and across runs (state carried over), values repeat too (the
    deduplication drops them)."""
    start = 100 * run + 10 * file
    return [{"k": f"k{(start + i) % 7}", "v": (start + i) % 4} for i in range(10)]


def _write(folder: Path, run: int, files: int) -> list[dict[str, Any]]:
    written = []
    for file in range(files):
        rows = _rows(run, file)
        path = folder / "in" / f"r{run}-{file}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        os.utime(path, (MTIME + 100 * run + file,) * 2)
        written += rows
    return written


def _run(folder: Path, kind: str, p: int) -> tuple[RunReport, str]:
    return run_flow(folder, PROGRAMS[kind].format(p=p))


def _expected(kind: str, rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    if kind == "keyed":
        totals: dict[str, list[int]] = {}
        for row in rows:
            n_total = totals.setdefault(row["k"], [0, 0])
            n_total[0] += 1
            n_total[1] += row["v"]
        return Counter((k, n, total) for k, (n, total) in totals.items())
    return Counter({(r["k"], r["v"]) for r in rows})


def _actual(spark: Any, kind: str, folder: Path) -> Counter[tuple[Any, ...]]:
    if kind == "keyed":
        return Counter((r["k"], r["n"], r["total"]) for r in spark.sql("SELECT * FROM o").collect())
    # Spark's own reader goes through the sink's commit log (it fails on a missing batch).
    read = spark.read.json(str(folder / "out")).collect()
    assert Counter((r["k"], r["v"]) for r in read) == Counter(
        (r["k"], r["v"]) for r in read_json_dir(folder / "out")
    )
    return Counter((r["k"], r["v"]) for r in read)


@pytest.mark.parametrize("kind", ["keyed", "dedup"])
def test_state_rescaled_2_4_1_across_three_runs(spark: Any, tmp_path: Path, kind: str) -> None:
    checkpoint = tmp_path / ".flowc-checkpoints" / "job" / "o"
    everything = _write(tmp_path, 0, 2)  # two files, two micro-batches (0 and 1)
    report, out = _run(tmp_path, kind, 2)
    assert report.rescaled == [] and "rescale" not in out
    assert _actual(spark, kind, tmp_path) == _expected(kind, everything)
    assert offsets_partitions(checkpoint) == (1, 2)
    for run, (before, after) in enumerate([(2, 4), (4, 1)], start=1):
        everything += _write(tmp_path, run, 1)
        last, _ = offsets_partitions(checkpoint)
        report, out = _run(tmp_path, kind, after)
        assert f"warning[E0821]: query 'o' plans {after} shuffle partitions" in out
        assert f"moving its state from {before} to {after} partitions" in out
        (done,) = report.rescaled
        assert (done["partitions_before"], done["partitions_after"]) == (before, after)
        assert done["batch"] == last + 1  # the repartition's batch, then the new file's
        assert offsets_partitions(checkpoint) == (last + 2, after)
        assert _actual(spark, kind, tmp_path) == _expected(kind, everything)
        manifest = read_manifest(str(checkpoint))
        assert manifest is not None and not isinstance(manifest, str)
        assert manifest.state_partitions == after
        # The query committed a batch after the rescale: the old checkpoint is gone.
        assert not Path(str(checkpoint) + KEPT).exists()
        assert not (checkpoint / MARKER).exists()
    if kind == "dedup":  # the first rescale's batch (2) was a compaction batch
        assert (tmp_path / "out" / "_spark_metadata" / "2.compact").is_file()


def test_kill_during_the_repartition_leaves_the_old_checkpoint(
    spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    kind = "keyed"
    checkpoint = tmp_path / ".flowc-checkpoints" / "job" / "o"
    everything = _write(tmp_path, 0, 1)
    _run(tmp_path, kind, 2)
    everything += _write(tmp_path, 1, 1)
    (tmp_path / "old.flow").write_text(PROGRAMS[kind].format(p=2), encoding="utf-8")
    (tmp_path / "job.flow").write_text(PROGRAMS[kind].format(p=4), encoding="utf-8")
    before = sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*"))
    # flowc diff --against says what flowc run will do, and changes nothing.
    flows = [str(tmp_path / "old.flow"), str(tmp_path / "job.flow")]
    roots = ["--against", str(tmp_path / ".flowc-checkpoints")]
    assert cli.main(["diff", *flows, *roots]) == 0
    said = capfd.readouterr().out
    assert "warning[E0821]: query 'o' plans 4 shuffle partitions" in said
    assert "flowc run repartitions the state into 4 before the query starts" in said
    staging = Path(str(checkpoint) + STAGING)
    # Killed once Spark has written the repartition's offsets/1 in the copy, not its commit.
    run = ["run", "job.flow", "--available-now", "--master", "local[2]"]
    kill_during_repartition(tmp_path, run, staging, 1)
    assert sorted(str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*")) == before
    assert offsets_partitions(checkpoint) == (0, 2)
    # flowc rescale drops the half-done copy and rescales; the next run has nothing to do.
    capfd.readouterr()
    assert cli.main(["rescale", str(tmp_path / "job.flow"), "--master", "local[2]"]) == 0
    said = capfd.readouterr().err
    assert f"removed {staging}, left by an interrupted rescale" in said
    assert "rescale: query 'o': state now in 4 partitions (batch 1" in said
    assert not staging.exists() and offsets_partitions(checkpoint) == (1, 4)
    report, out = _run(tmp_path, kind, 4)
    assert report.rescaled == [] and "E0821" not in out
    assert _actual(spark, kind, tmp_path) == _expected(kind, everything)


# ---------------------------------------------------------------- without Spark


def _fake_checkpoint(folder: Path, batch: int, partitions: int) -> None:
    for log in ("offsets", "commits"):
        (folder / log).mkdir(parents=True, exist_ok=True)
    conf = {"conf": {"spark.sql.shuffle.partitions": str(partitions)}}
    (folder / "offsets" / str(batch)).write_text("v1\n" + json.dumps(conf) + "\n")
    (folder / "commits" / str(batch)).write_text("v1\n{}\n")


def test_a_kill_between_the_two_renames_is_finished_or_undone(tmp_path: Path) -> None:
    folder = tmp_path / "o"
    staging, kept = Path(str(folder) + STAGING), Path(str(folder) + KEPT)
    # Killed after the old checkpoint went aside, before the copy came in: finished.
    _fake_checkpoint(kept, 3, 2)
    _fake_checkpoint(staging, 4, 4)
    (staging / MARKER).write_text(json.dumps({"batch": 4}))
    assert recover(str(folder)) == [f"rescale: finished the interrupted swap of {folder}"]
    assert offsets_partitions(folder) == (4, 4) and kept.is_dir() and not staging.exists()
    # A copy without the marker never replaces anything: the kept one comes back.
    (tmp_path / "other").mkdir()
    folder = tmp_path / "other" / "o"
    staging, kept = Path(str(folder) + STAGING), Path(str(folder) + KEPT)
    _fake_checkpoint(kept, 3, 2)
    _fake_checkpoint(staging, 4, 4)
    done = recover(str(folder))
    assert done[0] == f"rescale: undid the interrupted swap of {folder}"
    assert offsets_partitions(folder) == (3, 2) and not staging.exists()
    # With the checkpoint in place, a copy left over is dropped, whatever it holds.
    _fake_checkpoint(staging, 4, 4)
    (staging / MARKER).write_text(json.dumps({"batch": 4}))
    recover(str(folder))
    assert offsets_partitions(folder) == (3, 2) and not staging.exists()


def test_the_sink_log_gets_the_repartition_batch(tmp_path: Path) -> None:
    log = tmp_path / "_spark_metadata"
    log.mkdir()
    entry = '{"path":"file:/x/part-%d.json","size":1,"isDir":false,"modificationTime":1,' \
        '"blockReplication":1,"blockSize":1,"action":"add"}'  # fmt: skip
    for batch in range(4):
        (log / str(batch)).write_text("v1\n" + entry % batch)
    assert compact_interval(str(log), 10) == 10
    assert align_sink_log(str(log), 4, 10) == str(log / "4")
    assert (log / "4").read_text() == "v1"
    assert align_sink_log(str(log), 4, 10) is None  # already there
    # Batch 5 of a log compacting every 3 (2, 5, 8...): all of 2, 3 and 4 in 5.compact.
    (log / "2").rename(log / "2.compact")
    assert compact_interval(str(log), 3) == 3
    assert align_sink_log(str(log), 5, 3) == str(log / "5.compact")
    lines = (log / "5.compact").read_text().split("\n")
    assert lines == ["v1", entry % 2, entry % 3]
    # Spark derives the interval from a lone .compact file (CompactibleFileStreamLog).
    assert compact_interval(str(log), 10) == 3  # 2.compact: 3 <= 10
    (log / "2.compact").unlink()
    (log / "5.compact").rename(log / "11.compact")
    assert compact_interval(str(log), 5) == 6  # the first divisor of 12 from 5
    assert compact_interval(str(log), 7) == 12


def test_why_a_checkpoint_cannot_be_repartitioned(tmp_path: Path) -> None:
    _fake_checkpoint(tmp_path, 3, 2)
    ok = ["stateStoreSave", "dedupe", "symmetricHashJoin", "sessionWindowStateStoreSaveExec"]
    assert obstacle(str(tmp_path), ROCKSDB_PROVIDER, ok, (4, 3)) is None
    older = obstacle(str(tmp_path), ROCKSDB_PROVIDER, ok, (4, 1))
    assert older is not None and "PySpark 4.1 has no offline state repartition" in older
    hdfs = obstacle(str(tmp_path), HDFS_PROVIDER, ok, (4, 3))
    assert hdfs is not None and "the HDFS-backed store" in hdfs
    assert obstacle(str(tmp_path), None, ok, (4, 3)) == hdfs  # Spark's default store
    other = obstacle(str(tmp_path), ROCKSDB_PROVIDER, ["flatMapGroupsWithStateExec"], (4, 3))
    assert other is not None and "flatMapGroupsWithStateExec" in other
    keyless = obstacle(str(tmp_path), ROCKSDB_PROVIDER, ok, (4, 3), ["global_aggregate"])
    assert keyless is not None and "an aggregate without a key" in keyless
    (tmp_path / "offsets" / "4").write_text((tmp_path / "offsets" / "3").read_text())
    uncommitted = obstacle(str(tmp_path), ROCKSDB_PROVIDER, ok, (4, 3))
    assert uncommitted is not None and "last micro-batch (4) did not commit" in uncommitted


KEYLESS_TOP = """SET state.backend.type = 'rocksdb';
CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json', mode = 'update', key = 'k');
INSERT INTO o FROM s |> TOP 1 BY v DESC{per};
"""


@pytest.mark.parametrize("per", ["", " PER k"])
def test_a_top_without_a_key_is_not_repartitioned(tmp_path: Path, per: str) -> None:
    """A TOP without PER (Spark's aggregation without grouping: partition 0 whatever the
    count) is refused, as a global aggregate is: Spark's repartition hashes its one key
    into another partition, which the next run would not read (measured 2 -> 4: partition
    2). A TOP PER k is hashed by k both ways and is repartitioned. The plan says which."""
    from flowc.runtime.rescale import state_kinds
    from flowc.state import describe_state

    job = flowc.compile(KEYLESS_TOP.format(per=per), "job.flow", for_spark=True)
    (query,) = describe_state(job).queries
    _fake_checkpoint(tmp_path, 3, 2)
    ok = ["stateStoreSave"]
    why = obstacle(str(tmp_path), ROCKSDB_PROVIDER, ok, (4, 3), state_kinds(query.operators))
    (planned,) = job.spark_plan.queries
    assert planned.rescaling is not None
    if per:
        assert why is None
        assert "flowc run first repartitions it" in planned.rescaling
    else:
        assert why is not None and "a TOP without a key" in why
        assert "TOP without a key" in planned.rescaling and "E0826" in planned.rescaling


def test_hdfs_store_refuses_a_new_parallelism_before_spark(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = PROGRAMS["keyed"].replace("'rocksdb'", "'hashmap'")
    _write(tmp_path, 0, 1)
    flow = tmp_path / "job.flow"
    flow.write_text(text.format(p=2), encoding="utf-8")
    run_job(flowc.compile(text.format(p=2), str(flow), for_spark=True), available_now=True,
            master="local[2]", out=io.StringIO())  # fmt: skip
    checkpoint = tmp_path / ".flowc-checkpoints" / "job" / "o"
    before = sorted((str(p), p.stat().st_mtime_ns) for p in checkpoint.rglob("*"))
    job = flowc.compile(text.format(p=4), str(flow), for_spark=True)
    with pytest.raises(CompileError) as raised:
        guard_state(job, str(tmp_path / ".flowc-checkpoints"), str(tmp_path))
    (error,) = [d for d in raised.value.diagnostics if d.code == "E0826"]
    assert (error.span.line, error.span.column) == (1, 5)  # SET parallelism = 4
    assert "keeps the state in 2, and flowc cannot repartition it" in error.message
    assert "the HDFS-backed store" in error.message
    assert "set the parallelism back to 2" in (error.help or "")
    assert sorted((str(p), p.stat().st_mtime_ns) for p in checkpoint.rglob("*")) == before
    (tmp_path / "new.flow").write_text(text.format(p=4), encoding="utf-8")
    flows = [str(flow), str(tmp_path / "new.flow"), "--against", str(checkpoint.parent.parent)]
    assert cli.main(["diff", *flows]) == 1
    assert "error[E0826]: query 'o' plans 4 shuffle partitions" in capsys.readouterr().out
