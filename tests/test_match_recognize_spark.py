"""MATCH_RECOGNIZE on Spark (docs/language.md#match_recognize): three clauses of the
subset run as flowc's processor over four micro-batches, each its own run on the same
checkpoints, and give the rows of the plain-Python port of Flink's CEP rules
(tests/helpers/match_recognize.py, equal to PyFlink 2.3 on the documented queries) fed
the same rows: each key's rows in time order as the watermark passes them, rows at or
behind the watermark when they come dropped as late."""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.runtime.run import run_job
from flowc.spark.codegen import generate_pyspark
from tests.helpers.files import read_json_dir
from tests.helpers.match_recognize import (
    Context,
    Emitted,
    Variable,
    find_matches,
)

START = datetime(2024, 1, 1, 10, 0, 0)
SYMBOLS = ("ACME", "BETA", "GAMMA")
#: The watermark's delay (WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND).
DELAY = 1.0

JOB = """\
SET sql.dialect = 'flink';
CREATE TABLE ticks (symbol STRING, rowtime TIMESTAMP(3), price INT,
  WATERMARK FOR rowtime AS rowtime - INTERVAL '1' SECOND)
  WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json');
CREATE TABLE v_past (symbol STRING, start_t TIMESTAMP(3), bottom INT, n BIGINT,
  avg_b INT, mrt TIMESTAMP(3))
  WITH ('connector' = 'files', 'path' = 'out/v_past', 'format' = 'json');
CREATE TABLE v_next (symbol STRING, a_price INT, total INT, low INT, high INT,
  before_last INT, second INT)
  WITH ('connector' = 'files', 'path' = 'out/v_next', 'format' = 'json');
CREATE TABLE rise (symbol STRING, first_up INT, last_up INT, ups BIGINT, end_t TIMESTAMP(3))
  WITH ('connector' = 'files', 'path' = 'out/rise', 'format' = 'json');
INSERT INTO v_past
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY rowtime
  MEASURES FIRST(A.rowtime) AS start_t, LAST(B.price) AS bottom, COUNT(B.price) AS n,
    AVG(B.price) AS avg_b, MATCH_ROWTIME() AS mrt
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (A B+ C)
  DEFINE B AS price < PREV(price), C AS price > PREV(price)
) AS T;
INSERT INTO v_next
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY rowtime
  MEASURES A.price AS a_price, SUM(B.price) AS total, MIN(B.price) AS low,
    MAX(B.price) AS high, LAST(B.price, 1) AS before_last, FIRST(B.price, 1) AS second
  AFTER MATCH SKIP TO NEXT ROW
  PATTERN (A B{2,4}? C)
  DEFINE A AS price >= 12,
    B AS price < A.price AND NOT (price = PREV(price)) OR price * 2 > 40,
    C AS price - FIRST(B.price) >= 2
);
INSERT INTO rise
SELECT * FROM ticks MATCH_RECOGNIZE (
  PARTITION BY symbol
  ORDER BY rowtime
  MEASURES FIRST(U.price) AS first_up, LAST(U.price) AS last_up, COUNT(U.price) AS ups,
    LAST(E.rowtime) AS end_t
  PATTERN (S U{2,} E)
  DEFINE U AS price > PREV(price), E AS price <= PREV(price) AND MAX(U.price) > 14
);
"""


def _at(seconds: float) -> str:
    return (START + timedelta(seconds=seconds)).isoformat(sep=" ")


def _seconds(value: Any) -> float:
    """A time read back from the JSON sink (ISO, UTC) or given to the port."""
    text = str(value).replace("Z", "").replace("T", " ")
    return (datetime.fromisoformat(text).replace(tzinfo=None) - START).total_seconds()


def _batches(seed: int) -> list[list[dict[str, Any]]]:
    """Four micro-batches of each symbol's random-walk prices, a row a second: each
    batch's rows shuffled (out of order, none late within it); batches 2 and 3 also
    carry rows behind the watermark (late: dropped), one exactly at it."""
    rng = random.Random(seed)
    price = dict.fromkeys(SYMBOLS, 12)
    rows = []
    for second in range(60):
        for symbol in SYMBOLS:
            price[symbol] = max(5, min(22, price[symbol] + rng.randint(-3, 3)))
            rows.append({"symbol": symbol, "rowtime": _at(second), "price": price[symbol]})
    batches = [rows[i * 45 : (i + 1) * 45] for i in range(4)]
    for batch in batches:
        rng.shuffle(batch)
    batches[2].append({"symbol": "ACME", "rowtime": _at(3), "price": 30})
    mark = max(_seconds(r["rowtime"]) for b in batches[:2] for r in b) - DELAY
    batches[2].append({"symbol": "BETA", "rowtime": _at(mark), "price": 30})
    batches[3].append({"symbol": "GAMMA", "rowtime": _at(20.5), "price": 1})
    return batches


