"""The rest of the rescale matrix (issue 29, item 4): the stateful kinds not rescaled in
tests/test_rescale.py, tests/test_rescale_matrix.py and tests/test_rescale_processors.py,
on real Spark with real checkpoints.

Five queries over three sources, in three jobs (:data:`JOBS`), each job run three times,
at parallelism 2, then 4, then 1, on the RocksDB store, with a new file per source (a
later modification time) before each run, so ``flowc run`` repartitions every query's
state before the second and third runs:

- ``tops``: an unwindowed TOP per key (``KEY BY auction |> TOP 2 BY price DESC AS rn``),
  Spark's ``max_by`` aggregation (``stateStoreSave``), into an upsert sink;
- ``firsts``: Flink's keep-first row by event time (``TOP 1 BY ts ASC PER seller``), the
  ``RowtimeFirstRow`` processor: a candidate per group, an event-time timer, a done flag;
- ``marked``: a CURRENT_WATERMARK filter (the late-data recipe), the ``WatermarkReader``
  processor, which keeps nothing: the watermark it reads is the one the repartition
  batch's commit carries (``nextBatchWatermarkMs``);
- ``sellers``: a TOP over an AGGREGATE's updates (Flink SQL's Top-N over a GROUP BY), two
  ``ChangelogOperator`` processors (the producer AGGREGATE, the consuming TOP);
- ``winners``: a JOIN of a TOP's updates (a producer ``ChangelogOperator``) with a CDC
  source, the ``ChangelogJoin`` holding both sides.

After every run each sink (the final upsert table, or the append sink's rows) equals
plain Python computing Flink's semantics over all the input so far, and the input is
drawn so that each rescaled run's result differs from what the queries would give with
the state from before the rescale lost (asserted: a fresh operator over the run's input,
its rows upserted onto the table before, or appended to the rows before): a TOP keeping
a row of an earlier run, an aggregate summing across runs and its TOP deleting a seller
pushed out, a keep-first row ignoring a done group and emitting a waiting candidate by
its timer, late rows dropped by the watermark of the run before, a join matching a
person or a top bid read before the rescale.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flowc.runtime.rescale import KEPT
from tests.helpers.files import read_json_dir, upsert_table
from tests.helpers.minute_events import at, minutes
from tests.helpers.rescale import offsets_partitions, run_flow

HEAD = """\
SET parallelism = {p};
SET max_parallelism = 16;
SET state.backend.type = 'rocksdb';
"""
SOURCES = {
    "bids": """CREATE SOURCE bids (auction BIGINT, seller BIGINT, bidder BIGINT, price BIGINT,
  ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE)
  WITH (connector = 'files', path = 'bids', format = 'json');
""",
    "marks": """CREATE SOURCE marks (id BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE)
  WITH (connector = 'files', path = 'marks', format = 'json');
""",
    "people": """CREATE SOURCE people (id BIGINT, name STRING)
  WITH (connector = 'files', path = 'people', format = 'debezium-json');
""",
}
#: Per query: the sources it reads, and its statements.
QUERY_TEXT = {
    "tops": (
        ("bids",),
        """CREATE SINK tops WITH (connector = 'files', path = 'out/tops', format = 'json',
  mode = 'update', key = 'auction, rn');
INSERT INTO tops FROM bids |> KEY BY auction |> TOP 2 BY price DESC AS rn;
""",
    ),
    "firsts": (
        ("bids",),
        """CREATE SINK firsts WITH (connector = 'files', path = 'out/firsts', format = 'json');
INSERT INTO firsts FROM bids |> TOP 1 BY ts ASC PER seller;
""",
    ),
    "marked": (
        ("marks",),
        """CREATE SINK marked WITH (connector = 'files', path = 'out/marked', format = 'json');
INSERT INTO marked FROM marks
  |> WHERE CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts);
""",
    ),
    "sellers": (
        ("bids",),
        """CREATE SINK sellers WITH (connector = 'files', path = 'out/sellers', format = 'json',
  mode = 'update', key = 'auction, seller');
INSERT INTO sellers FROM bids |> KEY BY auction, seller |> AGGREGATE sum(price) AS total
  |> KEY BY auction |> TOP 2 BY total DESC PER auction;
