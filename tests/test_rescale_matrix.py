"""The rescale matrix (issue 29): each stateful operator kind with event time, rescaled
2 -> 4 -> 1 on real Spark.

A tumbling-window aggregate, a session-window aggregate, a window Top-1 per key, an
interval join and an inner JOIN without a time bound run three times on the RocksDB
store, at parallelism 2, then 4, then 1, with new input files (later modification times)
before each run: ``flowc run`` repartitions the state before the second and third runs,
and after every run the sink holds exactly what Flink's semantics give over all the
input so far, computed here in plain Python (a window or a session once the watermark
passed its end, every matching pair of a join). The input is drawn so that a result of
each rescaled run combines rows read before the rescale with rows read after it: a key's
state in the wrong partition loses or splits it. No row is behind the watermark
(checked), so neither engine drops one.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowc.runtime.rescale import COMPACT_INTERVAL_CONF, KEPT, MARKER
from tests.helpers.files import T0, read_json_dir
from tests.helpers.rescale import offsets_partitions, run_flow

Row = dict[str, Any]
Result = Counter[tuple[Any, ...]]
DELAY = timedelta(seconds=10)
MINUTE = timedelta(minutes=1)
#: Even seconds in the input and an odd gap: no two rows are exactly one gap apart, where
#: merging touching sessions is a matter of ``<`` against ``<=``.
GAP = timedelta(seconds=25)
BOUND = timedelta(seconds=30)
KEYS = ("a", "b", "c", "d")
#: The parallelism of each run; each reads one new file per source.
PARALLELISM = (2, 4, 1)
#: A run's rows lie in [SPAN * run, SPAN * run + 46 s]: windows of a minute and sessions
#: cross runs, and every row is ahead of the watermark of the runs before.
SPAN = 50
MTIME = 1_800_000_000
#: The files sink's compaction interval in the session (see :func:`compacting`).
COMPACT_EVERY = 3


def _source(name: str) -> str:
    return (
        f"CREATE SOURCE {name} (k STRING, v BIGINT, ts TIMESTAMP,\n"
        f"  WATERMARK FOR ts AS ts - INTERVAL {DELAY.seconds} SECONDS)\n"
        f"  WITH (connector = 'files', path = '{name}', format = 'json', "
        "max_files_per_trigger = 1);\n"
    )


HEAD = (
    "SET parallelism = {p};\n"
    "SET max_parallelism = 16;\n"
    "SET state.backend.type = 'rocksdb';\n"
    "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');\n"
)
STEPS = {
    "window": (
        "INSERT INTO o FROM l |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        "  |> AGGREGATE count(*) AS n, min(v) AS lo, max(v) AS hi;\n"
    ),
    "session": (
        f"INSERT INTO o FROM l |> KEY BY k |> WINDOW SESSION(ts, INTERVAL {GAP.seconds} "
        "SECONDS)\n  |> AGGREGATE count(*) AS n, min(v) AS lo, max(v) AS hi;\n"
    ),
    "window_top": (
        "INSERT INTO o FROM l |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n  |> TOP 1 BY v ASC PER k;\n"
    ),
    "interval_join": (
        "INSERT INTO o FROM l |> JOIN r ON l.k = r.k\n"
        f"  AND r.ts BETWEEN l.ts - INTERVAL {BOUND.seconds} SECONDS "
        f"AND l.ts + INTERVAL {BOUND.seconds} SECONDS\n"
        "  |> SELECT l.k AS k, l.v AS lv, r.v AS rv;\n"
    ),
    "join": (
        "INSERT INTO o FROM l |> JOIN r ON l.k = r.k\n  |> SELECT l.k AS k, l.v AS lv, r.v AS rv;\n"
    ),
}


def _program(kind: str, p: int) -> str:
    sources = "l" if kind in ("window", "session", "window_top") else "lr"
    return HEAD.format(p=p) + "".join(_source(s) for s in sources) + STEPS[kind]


def _time(row: Row) -> datetime:
    return datetime.fromisoformat(row["ts"])


@dataclass
class Input:
    """The rows written so far, per source."""

    left: list[Row]
    right: list[Row]

    def watermark(self) -> datetime:
        """Both engines' watermark after reading all of it: the latest time less the
        delay, the smaller of the two sources' (Flink's and Spark's default)."""
        sides = [rows for rows in (self.left, self.right) if rows]
        return min(max(_time(row) for row in rows) for rows in sides) - DELAY


