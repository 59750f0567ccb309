"""Flink SQL's windows on Spark (issue 27): TUMBLE, HOP and SESSION group windows, a TUMBLE
window table function with a key, a window Top-N over one and SESSION table functions
partitioned by a key and not, written in the Flink
dialect, give the rows plain Python computes with Flink's semantics: each row in the
windows that contain it (HOP(ts, slide, size): windows of ``size`` starting every
``slide``), a window emitted once, in append mode, when the watermark (the largest event
time seen, less the WATERMARK's delay) reaches its end. Clicks arrive one file per
micro-batch, out of order within the delay, and the job is stopped and started again
from its checkpoint halfway.
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

#: Clicks over nine minutes in six micro-batches; the first run reads three. No two
#: clicks of a 2-minute window have the same v, so the window Top-N's order is one.
CLICKS: list[list[Row]] = [
    [{"item": 1, "v": 3, "ts": at(1)}, {"item": 2, "v": 5, "ts": at(20)}],
    [{"item": 1, "v": 7, "ts": at(58)}, {"item": 1, "v": 1, "ts": at(55)}],
    [{"item": 2, "v": 2, "ts": at(61)}, {"item": 3, "v": 9, "ts": at(125)}],
    [{"item": 3, "v": 4, "ts": at(122)}, {"item": 1, "v": 6, "ts": at(185)}],
    [{"item": 2, "v": 8, "ts": at(250)}, {"item": 2, "v": 1, "ts": at(299)}],
    [{"item": 1, "v": 2, "ts": at(545)}],
]
FIRST_RUN = 3

PROGRAM = (
    "SET sql.dialect = 'flink';\n"
    + source("clicks", "item BIGINT, v BIGINT, ts TIMESTAMP", watermark="5 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "".join(
        f"CREATE SINK {name} WITH (connector = 'files', path = 'out/{name}', format = 'json');\n"
        for name in (
            *("tumbling", "hopping", "sessions", "tvf", "top", "session_tvf", "session_all"),
            *("cumulative", "cumulative_all", "session_top"),
        )
    )
    + "INSERT INTO tumbling\n"
    "  SELECT item, TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws,\n"
    "         TUMBLE_END(ts, INTERVAL '1' MINUTE) AS we, count(*) AS n, sum(v) AS total\n"
    "  FROM clicks GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), item;\n"
    "INSERT INTO hopping\n"
    "  SELECT HOP_START(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS ws,\n"
    "         HOP_END(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE) AS we, count(*) AS n\n"
    "  FROM clicks GROUP BY HOP(ts, INTERVAL '1' MINUTE, INTERVAL '2' MINUTE);\n"
    "INSERT INTO sessions\n"
    "  SELECT item, SESSION_START(ts, INTERVAL '30' SECOND) AS ws,\n"
    "         SESSION_END(ts, INTERVAL '30' SECOND) AS we, count(*) AS n\n"
    "  FROM clicks GROUP BY item, SESSION(ts, INTERVAL '30' SECOND);\n"
    "INSERT INTO tvf\n"
    "  SELECT window_start, window_end, item, count(*) AS n, max(v) AS top\n"
    "  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '2' MINUTES))\n"
    "  GROUP BY window_start, window_end, item;\n"
    "INSERT INTO top SELECT * FROM (\n"
    "  SELECT item, v, window_start, window_end,\n"
    "    ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY v DESC) AS rn\n"
    "  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '2' MINUTES)))\n"
    "WHERE rn <= 2;\n"
    "INSERT INTO session_tvf\n"
    "  SELECT item, window_start, window_end, count(*) AS n\n"
    "  FROM TABLE(SESSION(TABLE clicks PARTITION BY item, DESCRIPTOR(ts), INTERVAL '30' SECOND))\n"
    "  GROUP BY window_start, window_end, item;\n"
    "INSERT INTO session_all\n"
    "  SELECT window_start, window_end, count(*) AS n\n"
    "  FROM TABLE(SESSION(DATA => TABLE clicks, TIMECOL => DESCRIPTOR(ts),\n"
    "    GAP => INTERVAL '30' SECOND))\n"
    "  GROUP BY window_start, window_end;\n"
    "INSERT INTO cumulative\n"
    "  SELECT window_start, window_end, item, count(*) AS n, sum(v) AS total\n"
    "  FROM TABLE(CUMULATE(TABLE clicks, DESCRIPTOR(ts),\n"
    "    INTERVAL '1' MINUTE, INTERVAL '3' MINUTES))\n"
    "  GROUP BY window_start, window_end, item;\n"
    "INSERT INTO cumulative_all FROM clicks\n"
    "  |> WINDOW CUMULATE(ts, INTERVAL 4 MINUTES, INTERVAL 2 MINUTES)\n"
    "  |> AGGREGATE count(*) AS n, max(v) AS top;\n"
    "INSERT INTO session_top FROM clicks\n"
    "  |> WINDOW SESSION(ts, INTERVAL 30 SECONDS) |> TOP 2 BY v DESC;\n"
)


def _write(folder: Path, batches: list[list[Row]], first: int) -> None:
    """One file per micro-batch, each modified after every file before it."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, rows in enumerate(batches, start=first):
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        stamp = 1_700_000_000 + index * 10
        os.utime(path, (stamp, stamp))


