"""compare_operator: one stateful operator in two versions of a query, aspect by aspect
(kind, keys, values, identity, scale, watermark, the steps around it).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from flowc.flink.keygroups import compute_operator_index_for_key_group
from flowc.state.findings import Finding, OperatorComparison, Verdict, ways_out
from flowc.state.manifest import (
    PROCESSOR_KIND,
    AggregateState,
    JoinState,
    ParameterRule,
    ProcessorState,
    QueryState,
    StateColumn,
    StatefulOperator,
)
from flowc.vocabulary import StateKind

#: The processor of a TOP keeping each group's first row by event time, whose state is
#: not the min_by aggregation's the same TOP ran as before (flowc.state.describe).
ROWTIME_FIRST = "RowtimeFirstRow"


def compare_operator(
    old_query: QueryState,
    new_query: QueryState,
    old: StatefulOperator,
    new: StatefulOperator,
    renames: Mapping[str, str],
) -> OperatorComparison:
    findings: list[Finding] = []
    query = new_query.name
    help_ = ways_out(query)

    def incompatible(aspect: str, message: str) -> None:
        before, after = old.location, new.location
        if aspect == "keys" and old.keys_location is not None and new.keys_location is not None:
            before, after = old.keys_location, new.keys_location
        shown = f"was: {before.text} (line {before.line})"
        findings.append(
            Finding(Verdict.INCOMPATIBLE, aspect, f"{message}; {shown}", help_, before, after)
        )

    def note(verdict: Verdict, aspect: str, message: str, help: str | None = None) -> None:
        findings.append(Finding(verdict, aspect, message, help, old.location, new.location))

    def lineage(text: str) -> str:
        for a, b in renames.items():
            text = re.sub(rf"(?<![\w.]){re.escape(a)}\.", _literally(f"{b}."), text)
        return text

    if old.kind != new.kind:
        incompatible(
            "kind",
            f"{new.name} is a {_kind_name(new.kind)} where the state holds a "
            f"{_kind_name(old.kind)}: Spark would read one operator's state as another's",
        )
    else:
        _compare_keys(old, new, lineage, incompatible, note)
        _compare_values(old, new, lineage, incompatible, note)
    _compare_identity(old, new, incompatible, note)
    if new.kind != PROCESSOR_KIND:  # a stateless processor: nothing to rescale
        _compare_scale(old_query, new_query, old, new, note)
    if old.watermarks != new.watermarks:
        shown_old = ", ".join(f"{w.column} - {w.delay}" for w in old.watermarks) or "none"
        shown_new = ", ".join(f"{w.column} - {w.delay}" for w in new.watermarks) or "none"
        note(
            Verdict.COMPATIBLE,
            "watermark",
            f"the watermark reaching {new.name} changed ({shown_old} → {shown_new}): the state "
            "is kept; results and state are dropped at the new watermark from now on",
        )
    if not findings and old_query.steps != new_query.steps:
        changes = _step_changes(old_query.steps, new_query.steps)
        note(
            Verdict.COMPATIBLE,
            "steps",
            f"steps around {new.name} changed ({changes}); its state means the same and is "
            "kept, and the change applies to rows from now on",
        )
    verdict = max((f.verdict for f in findings), key=lambda v: v.rank, default=Verdict.UNCHANGED)
    return OperatorComparison(query, old, new, verdict, tuple(findings))


def _literally(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement for re.sub that is ``text`` as it is (no escapes)."""
    return lambda _: text


def _kind_name(kind: str) -> str:
    return kind.replace("_", " ")


#: The old lineage text with renamed sources' names replaced by the new ones.
_Lineage = Callable[[str], str]
#: Records an incompatible finding: (aspect, message).
_Incompatible = Callable[[str, str], None]


class _Note(Protocol):
    """Records a finding that keeps the state (compatible or rescaled)."""

    def __call__(
        self, verdict: Verdict, aspect: str, message: str, help: str | None = None
    ) -> None: ...


def _compare_keys(
    old: StatefulOperator,
    new: StatefulOperator,
    lineage: _Lineage,
    incompatible: _Incompatible,
    note: _Note,
) -> None:
    what = "deduplicated columns" if old.kind == StateKind.DEDUPLICATE else "keys"
    if old.kind == StateKind.JOIN:
        return  # the join's keys are compared with the join
    problem = _columns_problem(old.keys, new.keys, lineage, what)
    if problem is not None:
        incompatible("keys", f"{new.name}: {problem}")
    elif [k.name for k in old.keys] != [k.name for k in new.keys]:
        note(
            Verdict.COMPATIBLE,
            "names",
            f"{new.name}: {what} renamed ({_names(old.keys)} → {_names(new.keys)}), same values",
        )


