"""What the rescale tests share: a ``flowc run --available-now`` of a program in its
folder, in this process, the shuffle partitions a checkpoint's offsets froze, and a
``flowc`` process killed while Spark repartitions a copy of the checkpoint."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import flowc
from flowc.runtime.run import RunReport, run_job


def run_flow(folder: Path, text: str) -> tuple[RunReport, str]:
    """``flowc run --available-now`` of ``text`` as ``folder/job.flow`` (checkpoints under
    ``folder/.flowc-checkpoints``) on ``local[2]``: its report and its output; a query's
    error fails the test."""
    flow = folder / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    out = io.StringIO()
    report = run_job(job, available_now=True, master="local[2]", out=out)
    for query in report.queries:
        assert query.error is None, query.error
    return report, out.getvalue()


def offsets_partitions(checkpoint: Path) -> tuple[int, int]:
    """The latest batch and the shuffle partitions its offsets froze."""
    latest = max(int(n.name) for n in (checkpoint / "offsets").iterdir() if n.name.isdigit())
    conf = json.loads((checkpoint / "offsets" / str(latest)).read_text().splitlines()[1])
    return latest, int(conf["conf"]["spark.sql.shuffle.partitions"])


def kill_during_repartition(folder: Path, arguments: list[str], staging: Path, batch: int) -> None:
    """``flowc ARGUMENTS`` in ``folder``, killed (-9, its whole process group) once Spark
    has written the repartition's ``offsets/<batch>`` in the copy ``staging``, and checked
    to have died before Spark's commit of that batch."""
    process = subprocess.Popen(
        [sys.executable, "-m", "flowc", *arguments],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    try:
        while not (staging / "offsets" / str(batch)).exists():
            assert process.poll() is None, "flowc ended before the repartition began"
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert not (staging / "commits" / str(batch)).exists(), "the kill came after Spark's commit"
