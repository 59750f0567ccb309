"""The streaming rule of the OVER step (a SQL SELECT's OVER aggregates): its processor
(docs/language.md, "OVER windows") emits a row once the watermark reaches its time, so the
ORDER BY column must carry one, and it runs only on the RocksDB store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowc.analyze.state_store import store_other_than_rocksdb
from flowc.errorcodes import Code
from flowc.program import OverStep

if TYPE_CHECKING:
    from flowc.spark.streaming import Lineage, Query, _OncePerPlace


def check_over_time(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0751: an OVER ordered by a column without a watermark (Flink orders one by a time
    attribute; without a watermark no row would ever be emitted); E0753: a store other
    than RocksDB, which Spark's transformWithState refuses."""
    settings = lineage.program.settings
    if settings.execution_mode == "batch":
        return
    for step in query.stateful:
        if not isinstance(step, OverStep):
            continue
        order = step.node.order
        watermarked = lineage.columns_before(query.insert, step)
        if order.value not in watermarked:
            reporter.error(
                Code.E0751,
                f"an OVER window on a stream is ordered by an event-time column, and "
                f"'{order.value}' carries no watermark here",
                order.span,
                help="ORDER BY the column the source's WATERMARK is on, before any step "
                "that drops its watermark",
            )
            continue
        chosen = store_other_than_rocksdb(settings)
        if chosen is not None:
            reporter.error(
                Code.E0753,
                "an OVER window runs as a stateful processor on Spark, which needs the "
                f"RocksDB state store, and the job sets {chosen}",
                step.span,
                help="SET state.backend.type = 'rocksdb' (or leave it out)",
            )
