"""TOP (ROW_NUMBER's ORDER BY) in two directions, as Nexmark q9 orders its bids
(``ORDER BY B.price DESC, B.dateTime ASC``): an exact number or a time ordered against the
first expression's direction is written as whether it is NULL, then its value negated,
so Spark's one ``max_by``/``min_by`` struct order is Flink's (NULL lowest: first in ASC,
last in DESC). Other types stay E0271."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import flowc
from tests.helpers.files import T0, at, read_json_dir, source, write_batches, write_later_batch
from tests.helpers.spark_run import run_in

PROGRAM = """\
SET max_parallelism = 8;
{source}CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM bids |> WINDOW TUMBLE(ts, INTERVAL '1' MINUTE)
  |> TOP 2 BY {order} PER k AS rank;
"""
SOURCE = source(
    "bids", "k STRING, price BIGINT, placed TIMESTAMP, ts TIMESTAMP", watermark="'1' SECOND"
)


def _batches(seed: int) -> list[list[dict[str, Any]]]:
    rng = random.Random(seed)
    batches = []
    for minute in range(3):
        rows = []
        for i in range(12):
            placed = None if rng.random() < 0.2 else at(rng.randint(0, 5000))
            price = None if rng.random() < 0.15 else rng.choice([5, 7, 7, 9, -(2**63)])
            rows.append(
                {"k": rng.choice("ab"), "price": price, "placed": placed, "ts": at(60 * minute + i)}
            )
        batches.append(rows)
    return batches


def _key(value: Any, descending: bool) -> tuple[int, Any]:
    """Flink's order of one BY value (NULL lowest), as a key for an ascending sort."""
    if value is None:
        return (1, 0) if descending else (0, 0)
    rank = _seconds(value) if isinstance(value, str) else value
    return (0, -rank) if descending else (1, rank)


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(stamp) - T0).total_seconds()


def _expected(rows: list[dict[str, Any]], order: list[tuple[str, bool]]) -> Counter[Any]:
    """Each closed minute's first two rows per k, by ``order``; rows tied on every BY
    value are left out of the comparison (their order is the tie-break's)."""
    watermark = max(_seconds(r["ts"]) for r in rows) - 1
    out: Counter[Any] = Counter()
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        minute = int(_seconds(row["ts"]) // 60)
        if (minute + 1) * 60 <= watermark:
            groups.setdefault((row["k"], minute), []).append(row)
    for (_, _), members in groups.items():
        ranked = sorted(members, key=lambda r: [_key(r[c], d) for c, d in order])
        for rank, row in enumerate(ranked[:2], start=1):
            out[(row["k"], row["price"], row["placed"], rank)] += 1
    return out


def _ties(rows: list[dict[str, Any]], order: list[tuple[str, bool]]) -> bool:
    seen = Counter((r["k"], int(_seconds(r["ts"]) // 60), *(r[c] for c, _ in order)) for r in rows)
    return any(n > 1 for n in seen.values())


def _rows(batches: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [row for batch in batches for row in batch]


def _written(folder: Path) -> Counter[Any]:
    return Counter(
        (r["k"], r.get("price"), (r.get("placed") or "")[:19] or None, r["rank"])
        for r in read_json_dir(folder)
    )


@pytest.mark.parametrize(
    "order",
    [[("price", True), ("placed", False)], [("placed", False), ("price", True)]],
    ids=["price DESC, placed ASC", "placed ASC, price DESC"],
)
def test_a_top_in_two_directions_equals_flinks_order(
    spark: Any, tmp_path: Path, order: list[tuple[str, bool]]
) -> None:
    seed = next(s for s in range(100) if not _ties(_rows(_batches(s)), order))
    batches = _batches(seed)
    write_batches(tmp_path / "bids", batches)
    written_order = ", ".join(f"{c} {'DESC' if d else 'ASC'}" for c, d in order)
    job = flowc.compile(
        PROGRAM.format(source=SOURCE, order=written_order), str(tmp_path / "j.flow"), for_spark=True
    )
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    rows = [r for b in batches for r in b]
    expected = _expected(rows, order)
    assert expected
    assert _written(tmp_path / "out") == Counter(
        {(k, p, (t or "")[:19] or None, r): n for (k, p, t, r), n in expected.items()}
    )
    later = [{"k": "a", "price": 1, "placed": None, "ts": at(300)}]
    write_later_batch(tmp_path / "bids", later)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    again = _expected(rows + later, order)
    assert _written(tmp_path / "out") == Counter(
        {(k, p, (t or "")[:19] or None, r): n for (k, p, t, r), n in again.items()}
    )


def test_a_string_against_the_first_direction_is_refused() -> None:
    program = PROGRAM.format(
        source=SOURCE.replace("price BIGINT", "price STRING"), order="placed DESC, price ASC"
    )
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(program, "j.flow")
    (error,) = [d for d in raised.value.diagnostics if d.severity == flowc.Severity.ERROR]
    assert error.code == "E0271"
    assert "STRING" in error.message
