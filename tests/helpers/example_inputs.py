"""Input for an example, generated from its sources' schemas."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import flowc


def value_for(type_text: str, row: int, rng: random.Random) -> Any:
    if type_text in ("BIGINT", "INT", "SMALLINT", "TINYINT"):
        return rng.randint(0, 20)
    if type_text in ("DOUBLE", "FLOAT") or type_text.startswith("DECIMAL"):
        return round(rng.uniform(0, 20000), 2)
    if type_text == "TIMESTAMP":
        return (datetime(2026, 1, 1) + timedelta(seconds=7 * row)).isoformat()
    if type_text == "BOOLEAN":
        return rng.random() < 0.5
    if type_text.startswith("STRUCT<"):
        from sqlglot import exp

        from flowc.sql.sqltypes import data_type, normalize_type

        fields = [e for e in data_type(type_text).expressions if isinstance(e, exp.ColumnDef)]
        return {
            f.name: value_for(normalize_type(f.args["kind"].sql("spark")), row, rng) for f in fields
        }
    return rng.choice(["alpha", "beta", "gamma", None]) if row % 7 else None


def generate_inputs(job: flowc.CompiledJob, folder: Path) -> None:
    rng = random.Random(7)
    for source in job.program.sources:
        options = dict(source.options)
        if source.connector != "files":
            continue
        target = folder / str(options["path"])
        target.mkdir(parents=True, exist_ok=True)
        if options["format"] == "text":
            lines = [" ".join(rng.choice(["a", "b", "c", "to", "be"]) for _ in range(5))]
            (target / "part.txt").write_text("\n".join(lines * 10) + "\n", encoding="utf-8")
            continue
        rows = [{c.name: value_for(c.type, i, rng) for c in source.schema} for i in range(40)]
        (target / "part.json").write_text(
            "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
        )
