"""Input rows of a micro-batch whose Spark stage re-ran (issue 25, item 6).

numInputRows is the source scans' SQL metric; when Spark loses shuffle output and
resubmits a map stage, the scan's tasks run again and their rows are added again. flowc
labels such batches (live line, --report's ``rerun_batches``, the final summary).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pyspark.status import SparkJobInfo, SparkStageInfo

from flowc.runtime.run import (
    RERUN_NOTE,
    ProgressDisplay,
    StageReruns,
    _rerun_batches,
    run_job,
)
from tests.helpers.files import source, write_batches
from tests.helpers.progress import PROGRESS, FakeQuery
from tests.helpers.spark_run import compiled

HERE = Path(__file__).parent


def test_a_batch_that_lost_its_shuffle_output_is_labelled(tmp_path: Path) -> None:
    """A real stage re-run on Spark (local[2,4], shuffle files deleted mid-batch, in a
    process of its own): Spark's numInputRows for batch 0 is twice the rows of its file,
    and flowc labels that batch, and only that one, everywhere it shows the count."""
    pytest.importorskip("pyspark")
    done = subprocess.run(
        [sys.executable, str(HERE / "helpers" / "rerun_job.py"), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=400,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[0].removeprefix("RESULT "))
    first, second = result["rows"]
    assert result["deleted"]  # the shuffle files were deleted: Spark had to re-run
    # the sink still holds every input row exactly once (Spark's exactly-once file sink)
    assert result["written"] == list(range(first + second))
    (query,) = result["report"]["queries"]
    assert query["error"] is None
    # the over-count is real: batch 0's numInputRows is more than its file's rows
    output: str = result["output"]
    batch0 = next(line for line in output.splitlines() if "] batch 0:" in line)
    counted = int(batch0.split(": ")[1].split(" rows in")[0])
    assert counted > first, output
    assert query["input_rows"] > first + second
    # and flowc says so, for batch 0 only
    assert query["rerun_batches"] == [0]
    assert f"rows in ({RERUN_NOTE})" in batch0
    batch1 = next(line for line in output.splitlines() if "] batch 1:" in line)
    assert batch1.startswith(f"[out] batch 1: {second} rows in, "), output
    assert f"[out] input_rows {query['input_rows']} may count some rows twice" in output
    assert "batch 0 after losing shuffle output" in output


def test_an_ordinary_run_is_not_labelled(spark: Any, tmp_path: Path) -> None:
    """No stage re-ran: rerun_batches is empty and nothing is labelled; the count is the
    rows of the input."""
    batches = [[{"k": i % 3, "v": i} for i in range(n)] for n in (5, 3, 4)]
    write_batches(tmp_path / "ev", batches)
    job = compiled(
        tmp_path,
        source("ev", "k BIGINT, v BIGINT")
        + "CREATE SINK rerun_plain WITH (connector = 'memory');\n"
        + "INSERT INTO rerun_plain FROM ev |> REBALANCE |> SELECT k, v;\n",
    )
    out = io.StringIO()
    report = run_job(
        job,
        available_now=True,
        checkpoint_dir=str(tmp_path / "cp"),
        base_dir=str(tmp_path),
        out=out,
    )
    (query,) = report.queries
    assert query.error is None, query.error
    assert query.batches == 3
    assert query.input_rows == sum(len(b) for b in batches)
    assert query.rerun_batches == []
    assert query.to_json()["rerun_batches"] == []
    assert "twice" not in out.getvalue() and "re-ran" not in out.getvalue()


def test_display_labels_the_batches_it_is_told_re_ran() -> None:
    """The plain line and the live table carry the label for a re-run batch only."""
    query = FakeQuery("q", {**PROGRESS, "batchId": 0}, {**PROGRESS, "batchId": 1})
    out = io.StringIO()
    display = ProgressDisplay(out, lambda q: {1})
    display.update([query])
    display.close()
    first, second = out.getvalue().splitlines()
    assert first.startswith("[q] batch 0: 40 rows in, 6 written")
    assert second.startswith(f"[q] batch 1: 40 rows in ({RERUN_NOTE}), 6 written")

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    live = ProgressDisplay(shown, lambda q: {1})
    live.update([query])
    live.close()
    # the input rate (numInputRows over the batch's time) is marked, and the mark explained
    assert "12.5*" in shown.getvalue() and "re-ran a stage" in shown.getvalue()


class _Option:
    """A Scala Option as py4j hands it over."""

    def __init__(self, value: str | None) -> None:
        self.value = value

    def isDefined(self) -> bool:
        return self.value is not None

    def get(self) -> str:
        assert self.value is not None
        return self.value


class _Job:
    def __init__(self, batch: str) -> None:
        self.text = f"out\nid = q\nrunId = r\nbatch = {batch}"

    def description(self) -> _Option:
        return _Option(self.text)


class _Spark:
    """Spark's status tracker and status store over a fixed set of jobs: job id to
    (batch, status, stage ids); stage id to its latest attempt."""

    def __init__(
        self, jobs: dict[int, tuple[str, str, list[int]]], attempts: dict[int, int]
    ) -> None:
        self.jobs = jobs
        self.attempts = attempts

    def getJobIdsForGroup(self, group: str) -> list[int]:
        return list(self.jobs) if group == "r" else []

    def getJobInfo(self, job: int) -> SparkJobInfo:
        _, status, stages = self.jobs[job]
        return SparkJobInfo(job, stages, status)

    def getStageInfo(self, stage: int) -> SparkStageInfo | None:
        if stage not in self.attempts:
            return None  # no longer retained
        return SparkStageInfo(stage, self.attempts[stage], "", 1, 0, 1, 0)

    def job(self, job: int) -> _Job:
        return _Job(self.jobs[job][0])


class _Query:
    runId = "r"


def test_reruns_are_read_per_batch_from_finished_jobs() -> None:
    """A batch is labelled when one of its finished jobs has a stage attempt above 0; a
    running job is looked at again once it finished; an unknown description makes the
    answer unknown (None), never silently 'no re-run'."""
    status = _Spark(
        {
            0: ("0", "SUCCEEDED", [0]),
            1: ("0", "SUCCEEDED", [1, 2]),
            2: ("1", "SUCCEEDED", [3, 4]),
            3: ("2", "RUNNING", [5, 6]),
        },
        {0: 0, 1: 1, 2: 1, 3: 0, 4: 0, 5: 1},
    )
    reruns = StageReruns(status, status)
    assert reruns.batches(_Query()) == {0}
    status.jobs[3] = ("2", "SUCCEEDED", [5, 6])
    assert reruns.batches(_Query()) == {0, 2}
    progress = [{"batchId": b} for b in (0, 1, 2)]
    assert _rerun_batches(reruns, _Query(), progress) == [0, 2]
    assert _rerun_batches(reruns, _Query(), progress[1:]) == [2]  # batches reported only
    status.jobs[4] = ("init", "SUCCEEDED", [7])
    status.attempts[7] = 1
    assert _rerun_batches(reruns, _Query(), progress) is None
    assert _rerun_batches(None, _Query(), progress) is None  # --remote: not asked