def _write(folder: Path, index: int, rows: list[dict[str, Any]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"batch-{index:03d}.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    stamp = time.time() - 3600 + 60 * index
    os.utime(path, (stamp, stamp))


def fed(batches: list[list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """Each symbol's rows in the order the processor feeds them: per micro-batch, a row at
    or behind the watermark when it comes is dropped; the rest wait; then the watermark
    moves on (the largest time so far minus the delay: each run ends with a micro-batch
    without data that moves it) and the waiting rows at or before it go, by time."""
    watermark = float("-inf")
    waiting: dict[str, list[dict[str, Any]]] = {}
    out: dict[str, list[dict[str, Any]]] = {s: [] for s in SYMBOLS}
    for batch in batches:
        for row in batch:
            if _seconds(row["rowtime"]) > watermark:
                waiting.setdefault(row["symbol"], []).append(row)
        watermark = max(watermark, max(_seconds(r["rowtime"]) for r in batch) - DELAY)
        for symbol, rows in waiting.items():
            ready = [r for r in rows if _seconds(r["rowtime"]) <= watermark]
            out[symbol] += sorted(ready, key=lambda r: _seconds(r["rowtime"]))
            waiting[symbol] = [r for r in rows if _seconds(r["rowtime"]) > watermark]
    return out


def _prev(context: Context, offset: int = 1) -> Any:
    return context.prev("price", offset)


def _lt(a: Any, b: Any) -> bool | None:
    return None if a is None or b is None else a < b


def _gt(a: Any, b: Any) -> bool | None:
    return None if a is None or b is None else a > b


def _b_next(c: Context) -> bool | None:
    """price < A.price AND NOT (price = PREV(price)) OR price * 2 > 40, three-valued."""
    price, prev = c.row["price"], _prev(c)
    below = _lt(price, c.last("A", "price"))
    equal = None if prev is None else price == prev
    differs = None if equal is None else not equal
    both = False if False in (below, differs) else None if None in (below, differs) else True
    return True if both is True or price * 2 > 40 else both


def _c_next(c: Context) -> bool | None:
    first = c.first("B", "price")
    return None if first is None else c.row["price"] - first >= 2


def _e_rise(c: Context) -> bool | None:
    prev = _prev(c)
    ups = [r["price"] for r in c.rows_of("U")]
    drop = None if prev is None else c.row["price"] <= prev
    return False if drop is False or not ups else drop and max(ups) > 14


PATTERNS: dict[str, tuple[list[Variable], str]] = {
    "v_past": (
        [
            Variable("A"),
            Variable("B", 1, None, True, lambda c: _lt(c.row["price"], _prev(c))),
            Variable("C", condition=lambda c: _gt(c.row["price"], _prev(c))),
        ],
        "PAST LAST ROW",
    ),
    "v_next": (
        [
            Variable("A", condition=lambda c: c.row["price"] >= 12),
            Variable("B", 2, 4, False, _b_next),
            Variable("C", condition=_c_next),
        ],
        "TO NEXT ROW",
    ),
    "rise": (
        [
            Variable("S"),
            Variable("U", 2, None, True, lambda c: _gt(c.row["price"], _prev(c))),
            Variable("E", condition=_e_rise),
        ],
        "PAST LAST ROW",
    ),
}


def _java_avg(values: list[int]) -> int | None:
    if not values:
        return None
    quotient = abs(sum(values)) // len(values)
    return -quotient if sum(values) < 0 else quotient


def _measures(name: str, symbol: str, emitted: Emitted) -> dict[str, Any]:
    """The sink's row for one match, from the measures' definitions."""
    rows = emitted.rows

    def prices(variable: str) -> list[int]:
        return [r["price"] for r in rows.get(variable, [])]

    if name == "v_past":
        b = prices("B")
        return {
            "symbol": symbol,
            "start_t": _seconds(rows["A"][0]["rowtime"]),
            "bottom": b[-1],
            "n": len(b),
            "avg_b": _java_avg(b),
            "mrt": _seconds(emitted.at["rowtime"]),
        }
    if name == "v_next":
        b = prices("B")
        return {
            "symbol": symbol,
            "a_price": prices("A")[-1],
            "total": sum(b),
            "low": min(b),
            "high": max(b),
            "before_last": b[-2] if len(b) > 1 else None,
            "second": b[1] if len(b) > 1 else None,
        }
    u = prices("U")
    return {
        "symbol": symbol,
        "first_up": u[0],
        "last_up": u[-1],
        "ups": len(u),
        "end_t": _seconds(rows["E"][-1]["rowtime"]),
    }


def _expected(name: str, feed: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    pattern, skip = PATTERNS[name]
    out = []
    for symbol, rows in feed.items():
        out += [_measures(name, symbol, m) for m in find_matches(pattern, rows, skip)]
    return out


def _normal(rows: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


def _read(folder: Path, times: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = read_json_dir(folder)
    return [
        {k: _seconds(v) if k in times and v is not None else v for k, v in r.items()} for r in rows
    ]


def test_the_plan_runs_each_clause_as_a_processor() -> None:
    """Each clause is Flink's Match behind a HASH exchange on its PARTITION BY, and its
    Spark realization a MatchRecognizer processor on the RocksDB store."""
    job = flowc.compile(JOB, "job.flow", for_spark=True)
    matchers = job.spark_plan.pattern_matchers
    assert [m.keys for m in matchers.values()] == [("symbol",)] * 3
    assert job.spark_plan.state_store.backend == "rocksdb"
    names = [n.name for n in job.stream_graph.nodes.values()]
    assert names.count("StreamRecordTimestampInserter") == 3
    assert sum(n.startswith("Match(partitionBy=[symbol]") for n in names) == 3
    program = generate_pyspark(job)
    assert "class MatchRecognizer(" in program and program.count("= match_recognize(") == 3


@pytest.mark.parametrize("seed", [7])
def test_matches_equal_flinks_rule_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path, seed: int
) -> None:
    """Four micro-batches, each its own run on the same checkpoints: the three clauses'
    rows equal the port's over the rows the watermark let through, in time order."""
    batches = _batches(seed)
    flow = tmp_path / "job.flow"
    flow.write_text(JOB, encoding="utf-8")
    for index, batch in enumerate(batches):
        _write(tmp_path / "in", index, batch)
        job = flowc.compile(JOB, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None, None, None], index
    feed = fed(batches)
    times = {"v_past": ("start_t", "mrt"), "v_next": (), "rise": ("end_t",)}
    for name, columns in times.items():
        wanted = _expected(name, feed)
        assert wanted, name  # the data gives each clause matches
        assert _normal(_read(tmp_path / "out" / name, columns)) == _normal(wanted), name


def test_the_data_meets_late_rows_waiting_matches_and_overlaps() -> None:
    """What the run above covers: late rows dropped (one at the watermark exactly), a
    match emitted after a later row (MATCH_ROWTIME() past its last row), overlapping
    matches under SKIP TO NEXT ROW, every symbol matching."""
    batches = _batches(7)
    feed = fed(batches)
    given = sum(len(b) for b in batches)
    assert given - sum(len(v) for v in feed.values()) >= 3
    past = _expected("v_past", feed)
    assert {r["symbol"] for r in past} == set(SYMBOLS)
    pattern, skip = PATTERNS["v_next"]
    overlapping = 0
    for rows in feed.values():
        spans = [
            (
                min(_seconds(r["rowtime"]) for v in m.rows.values() for r in v),
                max(_seconds(r["rowtime"]) for v in m.rows.values() for r in v),
            )
            for m in find_matches(pattern, rows, skip)
        ]
        overlapping += sum(1 for a, b in itertools.pairwise(spans) if b[0] <= a[1])
    assert overlapping > 0


def test_batch_mode_matches_every_row_in_time_order(spark: Any, tmp_path: Path) -> None:
    """Batch mode feeds each key's rows at once, in time order (none is late), and drops
    the partial matches open at the input's end, as Flink's batch Match: the three
    clauses' rows equal the port's over all the rows. The stream's late rows are in the
    input here (rows behind others in the files, not at a time another row of their key
    has: no tie), and a row the stream drops as late is matched."""
    seen: set[tuple[str, str]] = set()
    rows = []
    for row in (r for batch in _batches(7) for r in batch):
        if (row["symbol"], row["rowtime"]) not in seen:
            seen.add((row["symbol"], row["rowtime"]))
            rows.append(row)
    assert any(r["price"] == 1 and r["symbol"] == "GAMMA" for r in rows)  # a late row
    halves = [rows[: len(rows) // 2], rows[len(rows) // 2 :]]
    for index, part in enumerate(halves):
        _write(tmp_path / "in", index, part)
    text = JOB.replace(
        "SET sql.dialect = 'flink';\n",
        "SET sql.dialect = 'flink';\nSET 'execution.runtime-mode' = 'batch';\n",
    )
    flow = tmp_path / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    assert all(not m.streaming for m in job.spark_plan.pattern_matchers.values())
    report = run_job(job, master="local[2]", out=io.StringIO())
    assert [q.error for q in report.queries] == [None, None, None]
    feed = {
        s: sorted((r for r in rows if r["symbol"] == s), key=lambda r: _seconds(r["rowtime"]))
        for s in SYMBOLS
    }
    times = {"v_past": ("start_t", "mrt"), "v_next": (), "rise": ("end_t",)}
    for name, columns in times.items():
        wanted = _expected(name, feed)
        assert wanted, name
        assert _normal(_read(tmp_path / "out" / name, columns)) == _normal(wanted), name
    streamed = _expected("v_past", fed(_batches(7)))
    assert _normal(streamed) != _normal(_expected("v_past", feed))  # the late rows count
