"""A flowc run whose first micro-batch loses its shuffle output, in a process of its own.

Run as ``python tests/helpers/rerun_job.py FOLDER``: it needs Spark master ``local[2,4]`` (tasks
may fail and retry), which the tests' shared session does not have. The job reads two
files, one per micro-batch, through a REBALANCE; a Python function after the shuffle, on
its first call, deletes every shuffle file under the block manager's folder and fails its
task. The retry cannot fetch the lost map output (FetchFailed), so Spark resubmits the map
stage, and the scan's tasks run again in batch 0. It prints one JSON object: the rows in
each input file, the run's report, the run's output and the rows the sink holds.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import flowc
from flowc.runtime.run import run_job

WIPER = '''
import glob
import os

LOCAL = {local!r}
MARK = {mark!r}


def wipe(v):
    """The first call deletes every shuffle file and fails its task; later calls pass."""
    if os.path.exists(MARK):
        return v
    open(MARK, "w").close()
    for path in glob.glob(os.path.join(LOCAL, "**", "shuffle_*"), recursive=True):
        os.remove(path)
    raise RuntimeError("shuffle files deleted")
'''

#: Rows per input file: batch 0 reads the first, batch 1 the second.
ROWS = (20, 7)


def main(base: Path) -> None:
    local = base / "local"
    local.mkdir(parents=True)
    (base / "wiper.py").write_text(
        WIPER.format(local=str(local), mark=str(base / "wiped")), encoding="utf-8"
    )
    inputs = base / "in"
    inputs.mkdir()
    start = 0
    for index, count in enumerate(ROWS):
        path = inputs / f"part-{index}.json"
        rows = [{"k": i % 3, "v": i} for i in range(start, start + count)]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        stamp = 1_700_000_000 + index * 10
        os.utime(path, (stamp, stamp))
        start += count
    program = (
        "SET parallelism = 2;\n"
        f"SET spark.local.dir = '{local}';\n"
        "CREATE FUNCTION wipe(v BIGINT) RETURNS BIGINT LANGUAGE python AS 'wiper:wipe';\n"
        "CREATE SOURCE events (k BIGINT, v BIGINT) WITH (connector = 'files', path = 'in',\n"
        "  format = 'json', max_files_per_trigger = 1);\n"
        "CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');\n"
        "INSERT INTO out FROM events |> REBALANCE |> EXTEND wipe(v) AS w;\n"
    )
    flow = base / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow))
    out = io.StringIO()
    report = run_job(
        job,
        available_now=True,
        checkpoint_dir=str(base / "checkpoints"),
        base_dir=str(base),
        master="local[2,4]",
        out=out,
    )
    from pyspark.sql import SparkSession

    spark = SparkSession.getActiveSession()
    assert spark is not None
    written = sorted(r["v"] for r in spark.read.json(str(base / "out")).collect())
    result = {
        "rows": list(ROWS),
        "report": report.to_json(),
        "output": out.getvalue(),
        "written": written,
        "deleted": (base / "wiped").exists(),
    }
    print("RESULT " + json.dumps(result))
    spark.stop()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