""",
    ),
    "winners": (
        ("bids", "people"),
        """CREATE SINK winners WITH (connector = 'files', path = 'out/winners', format = 'json',
  mode = 'update', key = 'auction, bidder');
CREATE VIEW best AS FROM bids |> TOP 1 BY price DESC PER auction;
INSERT INTO winners FROM best |> JOIN people ON best.bidder = people.id
  |> SELECT auction, bidder, price, name;
""",
    ),
}
#: The jobs: queries that share runs, two processors at most per job (Spark gives the
#: Python worker it starts per processor and micro-batch to plan it 10 s to connect
#: back, which a loaded machine can miss when many start at once).
JOBS = {
    "top_first_row_watermark": ("tops", "firsts", "marked"),
    "top_over_aggregate": ("sellers",),
    "top_join_cdc": ("winners",),
}


def _program(queries: tuple[str, ...], p: int) -> str:
    sources = {s for q in queries for s in QUERY_TEXT[q][0]}
    return (
        HEAD.format(p=p)
        + "".join(text for name, text in SOURCES.items() if name in sources)
        + "".join(QUERY_TEXT[q][1] for q in queries)
    )


PARALLELISM = (2, 4, 1)
DELAY = 1  # the watermarks' delay, minutes
MTIME = 1_800_000_000

Bid = tuple[int, int, int, int, float]  # auction, seller, bidder, price, minute
#: Per run. Every bid is ahead of the watermark the runs before left (their largest time
#: less a minute: 4, then 14), so no query drops one. Prices are distinct per auction and
#: sellers' totals per auction, so no TOP meets a tie.
BIDS: list[list[Bid]] = [
    [(1, 1, 10, 50, 0), (1, 2, 11, 30, 1), (1, 3, 12, 20, 4.5),
     (2, 4, 13, 40, 2), (2, 5, 10, 35, 4.8), (2, 1, 11, 10, 5)],
    # seller 1 is done (its row at 0 written), seller 3 waits with 4.5, seller 5 waits with
    # 4.8 and has no row here (its timer); auction 1's 45 ranks below run 0's 50.
    [(1, 3, 12, 45, 9), (2, 1, 11, 38, 6), (3, 6, 11, 60, 14.5), (3, 7, 12, 55, 14.8),
     (3, 4, 13, 25, 15)],
    # sellers 6 and 7 wait from run 1 (7 without a row here); auction 2's top changes
    # hands (bidder 13 to 10), seller 2's total adds run 0's 30.
    [(1, 2, 14, 48, 16), (2, 3, 10, 42, 18), (3, 6, 12, 57, 20), (4, 8, 10, 70, 25)],
]  # fmt: skip
#: CURRENT_WATERMARK's input per run: (id, minute); the rows at or behind the watermark
#: of the runs before (4, then 14) are late.
MARKS: list[list[tuple[int, float]]] = [
    [(0, 0), (1, 2), (2, 5)],
    [(3, 3), (4, 4), (5, 4.5), (6, 15)],
    [(7, 10), (8, 14), (9, 20)],
]
Person = tuple[int, str]
#: Debezium envelopes (op, before, after) per run.
PEOPLE: list[list[tuple[str, Person | None, Person | None]]] = [
    [("c", None, (10, "ann")), ("c", None, (11, "bob"))],
    [("c", None, (13, "cid")), ("u", (10, "ann"), (10, "amy"))],
    [("d", (11, "bob"), None)],
]

Table = dict[tuple[Any, ...], tuple[Any, ...]]


def _write(folder: Path, run: int) -> None:
    """The run's file of each source, modified after every file before it."""
    bids = [
        {"auction": a, "seller": s, "bidder": b, "price": p, "ts": at(m)}
        for a, s, b, p, m in BIDS[run]
    ]
    marks = [{"id": i, "ts": at(m)} for i, m in MARKS[run]]

    def person(values: Person | None) -> dict[str, Any] | None:
        return None if values is None else {"id": values[0], "name": values[1]}

    people = [
        {"before": person(b), "after": person(a), "op": op, "source": {}, "ts_ms": run}
        for op, b, a in PEOPLE[run]
    ]
    for name, rows in (("bids", bids), ("marks", marks), ("people", people)):
        path = folder / name / f"run{run}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        os.utime(path, (MTIME + 100 * run,) * 2)