def _columns_problem(
    old: Sequence[StateColumn], new: Sequence[StateColumn], lineage: _Lineage, what: str
) -> str | None:
    """Why state keyed on ``old`` cannot be read as keyed on ``new``, or None."""
    old_shown, new_shown = _shown_columns(old), _shown_columns(new)
    if len(old) != len(new):
        return f"the {what} are now ({new_shown}), were ({old_shown})"
    old_lineage = [lineage(c.lineage) for c in old]
    new_lineage = [c.lineage for c in new]
    if old_lineage != new_lineage and sorted(old_lineage) == sorted(new_lineage):
        return (
            f"the {what} are reordered: ({new_shown}), were ({old_shown}); Spark would pair "
            "each stored key with the wrong columns"
        )
    one = what.removesuffix("s")
    for a, b, la, lb in zip(old, new, old_lineage, new_lineage, strict=True):
        if a.type != b.type:
            return f"{one} '{b.name}' is {b.type}, was {a.type} ('{a.name}')"
        if la != lb:
            same = " of the same name and type" if a.name == b.name else " of the same type"
            return (
                f"{one} '{b.name}' is now {lb}, "
                f"was {la}: another column{same}, whose old state Spark would merge in"
            )
    return None


def _compare_values(
    old: StatefulOperator,
    new: StatefulOperator,
    lineage: _Lineage,
    incompatible: _Incompatible,
    note: _Note,
) -> None:
    if old.aggregates or new.aggregates:
        a, b = old.aggregates, new.aggregates
        if len(a) != len(b):
            incompatible(
                "aggregates",
                f"{new.name} now computes {_aggs(b)}, was {_aggs(a)}: the state holds one "
                "value per aggregate of the old list",
            )
        else:
            for x, y in zip(a, b, strict=True):
                if x.function != y.function or x.type != y.type:
                    same = (
                        " of the same type: Spark would go on from the old values as if they were "
                        f"{y.function}s"
                        if x.type == y.type
                        else ""
                    )
                    incompatible(
                        "aggregates",
                        f"{new.name}: '{y.name}' is now {y.sql} ({y.type}), was {x.sql} "
                        f"({x.type}){same}",
                    )
                    break
                if lineage(x.lineage) != y.lineage:
                    incompatible(
                        "aggregates",
                        f"{new.name}: '{y.name}' now aggregates {y.lineage}, was {x.lineage}: "
                        "the stored values were computed from another expression",
                    )
                    break
            else:
                if [x.name for x in a] != [y.name for y in b]:
                    note(
                        Verdict.COMPATIBLE,
                        "names",
                        f"{new.name}: aggregates renamed ({', '.join(x.name for x in a)} → "
                        f"{', '.join(y.name for y in b)}), same values",
                    )
    if old.window != new.window:
        wa, wb = old.window, new.window
        if wa is None or wb is None:
            incompatible("window", f"{new.name}: the window changed")
        elif (wa.kind, wa.size, wa.slide) != (wb.kind, wb.size, wb.slide):
            incompatible(
                "window",
                f"{new.name}: the window is now {wb.shown()}, was {wa.shown()}: the state holds "
                "the old windows, which Spark would go on filling and closing as new ones",
            )
        elif lineage(wa.time.lineage) != wb.time.lineage:
            incompatible(
                "window",
                f"{new.name}: the window's time column is now {wb.time.lineage}, was "
                f"{wa.time.lineage}",
            )
    if old.within != new.within:
        incompatible(
            "within",
            f"{new.name}: WITHIN is now {new.within or 'none'}, was {old.within or 'none'}",
        )
    if old.join is not None and new.join is not None:
        _compare_join(old.join, new.join, new.name, lineage, incompatible)
    if old.processor is not None and new.processor is not None:
        _compare_processor(old.processor, new.processor, new.name, lineage, incompatible, note)
    elif ROWTIME_FIRST in {p.name for p in (old.processor, new.processor) if p is not None}:
        # Spark's min_by aggregation and the processor keep a TOP's state differently
        was, now = (
            (p.name if p is not None else "Spark's min_by aggregation")
            for p in (old.processor, new.processor)
        )
        incompatible(
            "processor",
            f"{new.name} now runs as {now}, its state was kept by {was}: one would read the "
            "other's state with another meaning",
        )