def _windows(ts: datetime, size: timedelta, slide: timedelta) -> list[datetime]:
    """The starts of the windows of ``size`` every ``slide`` (from the epoch) holding ts."""
    epoch = datetime(1970, 1, 1)
    last = epoch + slide * ((ts - epoch) // slide)
    starts = []
    start = last
    while start + size > ts:
        starts.append(start)
        start -= slide
    return sorted(starts)


def _flink(
    batches: list[list[Row]], size: timedelta, slide: timedelta, keyed: bool
) -> dict[tuple[datetime, int | None], list[Row]]:
    """Each window's rows, per key, of the windows the watermark after ``batches`` closed."""
    rows = [r for b in batches for r in b]
    watermark = max(datetime.fromisoformat(r["ts"]) for r in rows) - DELAY
    groups: dict[tuple[datetime, int | None], list[Row]] = defaultdict(list)
    for row in rows:
        for start in _windows(datetime.fromisoformat(row["ts"]), size, slide):
            if start + size <= watermark:
                groups[(start, row["item"] if keyed else None)].append(row)
    return groups


def _tumbling(batches: list[list[Row]]) -> Counter[tuple[Any, ...]]:
    minute = timedelta(minutes=1)
    return Counter(
        (item, start, start + minute, len(rows), sum(r["v"] for r in rows))
        for (start, item), rows in _flink(batches, minute, minute, keyed=True).items()
    )


def _hopping(batches: list[list[Row]]) -> Counter[tuple[Any, ...]]:
    size, slide = timedelta(minutes=2), timedelta(minutes=1)
    return Counter(
        (start, start + size, len(rows))
        for (start, _), rows in _flink(batches, size, slide, keyed=False).items()
    )


def _sessions(batches: list[list[Row]], keyed: bool = True) -> Counter[tuple[Any, ...]]:
    """Flink's session windows per item (of all rows unless ``keyed``): each row's window
    [ts, ts + gap), windows that intersect (touching ones too) merged; a session emitted
    once the watermark reaches its end."""
    gap = timedelta(seconds=30)
    rows = [r for b in batches for r in b]
    watermark = max(datetime.fromisoformat(r["ts"]) for r in rows) - DELAY
    out: Counter[tuple[Any, ...]] = Counter()
    for item in sorted({r["item"] for r in rows}) if keyed else [None]:
        times = sorted(
            datetime.fromisoformat(r["ts"]) for r in rows if not keyed or r["item"] == item
        )
        sessions: list[list[Any]] = []
        for ts in times:
            if sessions and ts <= sessions[-1][1]:
                sessions[-1][1] = max(sessions[-1][1], ts + gap)
                sessions[-1][2] += 1
            else:
                sessions.append([ts, ts + gap, 1])
        for start, end, n in sessions:
            if end <= watermark:
                out[(item, start, end, n) if keyed else (start, end, n)] += 1
    return out


def _cumulate(
    batches: list[list[Row]], size: timedelta, step: timedelta, keyed: bool
) -> dict[tuple[datetime, datetime, int | None], list[Row]]:
    """Flink's CUMULATE: each row in the windows [start, start + k * step), k = 1 ..
    size / step, start its time floored to ``size``, whose end is after it; the windows the
    watermark after ``batches`` closed, per key."""
    rows = [r for b in batches for r in b]
    watermark = max(datetime.fromisoformat(r["ts"]) for r in rows) - DELAY
    epoch = datetime(1970, 1, 1)
    groups: dict[tuple[datetime, datetime, int | None], list[Row]] = defaultdict(list)
    for row in rows:
        ts = datetime.fromisoformat(row["ts"])
        start = epoch + size * ((ts - epoch) // size)
        for k in range(1, size // step + 1):
            end = start + k * step
            if ts < end <= watermark:
                groups[(start, end, row["item"] if keyed else None)].append(row)
    return groups


def _cumulative(batches: list[list[Row]]) -> Counter[tuple[Any, ...]]:
    groups = _cumulate(batches, timedelta(minutes=3), timedelta(minutes=1), keyed=True)
    return Counter(
        (start, end, item, len(rows), sum(r["v"] for r in rows))
        for (start, end, item), rows in groups.items()
    )


def _cumulative_all(batches: list[list[Row]]) -> Counter[tuple[Any, ...]]:
    groups = _cumulate(batches, timedelta(minutes=4), timedelta(minutes=2), keyed=False)
    return Counter(
        (start, end, len(rows), max(r["v"] for r in rows))
        for (start, end, _), rows in groups.items()
    )


def _session_top(batches: list[list[Row]]) -> Counter[tuple[Any, ...]]:
    """The two rows of largest v of each closed session over all rows (no key)."""
    gap = timedelta(seconds=30)
    rows = sorted((r for b in batches for r in b), key=lambda r: r["ts"])
    watermark = max(datetime.fromisoformat(r["ts"]) for r in rows) - DELAY
    sessions: list[tuple[datetime, datetime, list[Row]]] = []
    for row in rows:
        ts = datetime.fromisoformat(row["ts"])
        if sessions and ts <= sessions[-1][1]:
            start, end, members = sessions[-1]
            sessions[-1] = (start, max(end, ts + gap), [*members, row])
        else:
            sessions.append((ts, ts + gap, [row]))
    out: Counter[tuple[Any, ...]] = Counter()
    for start, end, members in sessions:
        if end <= watermark:
            for row in sorted(members, key=lambda r: r["v"], reverse=True)[:2]:
                ts = datetime.fromisoformat(row["ts"])
                out[(row["item"], row["v"], ts, start, end)] += 1
    return out


def _tvf(batches: list[list[Row]]) -> Counter[tuple[Any, ...]]:
    size = timedelta(minutes=2)
    return Counter(
        (start, start + size, item, len(rows), max(r["v"] for r in rows))
        for (start, item), rows in _flink(batches, size, size, keyed=True).items()
    )


#: The columns of each sink, in order.
COLUMNS = {
    "tumbling": ("item", "ws", "we", "n", "total"),
    "hopping": ("ws", "we", "n"),
    "sessions": ("item", "ws", "we", "n"),
    "tvf": ("window_start", "window_end", "item", "n", "top"),
    "top": ("item", "v", "window_start", "window_end", "rn"),
    "session_tvf": ("item", "window_start", "window_end", "n"),
    "session_all": ("window_start", "window_end", "n"),
    "cumulative": ("window_start", "window_end", "item", "n", "total"),
    "cumulative_all": ("window_start", "window_end", "n", "top"),
    "session_top": ("item", "v", "ts", "window_start", "window_end"),
}


def _value(value: Any) -> Any:
    """A JSON value of the sink's files: a timestamp as the datetime it is, else itself."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=None)
    return value


def _top(batches: list[list[Row]]) -> Counter[tuple[Any, ...]]:
    """Flink's window Top-N: the two rows of largest v of each closed window, ranked."""
    size = timedelta(minutes=2)
    out: Counter[tuple[Any, ...]] = Counter()
    for (start, _), rows in _flink(batches, size, size, keyed=False).items():
        ranked = sorted(rows, key=lambda r: r["v"], reverse=True)[:2]
        for rank, row in enumerate(ranked, start=1):
            out[(row["item"], row["v"], start, start + size, rank)] += 1
    return out


def _rows(folder: Path, name: str) -> Counter[tuple[Any, ...]]:
    return Counter(
        tuple(_value(row[c]) for c in COLUMNS[name]) for row in read_json_dir(folder / name)
    )


def test_flink_windows_on_spark(spark: Any, tmp_path: Path) -> None:
    """Each sink's rows after the first run are the windows its watermark closed, and after
    the restart every window closed by then, each once (a Counter: no duplicates)."""
    job = compiled(tmp_path, PROGRAM)
    assert spark_codes(job) == set()
    expected = {
        "tumbling": _tumbling,
        "hopping": _hopping,
        "sessions": _sessions,
        "tvf": _tvf,
        "top": _top,
        "session_tvf": _sessions,
        "session_all": lambda batches: _sessions(batches, keyed=False),
        "cumulative": _cumulative,
        "cumulative_all": _cumulative_all,
        "session_top": _session_top,
    }
    out = tmp_path / "out"
    _write(tmp_path / "clicks", CLICKS[:FIRST_RUN], 0)
    run_generated(spark, tmp_path, job)
    for name, flink in expected.items():
        assert _rows(out, name) == flink(CLICKS[:FIRST_RUN]), name
        assert _rows(out, name), name  # the first run closes windows of each kind
    _write(tmp_path / "clicks", CLICKS[FIRST_RUN:], FIRST_RUN)
    run_generated(spark, tmp_path, job)  # restarted from its checkpoint
    for name, flink in expected.items():
        assert _rows(out, name) == flink(CLICKS), name
