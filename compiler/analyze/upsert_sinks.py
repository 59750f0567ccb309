"""Upsert sinks: a postgres table or a files table that keeps one row per key.

Spark's update mode writes, per micro-batch, the result rows that changed; an upsert sink
turns them into the current result: a row per key, the last one written. Both run as
``foreachBatch`` in the generated program (:mod:`flowc.spark.generated_runtime`), idempotent
per micro-batch: the batch id a query last wrote is kept beside the rows, in the same
transaction (postgres) or the same atomic switch (files), so a batch replayed after a
crash writes nothing twice. docs/language.md#upsert-sinks is the user's account.
"""

from __future__ import annotations

import re

from flowc.catalog import partition_columns
from flowc.program import SinkDef

__all__ = ["postgres_type", "upsert_key"]

_POSTGRES_SCALARS = {
    "BOOLEAN": "boolean",
    "TINYINT": "smallint",
    "SMALLINT": "smallint",
    "INT": "integer",
    "BIGINT": "bigint",
    "FLOAT": "real",
    "DOUBLE": "double precision",
    "STRING": "text",
    "BINARY": "bytea",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_NTZ": "timestamp",
}


def postgres_type(spark_type: str) -> str | None:
    """The column type a postgres sink creates for a Spark type; None for a type it
    cannot store (ARRAY, MAP, STRUCT, intervals)."""
    if spark_type in _POSTGRES_SCALARS:
        return _POSTGRES_SCALARS[spark_type]
    match = re.fullmatch(r"DECIMAL\((\d+), (\d+)\)", spark_type)
    if match is not None:
        return f"numeric({match.group(1)}, {match.group(2)})"
    return None


def upsert_key(sink: SinkDef) -> tuple[str, ...]:
    """The columns that identify a row of an upsert sink."""
    text = dict(sink.options).get("key")
    return partition_columns(str(text)) if text is not None else ()