# ------------------------------------------------ Flink's semantics, in plain Python


def _tops(runs: list[list[Bid]]) -> Table:
    """Rank(rankEnd=2) per auction with its row number: the final (auction, rn) rows."""
    table: Table = {}
    for auction in {b[0] for run in runs for b in run}:
        prices = sorted((b[3] for run in runs for b in run if b[0] == auction), reverse=True)
        for rank, price in enumerate(prices[:2], 1):
            table[(auction, rank)] = (price,)
    return table


def _sellers(runs: list[list[Bid]]) -> Table:
    """Rank(rankEnd=2) per auction over sum(price) GROUP BY auction, seller, without the
    row number: the final (auction, seller) rows."""
    totals: dict[tuple[int, int], int] = {}
    for run in runs:
        for auction, seller, _, price, _ in run:
            totals[(auction, seller)] = totals.get((auction, seller), 0) + price
    table: Table = {}
    for auction in {a for a, _ in totals}:
        ranked = sorted(((t, s) for (a, s), t in totals.items() if a == auction), reverse=True)
        for total, seller in ranked[:2]:
            table[(auction, seller)] = (total,)
    return table


def _winners(runs: list[list[Bid]], people: list[list[Any]]) -> Table:
    """Each auction's highest bid (Rank(rankEnd=1)) joined with the people as the CDC
    changes leave them: the final (auction, bidder) rows."""
    names: dict[int, str] = {}
    for changes in people:
        for _, before, after in changes:
            if before is not None:
                names.pop(before[0], None)
            if after is not None:
                names[after[0]] = after[1]
    best: dict[int, Bid] = {}
    for run in runs:
        for bid in run:
            if bid[0] not in best or bid[3] > best[bid[0]][3]:
                best[bid[0]] = bid
    return {
        (a, bidder): (price, names[bidder])
        for a, (_, _, bidder, price, _) in best.items()
        if bidder in names
    }


def _firsts(runs: list[list[Bid]], latest: float | None = None) -> set[tuple[int, float, int]]:
    """Flink's keep-first row by event time per seller (its RowTimeDeduplicateKeepFirstRow
    function), a run being a micro-batch of data, then one without that moves the watermark
    to the largest time so far less the delay (``latest``: the largest time before the
    first run): a row behind the watermark is late; a group's candidate is replaced only
    by an earlier time and written once the watermark reaches it, after which the group
    takes nothing. The written rows as (seller, minute, price)."""
    candidate: dict[int, tuple[float, int]] = {}
    done: set[int] = set()
    out: set[tuple[int, float, int]] = set()
    for run in runs:
        mark = None if latest is None else latest - DELAY
        for _, seller, _, price, time in run:
            if seller in done or (mark is not None and time < mark):
                continue
            if seller not in candidate or time < candidate[seller][0]:
                candidate[seller] = (time, price)
        latest = max([b[4] for b in run] + ([] if latest is None else [latest]))
        for seller, (time, price) in list(candidate.items()):
            if time <= latest - DELAY:
                out.add((seller, time, price))
                done.add(seller)
                del candidate[seller]
    return out


def _marked(runs: list[list[tuple[int, float]]]) -> set[int]:
    """CURRENT_WATERMARK IS NULL OR ts > CURRENT_WATERMARK: the ids of the rows on time,
    a run's watermark being the largest time of the runs before less the delay."""
    kept: set[int] = set()
    latest: float | None = None
    for run in runs:
        kept |= {i for i, time in run if latest is None or time > latest - DELAY}
        latest = max([t for _, t in run] + ([] if latest is None else [latest]))
    return kept


# ------------------------------------------------------------------- the sinks


def _table(folder: Path, keys: tuple[str, ...], values: tuple[str, ...]) -> Table:
    rows = upsert_table(folder)
    table = {tuple(r[k] for k in keys): tuple(r[v] for v in values) for r in rows}
    assert len(table) == len(rows), rows
    return table