def _compare_processor(
    a: ProcessorState,
    b: ProcessorState,
    name: str,
    lineage: _Lineage,
    incompatible: _Incompatible,
    note: _Note,
) -> None:
    """A generated processor's state, by its parameters' rules (:class:`ParameterRule`):
    generic, so a new processor class only describes itself."""
    if a.name != b.name:
        incompatible(
            "processor",
            f"{name} now runs as {b.name}, its state was kept by {a.name}: another "
            "processor would read it with another meaning",
        )
        return
    for before in a.parameters:
        after = b.parameter(before.name)
        old_value = lineage(before.value)
        if after is None:
            if before.rule != ParameterRule.FREE:
                incompatible(
                    "processor",
                    f"{name}: {a.name}'s {before.name} ({before.value}) is gone: {before.why}",
                )
                return
            continue
        if old_value == after.value:
            continue
        change = f"{a.name}'s {before.name} is now {after.value or 'none'}, was {before.value}"
        if before.rule == ParameterRule.FREE:
            note(
                Verdict.COMPATIBLE,
                "processor",
                f"{name}: {change}; the state is kept ({before.why}), and rows emitted from "
                "now on get the new value",
            )
        elif (
            before.rule == ParameterRule.AT_MOST
            and before.amount is not None
            and after.amount is not None
            and after.amount <= before.amount
        ):
            note(
                Verdict.COMPATIBLE,
                "processor",
                f"{name}: {change}; the state kept what the old, wider one needs, which "
                "covers the new one",
            )
        else:
            incompatible("processor", f"{name}: {change}: {before.why}")
            return
    added = [
        p for p in b.parameters if a.parameter(p.name) is None and p.rule != ParameterRule.FREE
    ]
    if added:
        first = added[0]
        incompatible(
            "processor",
            f"{name}: {b.name} now has {first.name} {first.value}, which its state was not "
            f"kept for: {first.why}",
        )
        return
    if [(c.type, lineage(c.lineage)) for c in a.row] != [(c.type, c.lineage) for c in b.row]:
        incompatible(
            "processor",
            f"{name}: the rows {b.name} stores are now ({_shown_columns(b.row)}), were "
            f"({_shown_columns(a.row)}): it would read its stored rows by the old columns' "
            "places",
        )


def _compare_join(
    a: JoinState, b: JoinState, name: str, lineage: _Lineage, incompatible: _Incompatible
) -> None:
    if a.type != b.type:
        incompatible(
            "join",
            f"{name} is now a {b.type} join, was {a.type}: the state keeps rows for the old "
            "join type (an outer join keeps unmatched rows until its bound passes)",
        )
        return
    for side, old_keys, new_keys in (
        ("left", a.left_keys, b.left_keys),
        ("right", a.right_keys, b.right_keys),
    ):
        problem = _columns_problem(old_keys, new_keys, lineage, f"{side} join keys")
        if problem is not None:
            incompatible("join", f"{name}: {problem}")
            return
    if a.bound != b.bound:
        incompatible(
            "join",
            f"{name}: the join's time bound is now {b.bound or 'none'}, was {a.bound or 'none'}: "
            "the state was kept and evicted for the old bound",
        )
        return
    for side, old_row, new_row in (
        ("left", a.left_row, b.left_row),
        ("right", a.right_row, b.right_row),
    ):
        if [(c.type, lineage(c.lineage)) for c in old_row] != [
            (c.type, c.lineage) for c in new_row
        ]:
            incompatible(
                "join",
                f"{name}: the {side} side's rows are now ({_shown_columns(new_row)}), were "
                f"({_shown_columns(old_row)}): the join keeps both sides' rows in state",
            )
            return


