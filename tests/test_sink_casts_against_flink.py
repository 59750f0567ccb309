"""Which column types a Flink-dialect INSERT casts into its sink's, against real Flink 2.3
(opt-in, as tests/test_against_flink.py: set ``FLOWC_FLINK_PYTHON``): every pair of these
types Flink's planner accepts flowc casts, every pair it refuses is E0296, but for the
pairs flowc refuses on purpose; and Flink's values of the casts into a DECIMAL are the
ones the Spark test (tests/test_flink_insert_on_spark.py) computes in plain Python."""

from __future__ import annotations

import json
import os
import textwrap
from itertools import product
from pathlib import Path

import pytest

from flowc.analyze.views import sink_cast
from tests.helpers.flink_worker import run_flink

FLINK_PYTHON = os.environ.get("FLOWC_FLINK_PYTHON") or None

pytestmark = pytest.mark.skipif(
    FLINK_PYTHON is None and os.environ.get("FLOWC_FLINK_REQUIRED") != "1",
    reason="set FLOWC_FLINK_PYTHON to a Python with apache-flink==2.3.0",
)

TYPES = (
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL(10, 2)",
    "DECIMAL(24, 3)",
    "STRING",
    "BOOLEAN",
    "DATE",
)
#: Pairs Flink casts by itself that flowc refuses (E0296): a FLOAT into a DECIMAL and a
#: number into a FLOAT are left to an explicit CAST.
REFUSED_ON_PURPOSE = {("FLOAT", "DECIMAL(10, 2)"), ("FLOAT", "DECIMAL(24, 3)")} | {
    (written, "FLOAT")
    for written in ("TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL(10, 2)", "DECIMAL(24, 3)")
}

SCRIPT = """
import glob, json, os, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
t.get_config().set("parallelism.default", "1")
pairs, values = json.loads(sys.argv[1]), json.loads(sys.argv[2])
accepted = []
for i, (written, declared) in enumerate(pairs):
    t.execute_sql(f"CREATE TABLE s{i} (c {declared}) WITH ('connector' = 'blackhole')")
    try:
        t.explain_sql(f"INSERT INTO s{i} SELECT CAST(NULL AS {written})")
        accepted.append(True)
    except Exception as error:
        assert "Incompatible types for sink column" in str(error), str(error)[:2000]
        accepted.append(False)
got = []
for i, (value, declared) in enumerate(values):  # the sink's own cast, into a json file
    path = f"{sys.argv[3]}/v{i}"
    t.execute_sql(
        f"CREATE TABLE v{i} (c {declared}) WITH ('connector' = 'filesystem', "
        f"'path' = '{path}', 'format' = 'json')"
    )
    t.execute_sql(f"INSERT INTO v{i} SELECT c FROM (VALUES ({value})) AS x(c)").wait()
    lines = [
        line
        for f in sorted(glob.glob(path + "/**/*", recursive=True))
        if os.path.isfile(f) and not os.path.basename(f).startswith(".")
        for line in open(f).read().splitlines()
    ]
    got.append(json.loads(lines[0], parse_float=str)["c"])
print(json.dumps({"accepted": accepted, "values": got}))
"""

#: A value of the written type, the sink's type, and the value flowc's Spark test expects
#: (rounded half up; NULL where it does not fit).
VALUES = [
    ("CAST(1.005 AS DECIMAL(24, 3))", "DECIMAL(10, 2)", "1.01"),
    ("CAST(-7.655 AS DECIMAL(24, 3))", "DECIMAL(10, 2)", "-7.66"),
    ("CAST(7.645 AS DECIMAL(24, 3))", "DECIMAL(10, 2)", "7.65"),
    ("CAST(123456789012.345 AS DECIMAL(24, 3))", "DECIMAL(10, 2)", None),
]


def test_sink_casts_are_flinks(tmp_path: Path) -> None:
    pairs = [(w, d) for w, d in product(TYPES, TYPES) if w != d]
    assert FLINK_PYTHON is not None
    run = run_flink(
        FLINK_PYTHON,
        textwrap.dedent(SCRIPT),
        json.dumps(pairs),
        json.dumps([[v, d] for v, d, _ in VALUES]),
        str(tmp_path),
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    answer = json.loads(run.stdout.strip().splitlines()[-1])
    flink = {pair: ok for pair, ok in zip(pairs, answer["accepted"], strict=True)}
    ours = {pair: sink_cast(*pair) is not None for pair in pairs}
    differing = {pair for pair in pairs if flink[pair] != ours[pair]}
    assert differing == REFUSED_ON_PURPOSE
    assert all(flink[pair] for pair in REFUSED_ON_PURPOSE)
    assert answer["values"] == [expected for _, _, expected in VALUES]
