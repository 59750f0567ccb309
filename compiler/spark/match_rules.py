"""The Spark rules of MATCH_RECOGNIZE (docs/language.md#match_recognize): streaming, its
processor feeds a key's rows to the pattern once the watermark passes them, so the ORDER
BY column must carry one, and it keeps state only on the RocksDB store; batch mode feeds
each key's rows at once and keeps no state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from flowc.analyze.state_store import store_other_than_rocksdb
from flowc.errorcodes import Code
from flowc.program import MatchStep

if TYPE_CHECKING:
    from flowc.spark.streaming import Lineage, Query, _OncePerPlace


def check_match_time(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0759, streaming: MATCH_RECOGNIZE ordered by a column without a watermark, or on a
    store other than RocksDB (Spark's transformWithState refuses the others)."""
    settings = lineage.program.settings
    for step in query.stateful:
        if not isinstance(step, MatchStep):
            continue
        if settings.execution_mode == "batch":
            continue  # every row at once, in time order: no watermark, no state kept
        order = step.node.order
        if order.value not in lineage.columns_before(query.insert, step):
            reporter.error(
                Code.E0759,
                f"MATCH_RECOGNIZE is ordered by an event-time column, and '{order.value}' "
                "carries no watermark here",
                order.span,
                help="ORDER BY the column the table's WATERMARK is on (Flink orders a "
                "MATCH_RECOGNIZE by its rowtime attribute)",
            )
            continue
        chosen = store_other_than_rocksdb(settings)
        if chosen is not None:
            reporter.error(
                Code.E0759,
                "MATCH_RECOGNIZE runs as a stateful processor on Spark, which needs the "
                f"RocksDB state store, and the job sets {chosen}",
                step.node.keyword_span,
                help="SET state.backend.type = 'rocksdb' (or leave it out)",
            )
