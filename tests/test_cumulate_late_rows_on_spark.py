"""CUMULATE windows and late rows on Spark: a row that arrives after the watermark has
passed the end of some of its cumulating windows is left out of those (already emitted)
and counted in the later ones of the same period, which have not fired yet, as Flink's
slicing window operator does; each window is emitted once, across micro-batches and a
restart. Written both as Flink's table function and as flowc's pipe step, whose rows must
be the same. The watermark a micro-batch drops late rows by is the one the batches before
it reached (the largest event time, less the delay).
"""

from __future__ import annotations

import json
import os
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.helpers.files import Row, at, read_json_dir, source
from tests.helpers.spark_run import compiled, run_generated, spark_codes

DELAY = timedelta(seconds=5)
SIZE, STEP = timedelta(minutes=4), timedelta(minutes=1)

#: The fourth batch's 0:50 click of item 1 is late for the windows ending 1:00 and 2:00
#: and in time for those ending 3:00 and 4:00, judged by the watermark of the second
#: batch (2:05, Spark's, which judges a micro-batch's rows by the watermark of the batch
#: before it: docs/language.md, "When a late row is dropped") as by the third's (2:55,
#: Flink's): no row is late by less than a micro-batch, so the two agree.
BATCHES: list[list[Row]] = [
    [{"item": 1, "v": 3, "ts": at(10)}, {"item": 2, "v": 4, "ts": at(40)}],
    [{"item": 1, "v": 5, "ts": at(90)}, {"item": 1, "v": 2, "ts": at(130)}],
    [{"item": 2, "v": 1, "ts": at(180)}],
    [{"item": 1, "v": 7, "ts": at(50)}],
    [{"item": 1, "v": 6, "ts": at(270)}, {"item": 2, "v": 8, "ts": at(260)}],
    [{"item": 1, "v": 9, "ts": at(540)}],
]
FIRST_RUN = 4

PROGRAM = (
    "SET sql.dialect = 'flink';\n"
    + source("clicks", "item BIGINT, v BIGINT, ts TIMESTAMP", watermark="5 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "".join(
        f"CREATE SINK {name} WITH (connector = 'files', path = 'out/{name}', format = 'json');\n"
        for name in ("tvf", "pipe")
    )
    + "INSERT INTO tvf\n"
    "  SELECT window_start, window_end, item, count(*) AS n, sum(v) AS total\n"
    "  FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(ts),\n"
    "    INTERVAL '1' MINUTE, INTERVAL '4' MINUTES))\n"
    "  GROUP BY window_start, window_end, item;\n"
    "INSERT INTO pipe FROM clicks |> KEY BY item\n"
    "  |> WINDOW CUMULATE(ts, INTERVAL 4 MINUTES, INTERVAL 1 MINUTE)\n"
    "  |> AGGREGATE count(*) AS n, sum(v) AS total\n"
    "  |> SELECT window_start, window_end, item, n, total;\n"
)
COLUMNS = ("window_start", "window_end", "item", "n", "total")


def _write(folder: Path, batches: list[list[Row]], first: int) -> None:
    """One file per micro-batch, each modified after every file before it."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, rows in enumerate(batches, start=first):
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        stamp = 1_700_000_000 + index * 10
        os.utime(path, (stamp, stamp))


def _flink(batches: list[list[Row]]) -> Counter[tuple[Any, ...]]:
    """Flink's CUMULATE, batch by batch: a row joins each window [start, start + k * STEP)
    holding it whose end the watermark before its batch has not reached; the windows
    the last watermark reached are emitted."""
    epoch = datetime(1970, 1, 1)
    groups: dict[tuple[datetime, datetime, int], list[Row]] = defaultdict(list)
    watermark = datetime.min
    for batch in batches:
        for row in batch:
            ts = datetime.fromisoformat(row["ts"])
            start = epoch + SIZE * ((ts - epoch) // SIZE)
            for k in range(1, SIZE // STEP + 1):
                end = start + k * STEP
                if ts < end and end > watermark:
                    groups[(start, end, row["item"])].append(row)
        latest = max(datetime.fromisoformat(r["ts"]) for r in batch) - DELAY
        watermark = max(watermark, latest)
    return Counter(
        (start, end, item, len(rows), sum(r["v"] for r in rows))
        for (start, end, item), rows in groups.items()
        if end <= watermark
    )


def _rows(folder: Path) -> Counter[tuple[Any, ...]]:
    def value(v: Any) -> Any:
        return datetime.fromisoformat(v).replace(tzinfo=None) if isinstance(v, str) else v

    return Counter(tuple(value(row[c]) for c in COLUMNS) for row in read_json_dir(folder))


def test_the_model_counts_the_late_row_only_in_windows_not_yet_fired() -> None:
    """The late 0:50 click (v 7) is in [0:00, 3:00) and [0:00, 4:00), not in [0:00, 2:00);
    the windows of [4:00, 8:00) come after the restart."""
    rows = {(r[1].minute, r[2]): r[3:] for r in _flink(BATCHES)}
    assert rows[(2, 1)] == (2, 8)
    assert rows[(3, 1)] == rows[(4, 1)] == (4, 17)
    assert rows[(5, 1)] == (1, 6)


def test_cumulate_late_rows_on_spark(spark: Any, tmp_path: Path) -> None:
    job = compiled(tmp_path, PROGRAM)
    assert spark_codes(job) == set()
    out = tmp_path / "out"
    _write(tmp_path / "clicks", BATCHES[:FIRST_RUN], 0)
    run_generated(spark, tmp_path, job)
    for name in ("tvf", "pipe"):
        assert _rows(out / name) == _flink(BATCHES[:FIRST_RUN]), name
    _write(tmp_path / "clicks", BATCHES[FIRST_RUN:], FIRST_RUN)
    run_generated(spark, tmp_path, job)  # restarted from its checkpoint
    for name in ("tvf", "pipe"):
        assert _rows(out / name) == _flink(BATCHES), name
