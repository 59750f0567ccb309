"""What a streaming run leaves in state when it stops, and what that means for results.

Flink ends bounded input with a final watermark that fires every window; Spark does not:
when ``--available-now`` finishes (or Ctrl-C stops a run, or a query fails), the last
windows, sessions and unmatched outer-join rows are still in state, waiting for later
input to move the watermark past them. flowc says so, per stateful operator, instead of
letting the missing rows pass unnoticed. Read from Spark's last progress of each query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from flowc.spark.spark_plan import SparkPlan, SparkQuery

#: Spark's watermark before any event time was seen.
NO_WATERMARK = "1970-01-01T00:00:00.000Z"


@dataclass(frozen=True, slots=True)
class HeldState:
    """One stateful operator's state when the run stopped."""

    operator: str
    line: int
    kind: str
    rows: int
    watermark: str | None
    note: str

    def to_json(self) -> dict[str, object]:
        return {
            "operator": self.operator,
            "line": self.line,
            "kind": self.kind,
            "rows_in_state": self.rows,
            "complete_up_to": self.watermark,
            "note": self.note,
        }


def held_state(
    plan: SparkPlan, query: SparkQuery, progress: Mapping[str, object] | None
) -> list[HeldState]:
    """The query's stateful operators with the rows Spark still holds for each."""
    if not progress or not query.stateful:
        return []
    raw = progress.get("stateOperators") or []
    operators = [o for o in raw if isinstance(o, Mapping)] if isinstance(raw, list) else []
    event_time = progress.get("eventTime")
    watermark = (
        _readable(str(event_time["watermark"]))
        if isinstance(event_time, Mapping)
        and event_time.get("watermark") not in (None, NO_WATERMARK)
        else None
    )
    nodes = [plan.stateful[i] for i in query.stateful]
    # Spark lists state operators from the sink upstream; flowc's nodes run in node order.
    counts = [int(str(o.get("numRowsTotal") or 0)) for o in reversed(operators)]
    if len(counts) != len(nodes):  # cannot pair them: one line for the whole query
        total = sum(counts)
        names = ", ".join(n.name for n in nodes)
        return [
            HeldState(
                names,
                nodes[0].span.line,
                "query",
                total,
                watermark,
                _note("query", total, watermark),
            )
        ]
    return [
        HeldState(
            n.name,
            n.span.line,
            n.operator,
            rows,
            watermark,
            _note(
                "changelog join" if _changelog_join(plan, n.id) else n.operator,
                rows,
                watermark,
                n.id in plan.within_deduplicators,
            ),
        )
        for n, rows in zip(nodes, counts, strict=True)
    ]


def _changelog_join(plan: SparkPlan, node: int) -> bool:
    """Whether the node is a JOIN over a CDC source's changes (flowc's ChangelogJoin): it
    emits its padded rows at once, and no watermark holds any back."""
    processor = plan.changelog_processors.get(node)
    return processor is not None and processor.kind == "JOIN"


def _readable(watermark: str) -> str:
    """``2026-01-01T12:03:10.000Z`` → ``2026-01-01 12:03:10`` (UTC)."""
    text = watermark.replace("T", " ").removesuffix("Z")
    return text.removesuffix(".000")


def _note(kind: str, rows: int, watermark: str | None, within: bool = False) -> str:
    if rows == 0:
        return "nothing held: every result is written"
    until = f"after {watermark}" if watermark is not None else "at any time (no watermark yet)"
    if kind == "window" and watermark is None:
        return (
            "windows with no watermark to close them (none yet, or processing time): each "
            "was written as it grew (update or complete mode), and its state stays"
        )
    if kind == "window":
        return (
            f"windows ending {until} are still open: they close when later input moves the "
            "watermark past them"
        )
    if kind == "changelog join":
        return (
            "rows of both sides kept for later changes to meet: every joined (or padded) "
            "row was written as its changes arrived, none waits for a watermark"
        )
    if kind == "join":
        return (
            "rows wait for matches; unmatched rows of an outer join are written once later "
            f"input moves the watermark past their time bound (complete up to {watermark})"
            if watermark is not None
            else "rows wait for matches; unmatched rows of an outer join wait for a watermark"
        )
    if kind == "deduplicate" and within:
        return (
            "keys remembered with their kept row's time, so that repeats within the interval "
            "are dropped; each is forgotten once the watermark passes that time plus the "
            "interval"
        )
    if kind == "deduplicate":
        return "keys remembered, so that later repeats are dropped"
    if kind in ("keyed_aggregate", "aggregate"):
        return "running results per key: later input updates them"
    if watermark is None:
        return "rows held in state; no watermark yet to complete results"
    return f"rows held in state; results complete up to {watermark}"


def state_lines(query: str, held: Sequence[HeldState]) -> list[str]:
    """The terminal lines for one query's held state (none when nothing is held)."""
    return [
        f"[{query}] {h.operator} (line {h.line}) holds {h.rows} rows in state: {h.note}\n"
        for h in held
        if h.rows
    ]
