"""What the rescale tests share: a ``flowc run --available-now`` of a program in its
folder, in this process, and the shuffle partitions a checkpoint's offsets froze."""

from __future__ import annotations

import io
import json
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
