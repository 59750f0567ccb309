"""Debezium envelopes for the Spark tests of a CDC source (one JSON-lines file per
micro-batch, increasing modification times) and what they leave, computed in plain Python
as Flink 2.3's debezium-json format reads them (c/r: +I of ``after``; u: -U of ``before``,
+U of ``after``; d: -D of ``before``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

Row = dict[str, Any]
#: (op, before, after), as a Debezium envelope holds them.
Envelope = tuple[str, Row | None, Row | None]


def customer(i: int, country: str, score: int) -> Row:
    return {"id": i, "country": country, "score": score}


def write_envelopes(folder: Path, index: int, envelopes: list[Envelope]) -> None:
    """Micro-batch ``index``'s file, modified after those of the batches before it."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-{index:03d}.json"
    lines = [
        json.dumps({"before": b, "after": a, "op": op, "source": {"table": "c"}, "ts_ms": index})
        for op, b, a in envelopes
    ]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    stamp = 1_700_000_000 + index * 10
    os.utime(path, (stamp, stamp))


def current_rows(batches: list[list[Envelope]]) -> dict[int, Row]:
    """The source's rows the envelopes leave, by ``id`` (each update and delete names the
    row it changes: its ``before`` is the row held)."""
    rows: dict[int, Row] = {}
    for batch in batches:
        for op, before, after in batch:
            if before is not None:
                assert op in ("u", "d") and rows.pop(before["id"]) == before
            if after is not None:
                rows[after["id"]] = after
    return rows


def per_country(rows: dict[int, Row]) -> dict[str, tuple[int, int, int]]:
    """count, sum and max of the scores per country of the rows with a positive id."""
    scores: dict[str, list[int]] = {}
    for row in rows.values():
        if row["id"] > 0:
            scores.setdefault(row["country"], []).append(row["score"])
    return {c: (len(s), sum(s), max(s)) for c, s in scores.items()}


def top_n(rows: dict[int, Row], n: int) -> dict[tuple[str, int], Row]:
    """Flink's Top-N of the rows with a positive id: per country the ``n`` best scores,
    by (country, rank); ties ordered by the greater id first (flowc's rule)."""
    countries: dict[str, list[Row]] = {}
    for row in rows.values():
        if row["id"] > 0:
            countries.setdefault(row["country"], []).append(row)
    ranked = {}
    for country, members in countries.items():
        members.sort(key=lambda r: (r["score"], r["id"]), reverse=True)
        ranked.update({(country, i + 1): row for i, row in enumerate(members[:n])})
    return ranked