def _draw(rng: random.Random, run: int, first: int, count: int) -> list[Row]:
    """``count`` rows of the run's file, out of order; v names the run (v // 1000). Key
    "a" is at the file's first and last time (0 s and 46 s, a gap longer than a session's),
    so its window, session or pair bridges each boundary between runs; the other keys
    are drawn at random between them."""
    times = [("a", 0), ("a", 46)]
    times += [(rng.choice(KEYS[1:]), s) for s in rng.sample(range(2, 46, 2), count - 2)]
    rng.shuffle(times)
    start = T0 + timedelta(seconds=SPAN * run)
    return [
        {"k": k, "v": 1000 * run + first + i, "ts": (start + timedelta(seconds=s)).isoformat()}
        for i, (k, s) in enumerate(times)
    ]


def _write(folder: Path, kind: str, run: int, seen: Input) -> None:
    """The run's file of each source, modified after every file before it."""
    rng = random.Random(f"{kind}-{run}")
    for name, rows, first, count in (("l", seen.left, 0, 8), ("r", seen.right, 500, 6)):
        if name == "r" and kind in ("window", "session", "window_top"):
            continue
        drawn = _draw(rng, run, first, count)
        if rows:  # no row behind the watermark: neither engine drops one
            assert min(_time(row) for row in drawn) > seen.watermark()
        rows += drawn
        path = folder / name / f"run{run}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(row) + "\n" for row in drawn), encoding="utf-8")
        os.utime(path, (MTIME + 100 * run,) * 2)


