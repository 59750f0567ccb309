"""The state store (issue 14, item 2): what the plan chooses and says, that Spark runs the
planned store with the right answers, and that a store the checkpoint froze is not
silently swapped (E0824).

The Spark cases run a keyed running aggregate over three micro-batches into an upsert
files table and compare it with the totals computed here in plain Python; the store
Spark really used is read back from the checkpoint's offsets (the ``conf`` Spark froze).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.analyze.state_store import (
    CHANGELOG_CONF,
    HDFS_PROVIDER,
    PROVIDER_CLASS_CONF,
    ROCKSDB_PROVIDER,
)
from flowc.errorcodes import Code
from flowc.runtime.state_guard import guard_state
from tests.helpers.files import Row, at, source, write_batches
from tests.helpers.spark_run import run_in

BIDS: list[list[Row]] = [
    [{"auction": 1, "price": 10, "ts": at(0)}, {"auction": 2, "price": 7, "ts": at(1)}],
    [{"auction": 1, "price": 12, "ts": at(2)}, {"auction": 3, "price": 5, "ts": at(3)}],
    [{"auction": 2, "price": 9, "ts": at(4)}, {"auction": 1, "price": 3, "ts": at(5)}],
]
COLUMNS = "auction BIGINT, price BIGINT, ts TIMESTAMP"
SINK = (
    "CREATE SINK totals WITH (connector = 'files', path = 'out/totals', format = 'parquet', "
    "mode = 'update', key = 'auction');\n"
)
QUERY = (
    "INSERT INTO totals FROM bids |> KEY BY auction "
    "|> AGGREGATE count(*) AS n, sum(price) AS total;\n"
)


def program(settings: str = "") -> str:
    return settings + "SET max_parallelism = 16;\n" + source("bids", COLUMNS) + SINK + QUERY


def plan(settings: str = "", extra: str = "") -> flowc.CompiledJob:
    """The job's plans; flowc.compile raises on any error, Spark's rules included."""
    return flowc.compile(program(settings) + extra, "job.flow", for_spark=True)


# ---------------------------------------------------------------- the plan


def test_the_default_is_hashmap_and_the_plan_says_why() -> None:
    store = plan().spark_plan.state_store
    assert (store.backend, store.provider_class, store.changelog) == (
        "hashmap",
        HDFS_PROVIDER,
        None,
    )
    assert "measured" in store.reason and "BENCHMARKS.md" in store.reason
    text = "\n".join(plan().spark_plan.to_text())
    assert f"state store: hashmap ({HDFS_PROVIDER}): " in text


def test_rocksdb_takes_changelog_checkpointing_unless_told_otherwise() -> None:
    on = plan("SET state.backend.type = 'rocksdb';\n").spark_plan.state_store
    assert (on.backend, on.provider_class, on.changelog) == ("rocksdb", ROCKSDB_PROVIDER, True)
    assert on.conf == ((PROVIDER_CLASS_CONF, ROCKSDB_PROVIDER), (CHANGELOG_CONF, "true"))
    off = plan(
        "SET state.backend.type = 'rocksdb';\nSET state.backend.changelog.enabled = false;\n"
    ).spark_plan.state_store
    assert off.changelog is False and "state.backend.changelog.enabled" in off.reason
    assert (CHANGELOG_CONF, "false") in off.conf


def test_spark_settings_choose_the_store_as_written() -> None:
    store = plan(
        f"SET {PROVIDER_CLASS_CONF} = '{ROCKSDB_PROVIDER}';\nSET {CHANGELOG_CONF} = false;\n"
    ).spark_plan.state_store
    assert (store.backend, store.changelog) == ("rocksdb", False)
    assert f"set with SET {PROVIDER_CLASS_CONF}" in store.reason
    custom = plan(f"SET {PROVIDER_CLASS_CONF} = 'com.example.Store';\n").spark_plan.state_store
    assert (custom.backend, custom.provider_class, custom.changelog) == (
        "custom",
        "com.example.Store",
        None,
    )


def test_no_state_means_no_store() -> None:
    stateless = flowc.compile(
        source("bids", COLUMNS)
        + "CREATE SINK o WITH (connector = 'files', path = 'o', format = 'json');\n"
        "INSERT INTO o FROM bids |> WHERE price > 3;\n",
        "job.flow",
    )
    assert stateless.spark_plan.state_store.provider_class is None
    assert stateless.spark_plan.state_store.conf == ()
    batch = flowc.compile(
        "SET execution.mode = 'batch';\n"
        + source("bids", COLUMNS).replace(", max_files_per_trigger = 1", "")
        + "CREATE SINK o WITH (connector = 'files', path = 'o', format = 'json');\n"
        "INSERT INTO o FROM bids |> KEY BY auction |> AGGREGATE count(*) AS n;\n",
        "job.flow",
    )
    assert batch.spark_plan.state_store.backend == "none"
    assert "batch" in batch.spark_plan.state_store.reason


def test_the_generated_program_sets_the_planned_store() -> None:
    from flowc.spark.codegen import generate_pyspark

    text = generate_pyspark(plan("SET state.backend.type = 'rocksdb';\n"))
    assert f"spark.conf.set({PROVIDER_CLASS_CONF!r}, {ROCKSDB_PROVIDER!r})" in text
    assert f"spark.conf.set({CHANGELOG_CONF!r}, 'true')" in text
    assert json.dumps(plan().spark_plan.to_json()["state_store"]) == json.dumps(
        {
            "backend": "hashmap",
            "provider_class": HDFS_PROVIDER,
            "changelog": None,
            "reason": plan().spark_plan.state_store.reason,
        }
    )


# ---------------------------------------------------------------- on Spark


def expected_totals(batches: list[list[Row]]) -> dict[int, tuple[int, int]]:
    totals: dict[int, tuple[int, int]] = {}
    for rows in batches:
        for row in rows:
            n, total = totals.get(row["auction"], (0, 0))
            totals[row["auction"]] = (n + 1, total + row["price"])
    return totals


def current_table(spark: Any, folder: Path) -> dict[int, tuple[int, int]]:
    pointer = json.loads((folder / "_current").read_text(encoding="utf-8"))
    rows = spark.read.parquet(str(folder / pointer["version"])).collect()
    return {row["auction"]: (row["n"], row["total"]) for row in rows}


def frozen_conf(folder: Path) -> dict[str, str]:
    offsets = folder / "checkpoints" / "job" / "totals" / "offsets"
    latest = max(int(p.name) for p in offsets.iterdir() if p.name.isdigit())
    lines = (offsets / str(latest)).read_text(encoding="utf-8").splitlines()
    conf: dict[str, str] = json.loads(lines[1])["conf"]
    return conf


@pytest.mark.parametrize(
    ("settings", "provider", "changelog"),
    [
        ("", HDFS_PROVIDER, None),
        ("SET state.backend.type = 'rocksdb';\n", ROCKSDB_PROVIDER, "true"),
        (
            "SET state.backend.type = 'rocksdb';\nSET state.backend.changelog.enabled = false;\n",
            ROCKSDB_PROVIDER,
            "false",
        ),
    ],
    ids=["hashmap", "rocksdb-changelog", "rocksdb-snapshots"],
)
def test_each_store_runs_the_planned_store_with_the_right_totals(
    spark: Any, tmp_path: Path, settings: str, provider: str, changelog: str | None
) -> None:
    write_batches(tmp_path / "bids", BIDS)
    job = flowc.compile(program(settings), str(tmp_path / "job.flow"), for_spark=True)
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    assert current_table(spark, tmp_path / "out" / "totals") == expected_totals(BIDS)
    conf = frozen_conf(tmp_path)
    assert conf[PROVIDER_CLASS_CONF] == provider  # planned == executed
    # RocksDB's files say how it checkpoints: a changelog writes N.changelog per batch,
    # snapshots write N.zip.
    state = tmp_path / "checkpoints" / "job" / "totals" / "state"
    kinds = {p.suffix for p in state.rglob("*") if p.suffix in (".changelog", ".zip")}
    assert kinds == {"true": {".changelog"}, "false": {".zip"}, None: set()}[changelog]
    # A restart with more input goes on from the state in the same store.
    more = [[{"auction": 3, "price": 40, "ts": at(9)}]]
    write_batches(tmp_path / "later", more)
    later = tmp_path / "later" / "part-000.json"
    target = tmp_path / "bids" / "part-099.json"
    later.rename(target)
    os.utime(target, (1_700_001_000, 1_700_001_000))
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert current_table(spark, tmp_path / "out" / "totals") == expected_totals(BIDS + more)


def test_a_store_the_checkpoint_froze_is_kept_and_the_run_says_so(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "bids", BIDS[:2])
    first = flowc.compile(program(), str(tmp_path / "job.flow"), for_spark=True)
    assert [q.error for q in run_in(first, tmp_path).queries] == [None]
    moved = flowc.compile(
        program("SET state.backend.type = 'rocksdb';\n"), str(tmp_path / "job.flow"), for_spark=True
    )
    out = io.StringIO()
    guard = guard_state(moved, str(tmp_path / "checkpoints"), str(tmp_path), out=out)
    (warning,) = [w for w in guard.warnings if w.code == Code.E0824]
    assert warning.span.line == 5  # the INSERT of the query
    assert f"froze {HDFS_PROVIDER}" in warning.message
    assert "--reset-state totals" in (warning.help or "")
    assert "E0824" in out.getvalue()
    # What the warning says is what Spark does: the state stays in the frozen store, and
    # the totals go on from it.
    write_batches(tmp_path / "more", [BIDS[2]])
    target = tmp_path / "bids" / "part-099.json"
    (tmp_path / "more" / "part-000.json").rename(target)
    os.utime(target, (1_700_001_000, 1_700_001_000))
    assert [q.error for q in run_in(moved, tmp_path).queries] == [None]
    assert frozen_conf(tmp_path)[PROVIDER_CLASS_CONF] == HDFS_PROVIDER
    assert current_table(spark, tmp_path / "out" / "totals") == expected_totals(BIDS)
    # Started over, the query runs in the store it asks for.
    report = run_in_reset(moved, tmp_path)
    assert [q.error for q in report.queries] == [None]
    assert frozen_conf(tmp_path)[PROVIDER_CLASS_CONF] == ROCKSDB_PROVIDER


def run_in_reset(job: flowc.CompiledJob, folder: Path) -> Any:
    from flowc.runtime.run import run_job

    return run_job(
        job,
        available_now=True,
        checkpoint_dir=str(folder / "checkpoints"),
        base_dir=str(folder),
        reset_state=["totals"],
        out=io.StringIO(),
    )