def _compare_identity(
    old: StatefulOperator, new: StatefulOperator, incompatible: _Incompatible, note: _Note
) -> None:
    if old.uid is not None and new.uid != old.uid:
        now = f"'{new.uid}'" if new.uid is not None else "gone"
        incompatible(
            "uid",
            f"{new.name}: its uid is now {now}, was '{old.uid}': the uid names the operator's "
            "state (Flink maps state to operators by it and would not restore this one; Spark "
            "finds state by position only)",
        )
    elif old.uid is None and new.uid is not None:
        note(
            Verdict.COMPATIBLE,
            "uid",
            f"{new.name} was given uid '{new.uid}': Spark finds state by position and keeps it; "
            f"on Flink its operator id changes ({old.operator_id} → {new.operator_id}), so a "
            "Flink savepoint would need setUidHash",
        )
    elif old.uid is None and old.operator_id != new.operator_id:
        note(
            Verdict.COMPATIBLE,
            "operator_id",
            f"{new.name}: Flink's generated operator id changes ({old.operator_id} → "
            f"{new.operator_id}) because the steps before it changed; Spark keeps the state "
            "(on Flink, give it a uid)",
        )


def _compare_scale(
    old_query: QueryState,
    new_query: QueryState,
    old: StatefulOperator,
    new: StatefulOperator,
    note: _Note,
) -> None:
    partitions = old_query.state_partitions
    restart = f"flowc run --reset-state {new_query.name}"
    if old.parallelism != new.parallelism and new_query.shuffle_partitions == partitions:
        note(
            Verdict.COMPATIBLE,
            "parallelism",
            f"{new.name}: parallelism {old.parallelism} → {new.parallelism}: back to the "
            f"{partitions} partitions Spark keeps the state in; "
            f"{_key_groups_moving(old, new)}",
        )
    elif old.parallelism != new.parallelism:
        flink = _key_groups_moving(old, new)
        note(
            Verdict.RESCALED,
            "parallelism",
            f"{new.name}: parallelism {old.parallelism} → {new.parallelism}: the checkpoint "
            f"keeps the state in {partitions} partitions; flowc run repartitions it into "
            f"{new_query.shuffle_partitions} before the query starts (Spark's offline state "
            f"repartition); {flink}",
            "the repartition needs the RocksDB store and Spark 4.2 or later (else flowc run "
            f"refuses, E0826: set the parallelism back to {partitions}, or start over with "
            f"{restart})",
        )
    if old.max_parallelism != new.max_parallelism:
        note(
            Verdict.RESCALED,
            "max_parallelism",
            f"{new.name}: max parallelism {old.max_parallelism} → {new.max_parallelism}: Spark "
            f"ignores it (the state stays in {partitions} partitions); Flink would refuse to "
            f"restore this operator's keyed state ({old.key_groups} key groups, now "
            f"{new.key_groups})",
            "keep max_parallelism as it was to stay restorable on Flink",
        )


def _key_groups_moving(old: StatefulOperator, new: StatefulOperator) -> str:
    """On Flink, which key groups change subtask when only parallelism changes."""
    if old.max_parallelism != new.max_parallelism:
        return "on Flink the key groups change too (max parallelism changed)"
    m = new.max_parallelism
    moved = [
        g
        for g in range(m)
        if compute_operator_index_for_key_group(m, old.parallelism, g)
        != compute_operator_index_for_key_group(m, new.parallelism, g)
    ]
    ranges = _ranges(moved)
    shown = ", ".join(ranges[:4]) + (", ..." if len(ranges) > 4 else "")
    return f"on Flink {len(moved)} of its {m} key groups would move to another subtask" + (
        f" ({shown})" if moved else ""
    )


def _ranges(values: Sequence[int]) -> list[str]:
    out: list[str] = []
    start = previous = None
    for value in values:
        if start is None:
            start = previous = value
        elif previous is not None and value == previous + 1:
            previous = value
        else:
            out.append(f"{start}-{previous}" if start != previous else f"{start}")
            start = previous = value
    if start is not None:
        out.append(f"{start}-{previous}" if start != previous else f"{start}")
    return out


def _step_changes(old: Sequence[str], new: Sequence[str]) -> str:
    parts = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag in ("delete", "replace"):
            parts += [f"removed {s}" for s in old[i1:i2]]
        if tag in ("insert", "replace"):
            parts += [f"added {s}" for s in new[j1:j2]]
    text = "; ".join(parts)
    return text if len(text) <= 300 else text[:297] + "..."


def _names(columns: Sequence[StateColumn]) -> str:
    return ", ".join(c.name for c in columns)


def _shown_columns(columns: Sequence[StateColumn]) -> str:
    return ", ".join(c.shown() for c in columns)


def _aggs(aggregates: Sequence[AggregateState]) -> str:
    return ", ".join(a.sql for a in aggregates) or "nothing"