def _epoch_floor(ts: datetime, size: timedelta) -> datetime:
    epoch = datetime(1970, 1, 1)
    return epoch + size * ((ts - epoch) // size)


def _windows(seen: Input) -> Result:
    """Flink's tumbling windows per key: each emitted once the watermark reaches its end."""
    groups: dict[tuple[str, datetime], list[int]] = {}
    for row in seen.left:
        groups.setdefault((row["k"], _epoch_floor(_time(row), MINUTE)), []).append(row["v"])
    watermark = seen.watermark()
    return Counter(
        (k, start, start + MINUTE, len(vs), min(vs), max(vs))
        for (k, start), vs in groups.items()
        if start + MINUTE <= watermark
    )


def _window_tops(seen: Input) -> Result:
    """Flink's window Top-1 per key, the least v first: each window's row emitted once the
    watermark reaches the window's end (v is unique: no ties)."""
    first: dict[tuple[str, datetime], Row] = {}
    for row in seen.left:
        group = (row["k"], _epoch_floor(_time(row), MINUTE))
        if group not in first or row["v"] < first[group]["v"]:
            first[group] = row
    watermark = seen.watermark()
    return Counter(
        (k, row["v"], _time(row), start, start + MINUTE)
        for (k, start), row in first.items()
        if start + MINUTE <= watermark
    )


def _sessions(seen: Input) -> Result:
    """Flink's session windows per key: each row's window [ts, ts + gap), windows that
    intersect merged; a session emitted once the watermark reaches its end."""
    watermark = seen.watermark()
    out: Result = Counter()
    for key in KEYS:
        rows = sorted((r for r in seen.left if r["k"] == key), key=_time)
        sessions: list[tuple[datetime, datetime, list[int]]] = []
        for row in rows:
            ts = _time(row)
            if sessions and ts <= sessions[-1][1]:
                start, end, vs = sessions[-1]
                sessions[-1] = (start, max(end, ts + GAP), [*vs, row["v"]])
            else:
                sessions.append((ts, ts + GAP, [row["v"]]))
        for start, end, vs in sessions:
            if end <= watermark:
                out[(key, start, end, len(vs), min(vs), max(vs))] += 1
    return out


def _pairs(seen: Input, bounded: bool) -> Result:
    """An inner join's rows: every pair of equal keys (within the bound, if any), each
    emitted when its second row arrives."""
    return Counter(
        (a["k"], a["v"], b["v"])
        for a in seen.left
        for b in seen.right
        if a["k"] == b["k"] and (not bounded or abs(_time(b) - _time(a)) <= BOUND)
    )


@dataclass(frozen=True)
class Kind:
    expected: Callable[[Input], Result]
    columns: tuple[str, ...]
    #: The columns holding input rows' v (each names its run).
    sources: tuple[str, ...]
    #: A Top-N's result is one input row: it needs the state from before the rescale
    #: when that row was read before it (the least v of a window two runs share).
    kept_row: bool = False


KINDS = {
    "window": Kind(_windows, ("k", "window_start", "window_end", "n", "lo", "hi"), ("lo", "hi")),
    "session": Kind(_sessions, ("k", "window_start", "window_end", "n", "lo", "hi"), ("lo", "hi")),
    "window_top": Kind(
        _window_tops, ("k", "v", "ts", "window_start", "window_end"), ("v",), kept_row=True
    ),
    "interval_join": Kind(lambda seen: _pairs(seen, True), ("k", "lv", "rv"), ("lv", "rv")),
    "join": Kind(lambda seen: _pairs(seen, False), ("k", "lv", "rv"), ("lv", "rv")),
}


def _value(value: Any) -> Any:
    """A JSON value of the sink's files: a timestamp as the datetime it is, else itself."""
    if isinstance(value, str) and value[:1].isdigit():
        return datetime.fromisoformat(value).replace(tzinfo=None)
    return value


def _written(spark: Any, folder: Path, kind: Kind) -> Result:
    """The sink's rows, from the files its commit log lists and, once there are any, as
    Spark's own reader reads them (through the log: it fails on a batch missing there)."""
    listed = Counter(
        tuple(_value(row[c]) for c in kind.columns) for row in read_json_dir(folder / "out")
    )
    if listed:
        read = spark.read.json(str(folder / "out")).collect()
        assert Counter(tuple(_value(row[c]) for c in kind.columns) for row in read) == listed
    return listed


def _across(new: Result, kind: Kind, run: int) -> bool:
    """Whether one of the run's new results combines rows of an earlier run with rows of
    this one: it needs the state the rescale moved."""
    index = [kind.columns.index(c) for c in kind.sources]
    if kind.kept_row:
        return any(row[index[0]] // 1000 < run for row in new)
    return any(
        min(row[i] // 1000 for i in index) < run == max(row[i] // 1000 for i in index)
        for row in new
    )


@pytest.fixture
def compacting(spark: Any) -> Iterator[int]:
    """The session's files sinks compact their commit log every 3 batches, which the job
    does not set (spark-defaults.conf could): the entry flowc adds for the repartition's
    batch must follow the session, and batch 2 is a compaction batch."""
    before = spark.conf.get(COMPACT_INTERVAL_CONF, None)
    spark.conf.set(COMPACT_INTERVAL_CONF, str(COMPACT_EVERY))
    yield COMPACT_EVERY
    if before is None:
        spark.conf.unset(COMPACT_INTERVAL_CONF)
    else:
        spark.conf.set(COMPACT_INTERVAL_CONF, before)


@pytest.mark.parametrize("name", list(KINDS))
def test_stateful_kind_rescaled_2_4_1(
    spark: Any, compacting: int, tmp_path: Path, name: str
) -> None:
    kind = KINDS[name]
    checkpoint = tmp_path / ".flowc-checkpoints" / "job" / "o"
    seen = Input([], [])
    before: Result = Counter()
    for run, p in enumerate(PARALLELISM):
        _write(tmp_path, name, run, seen)
        last = offsets_partitions(checkpoint)[0] if run else None
        report, out = run_flow(tmp_path, _program(name, p))
        expected = kind.expected(seen)
        assert _written(spark, tmp_path, kind) == expected
        new = expected - before
        before = expected
        if run == 0:
            assert report.rescaled == [] and "rescale" not in out
            assert offsets_partitions(checkpoint)[1] == p
            continue
        old = PARALLELISM[run - 1]
        assert f"rescale: query 'o': moving its state from {old} to {p} partitions" in out
        assert f"rescale: query 'o': state now in {p} partitions" in out
        (done,) = report.rescaled
        assert (done["partitions_before"], done["partitions_after"]) == (old, p)
        assert last is not None and done["batch"] == last + 1
        latest, partitions = offsets_partitions(checkpoint)
        assert partitions == p and latest > done["batch"]
        assert not Path(str(checkpoint) + KEPT).exists() and not (checkpoint / MARKER).exists()
        if (done["batch"] + 1) % compacting == 0:
            compacted = tmp_path / "out" / "_spark_metadata" / f"{done['batch']}.compact"
            assert compacted.is_file()
        assert _across(new, kind, run), "a result needs the state from before the rescale"