def _written(folder: Path, queries: tuple[str, ...]) -> dict[str, Any]:
    out = folder / "out"
    read: dict[str, Callable[[], Any]] = {
        "tops": lambda: _table(out / "tops", ("auction", "rn"), ("price",)),
        "firsts": lambda: sorted(
            (r["seller"], minutes(r["ts"]), r["price"]) for r in read_json_dir(out / "firsts")
        ),
        "marked": lambda: sorted(r["id"] for r in read_json_dir(out / "marked")),
        "sellers": lambda: _table(out / "sellers", ("auction", "seller"), ("total",)),
        "winners": lambda: _table(out / "winners", ("auction", "bidder"), ("price", "name")),
    }
    return {q: read[q]() for q in queries}


def _expected(run: int) -> dict[str, Any]:
    bids, people, marks = BIDS[: run + 1], PEOPLE[: run + 1], MARKS[: run + 1]
    return {
        "tops": _tops(bids),
        "firsts": sorted(_firsts(bids)),
        "marked": sorted(_marked(marks)),
        "sellers": _sellers(bids),
        "winners": _winners(bids, people),
    }


def _state_lost(run: int) -> dict[str, Any]:
    """What each sink would hold after ``run`` had its query started with no state (the
    watermark, which the checkpoint's offsets carry, gone too for the WatermarkReader): a
    fresh operator's result over the run's input, upserted onto the table the run before
    left or appended to its rows."""
    before = _expected(run - 1)
    bids, people, marks = BIDS[run : run + 1], PEOPLE[run : run + 1], MARKS[run : run + 1]
    latest = max(bid[4] for bids_before in BIDS[:run] for bid in bids_before)
    return {
        "tops": {**before["tops"], **_tops(bids)},
        "firsts": sorted(set(before["firsts"]) | _firsts(bids, latest)),
        "marked": sorted(set(before["marked"]) | _marked(marks)),
        "sellers": {**before["sellers"], **_sellers(bids)},
        "winners": {**before["winners"], **_winners(bids, people)},
    }


def test_each_rescaled_run_needs_the_state_from_before_it() -> None:
    """The input makes lost state visible: after each rescale every sink's expected
    result differs from what a fresh operator over that run's input would leave. And it
    keeps out what the test does not mean to judge: a bid behind the watermark, a tie."""
    for run in (1, 2):
        before = max(bid[4] for bids in BIDS[:run] for bid in bids)
        assert min(bid[4] for bid in BIDS[run]) > before - DELAY
    bids = [bid for run in BIDS for bid in run]
    assert len({(a, p) for a, _, _, p, _ in bids}) == len(bids)
    for run in range(3):
        totals: dict[tuple[int, int], int] = {}
        for auction, seller, _, price, _ in (bid for bids in BIDS[: run + 1] for bid in bids):
            totals[(auction, seller)] = totals.get((auction, seller), 0) + price
        assert len({(a, t) for (a, _), t in totals.items()}) == len(totals), run
    for run in (1, 2):
        expected, lost = _expected(run), _state_lost(run)
        assert [q for q in QUERY_TEXT if expected[q] == lost[q]] == [], run


@pytest.mark.parametrize("job", list(JOBS))
def test_the_other_kinds_rescaled_2_4_1_across_three_runs(
    spark: Any, tmp_path: Path, job: str
) -> None:
    queries = JOBS[job]
    checkpoints = tmp_path / ".flowc-checkpoints" / "job"
    for run, p in enumerate(PARALLELISM):
        _write(tmp_path, run)
        last = {q: offsets_partitions(checkpoints / q)[0] for q in queries} if run else {}
        report, out = run_flow(tmp_path, _program(queries, p))
        expected = _expected(run)
        assert _written(tmp_path, queries) == {q: expected[q] for q in queries}, run
        if run == 0:
            assert report.rescaled == [] and "rescale" not in out
        else:
            done = {r["query"]: r for r in report.rescaled}
            assert set(done) == set(queries), out
            for query in queries:
                moved = (done[query]["partitions_before"], done[query]["partitions_after"])
                assert moved == (PARALLELISM[run - 1], p), query
                assert done[query]["batch"] == last[query] + 1, query
        for query in queries:
            assert offsets_partitions(checkpoints / query)[1] == p, query
    assert not [c for c in checkpoints.iterdir() if c.name.endswith(KEPT)]
