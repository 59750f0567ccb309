"""Where a DeduplicateWithin micro-batch's time goes in the Python worker, per row.

Spark's Python worker (pyspark/worker.py, PySpark 4.3) turns each Arrow batch into rows
itself; this runs the same conversions outside Spark on one 200,000-row batch (1,000 keys
in 128 key groups), so each part is timed alone: the row form's input (a pyarrow scalar
``as_py`` per cell, one Row per row), DeduplicateWithin's own work, the row form's output
(``asDict`` per kept row, ``RecordBatch.from_pylist``), and the Pandas form's input
(``to_pandas``, then ``itertuples`` and a DataFrame per key group, as the worker regroups)
and output with a vectorized keep. It also prints what the Pandas form makes of a
nullable BIGINT 2^53 + 1 and a NaN DOUBLE, the values it must keep exact.

    python -m benchmarks.processor_transport [--rows 200000]
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import time
from collections.abc import Iterator

GROUPS = 128


def main() -> int:
    import pandas as pd
    import pyarrow as pa
    from pyspark.sql import Row
    from pyspark.sql.conversion import ArrowBatchTransformer, PandasToArrowConversion
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import DoubleType, LongType, StructField, StructType, TimestampType

    from flowc.spark import generated_runtime

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    rows = parser.parse_args().rows
    ids = [(i * 7919) % 1000 for i in range(rows)]
    order = sorted(range(rows), key=lambda i: hash(ids[i]) % GROUPS)
    start = datetime.datetime(2023, 11, 14)
    batch = pa.RecordBatch.from_pydict({
        "id": [ids[i] for i in order],
        "v": order,
        "ts": [start + datetime.timedelta(milliseconds=i * 10) for i in order],
        "ms": [1_700_000_000_000 + i * 10 for i in order],
        "g": [hash(ids[i]) % GROUPS for i in order],
    })
    out_type = StructType([
        StructField("id", LongType()), StructField("v", LongType()),
        StructField("ts", TimestampType()),
    ])

    def per_row(started: float, count: int) -> str:
        return f"{(time.perf_counter() - started) / count * 1e6:6.2f} us/row"

    started = time.perf_counter()
    data_row = Row(*batch.schema.names)
    groups: dict[object, list[Row]] = {}
    for r in range(batch.num_rows):
        key = (batch[4][r].as_py(),)
        row = data_row(*(batch.column(i)[r].as_py() for i in range(batch.num_columns)))
        groups.setdefault(key, []).append(row)
    print(f"row form, input (as_py per cell):         {per_row(started, rows)}")

    class Mark:
        def getCurrentWatermarkInMs(self) -> int:
            return 0

    generated_runtime.Row = Row  # type: ignore[attr-defined]  # the program's import
    processor = generated_runtime.DeduplicateWithin(["id"], "ms", "g", 60_000, None)
    started = time.perf_counter()
    kept = [
        out for key, group in groups.items()
        for out in processor.handleInputRows(key, iter(group), Mark())  # type: ignore[arg-type]
    ]
    print(f"DeduplicateWithin's own work:             {per_row(started, rows)}")
    started = time.perf_counter()
    arrow_type = to_arrow_type(out_type, timezone="UTC", prefers_large_types=False)
    pa.RecordBatch.from_pylist([r.asDict(True) for r in kept], schema=pa.schema(list(arrow_type)))
    print(f"row form, output per kept row:            {per_row(started, len(kept))}")

    wrapped = StructType([StructField("_0", out_type)])
    started = time.perf_counter()
    frames = ArrowBatchTransformer.to_pandas(batch, timezone="UTC", prefer_int_ext_dtype=True)
    stream: Iterator[tuple[object, object]] = (
        (r[4], r) for r in pd.concat(frames, axis=1).itertuples(index=False)
    )
    chunks = [
        pd.DataFrame([r for _, r in group])
        for _, group in itertools.groupby(stream, key=lambda x: x[0])
    ]
    print(f"Pandas form, input (per key group):       {per_row(started, rows)}")
    started = time.perf_counter()
    for chunk in chunks:
        chunk = chunk.sort_values("ms", kind="stable")
        PandasToArrowConversion.convert(
            [chunk.loc[~chunk["id"].duplicated(), ["id", "v", "ts"]]], wrapped,
            timezone="UTC", safecheck=True, arrow_cast=True, assign_cols_by_name=True,
            int_to_decimal_coercion_enabled=False,
        )
    print(f"Pandas form, keep and output:             {per_row(started, rows)}")

    edge = pa.RecordBatch.from_pydict({
        "x": pa.array([2**53 + 1, None], pa.int64()),
        "d": pa.array([float("nan"), None], pa.float64()),
    })
    edge_type = StructType([
        StructField("_0", StructType([
            StructField("x", LongType()), StructField("d", DoubleType()),
        ])),
    ])
    for ext in (False, True):
        frame = pd.DataFrame(list(pd.concat(
            ArrowBatchTransformer.to_pandas(edge, timezone="UTC", prefer_int_ext_dtype=ext),
            axis=1,
        ).itertuples(index=False)))
        back = PandasToArrowConversion.convert(
            [frame], edge_type, timezone="UTC", safecheck=True, arrow_cast=True,
            assign_cols_by_name=True, int_to_decimal_coercion_enabled=False,
        )
        print(f"Pandas form, preferIntExtensionDtype={ext}: "
              f"[2**53 + 1, NULL], [NaN, NULL] -> {back.column(0).to_pylist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
