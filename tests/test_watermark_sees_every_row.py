"""A WHERE after a source's WATERMARK does not hold the watermark back: in Flink the
watermark is generated where the rows are read, from every row, and a filter after it
drops rows, not watermark progress. Spark's optimizer pushes a filter that does not read
the event-time column below ``withWatermark`` (PushPredicateThroughNonJoin's
EventTimeWatermark case), so the rows it drops would no longer advance the watermark:
late rows Flink drops would be counted, and windows would close later. The generated
program keeps each filter where the plan has it."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import flowc
from tests.helpers.files import at, read_json_dir, source, write_batches
from tests.helpers.spark_run import run_in

PROGRAM = (
    "SET max_parallelism = 8;\n"
    + source("events", "kind INT, ts TIMESTAMP", watermark="'4' SECOND")
    + "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');\n"
    + "INSERT INTO o FROM events |> WHERE kind = 2 |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS)\n"
    + "  |> AGGREGATE count(*) AS n;\n"
)

#: Micro-batch 1 reads a kind-2 row at 1 s and a kind-0 row at 100 s: the watermark is
#: 96 s afterwards. Spark judges a micro-batch's rows against the watermark that was in
#: effect in the batch before it ("When a late row is dropped", docs/language.md), so
#: the kind-2 row at 50 s of micro-batch 3 is behind 96 s: late, and dropped, as in
#: Flink. A watermark of kind-2 rows only (-3 s, then 99 s) would count it, and would
#: never close [100 s, 110 s).
BATCHES = [
    [{"kind": 2, "ts": at(1)}, {"kind": 0, "ts": at(100)}],
    [{"kind": 0, "ts": at(101)}],
    [{"kind": 2, "ts": at(50)}, {"kind": 2, "ts": at(103)}],
    [{"kind": 0, "ts": at(130)}],
]


def test_rows_a_where_drops_still_advance_the_watermark(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "events", BATCHES)
    job = flowc.compile(PROGRAM, str(tmp_path / "job.flow"), for_spark=True)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    written = Counter((r["window_start"][:19], r["n"]) for r in read_json_dir(tmp_path / "out"))
    # Flink's: [0, 10) holds the row at 1 s; the row at 50 s is late; [100, 110) closes
    # once the kind-0 row at 130 s moves the watermark to 126 s.
    assert written == Counter({(at(0)[:19], 1): 1, (at(100)[:19], 1): 1})
