"""compare: two state manifests, query by query; aligns each query's stateful operators
as Spark numbers them and names what was added, removed or moved.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace

from flowc.state.findings import (
    Finding,
    OperatorComparison,
    QueryComparison,
    StateComparison,
    Verdict,
    plural,
    ways_out,
)
from flowc.state.manifest import (
    PROCESSOR_KIND,
    QueryState,
    SinkWrite,
    StatefulOperator,
    StateManifest,
)
from flowc.state.operator_compare import compare_operator
from flowc.state.options import option_findings


def compare(old: StateManifest, new: StateManifest) -> StateComparison:
    """Classify every stateful operator of every query (see the module's docstring)."""
    if old.version < 2:
        new = _as_version_1(new)
    queries = []
    new_names = {q.name for q in new.queries}
    for query in new.queries:
        queries.append(_compare_query(old.query(query.name), query))
    for query in old.queries:
        if query.name not in new_names:
            queries.append(_compare_query(query, None))
    return StateComparison(tuple(queries))


def _as_version_1(manifest: StateManifest) -> StateManifest:
    """``manifest`` as a version 1 manifest lists operators: without the stateless
    processors (CURRENT_WATERMARK's), the others numbered again, so a manifest of an older
    flowc is compared as it was written rather than as missing them."""
    queries = []
    for query in manifest.queries:
        kept = [o for o in query.operators if o.kind != PROCESSOR_KIND]
        operators = tuple(replace(o, index=i) for i, o in enumerate(kept))
        queries.append(replace(query, operators=operators))
    return replace(manifest, queries=tuple(queries))


def _compare_query(old: QueryState | None, new: QueryState | None) -> QueryComparison:
    if new is None:
        assert old is not None
        finding = Finding(
            Verdict.INCOMPATIBLE,
            "query",
            f"query '{old.name}' was removed: the state of its "
            f"{plural(len(old.operators), 'stateful operator')} is left behind",
            "its checkpoint stays where it is; delete it once the query is gone for good",
            old.location,
            None,
        )
        operators = tuple(
            OperatorComparison(old.name, o, None, Verdict.INCOMPATIBLE, ()) for o in old.operators
        )
        return QueryComparison(old.name, old, None, (finding,), operators)
    if old is None:
        operators = tuple(
            OperatorComparison(new.name, None, o, Verdict.UNCHANGED, ()) for o in new.operators
        )
        return QueryComparison(new.name, None, new, (), operators)
    findings = list(_query_findings(old, new))
    operators = _compare_operators(old, new)
    return QueryComparison(new.name, old, new, tuple(findings), operators)


def _query_findings(old: QueryState, new: QueryState) -> Iterator[Finding]:
    name = new.name
    renames = _source_renames(old, new)
    old_where = Counter(s.where for s in old.sources)
    new_where = Counter(s.where for s in new.sources)
    if old_where != new_where or (
        not renames and {s.name for s in old.sources} != {s.name for s in new.sources}
    ):
        old_names = {s.name for s in new.sources} | set(renames)
        gone = [s.shown() for s in old.sources if s.name not in old_names]
        added = [s.shown() for s in new.sources if s.name not in {*old_names, *renames.values()}]
        gone = gone or [s.shown() for s in old.sources if new_where[s.where] < old_where[s.where]]
        added = added or [s.shown() for s in new.sources if new_where[s.where] > old_where[s.where]]
        parts = []
        if gone:
            parts.append(f"no longer reads {', '.join(gone)}")
        if added:
            parts.append(f"now reads {', '.join(added)}")
        yield Finding(
            Verdict.INCOMPATIBLE,
            "sources",
            f"query '{name}' {' and '.join(parts) or 'reads other sources'}: Spark's "
            "checkpoint records its sources' offsets by position and cannot go on with "
            "other sources",
            ways_out(name),
            old.location,
            new.location,
        )
    elif renames:
        shown = ", ".join(f"'{a}' → '{b}'" for a, b in renames.items())
        yield Finding(
            Verdict.COMPATIBLE,
            "sources",
            f"query '{name}': source renamed ({shown}), same data",
            None,
            old.location,
            new.location,
        )
    yield from _sink_findings(old, new)
    yield from option_findings(old, new)
    yield from _function_findings(old, new)
    if new.operators and old.operators and new.shuffle_partitions != old.shuffle_partitions:
        explained = {o.parallelism for o in old.operators} != {o.parallelism for o in new.operators}
        if not explained:
            yield Finding(
                Verdict.RESCALED,
                "shuffle_partitions",
                f"query '{name}': spark.sql.shuffle.partitions is now "
                f"{new.shuffle_partitions}; the checkpoint keeps this query's state in "
                f"{old.state_partitions} partitions, and flowc run repartitions it into "
                f"{new.shuffle_partitions} before the query starts (Spark's offline state "
                "repartition)",
                "the repartition needs the RocksDB store and Spark 4.2 or later (else flowc "
                f"run refuses, E0826: set it back, or start over with flowc run "
                f"--reset-state {name})",
                old.location,
                new.location,
            )


def _sink_findings(old: QueryState, new: QueryState) -> Iterator[Finding]:
    a, b = old.sink, new.sink
    name = new.name
    if (a.connector == "files") != (b.connector == "files") or (
        a.connector == "files" and (a.path, a.format) != (b.path, b.format)
    ):
        before = f"{a.connector}" + (f" {a.path}" if a.path else "")
        after = f"{b.connector}" + (f" {b.path}" if b.path else "")
        yield Finding(
            Verdict.INCOMPATIBLE,
            "sink",
            f"query '{name}' now writes {after}, not {before}: a file sink's commit log and "
            "the checkpoint's batch ids go together, and Spark does not allow a file sink's "
            "folder to change",
            ways_out(name),
            a.location,
            b.location,
        )
    elif (a.connector, a.path, a.format, a.mode, a.name) != (
        b.connector,
        b.path,
        b.format,
        b.mode,
        b.name,
    ):
        yield Finding(
            Verdict.COMPATIBLE,
            "sink",
            f"query '{name}': its sink changed ({_sink_shown(a)} → {_sink_shown(b)}); the "
            "state is kept",
            None,
            a.location,
            b.location,
        )


def _function_findings(old: QueryState, new: QueryState) -> Iterator[Finding]:
    """A Python function the query calls whose code changed: refused where a stateful
    operator keeps what it computes (the state would mix both functions' values), a
    warning where it feeds the output only (rows from now on are the new code's)."""
    if old.functions is None or new.functions is None:
        return  # a manifest of an older flowc: not recorded
    before = {f.name: f for f in old.functions}
    for function in new.functions:
        was = before.get(function.name)
        if was is None:
            continue  # newly called: the expressions that call it changed, and say so
        changes = []
        if was.target != function.target:
            changes.append(f"now runs {function.target}, was {was.target}")
        elif (
            was.digest is not None and function.digest is not None and was.digest != function.digest
        ):
            where = f" in {function.file}" if function.file else ""
            changes.append(
                f"its code{where} changed (the function or what it uses of its module: "
                f"digest {was.digest[:8]} → {function.digest[:8]})"
            )
        if not changes:
            if was.module_digest != function.module_digest and was.digest == function.digest:
                yield Finding(
                    Verdict.COMPATIBLE,
                    "functions",
                    f"function '{function.name}': its module's file changed, but not the "
                    "function's code nor what it uses of the module (comments, docstrings and "
                    "layout do not count)",
                    None,
                    was.location,
                    function.location,
                )
            continue
        what = f"function '{function.name}' ({function.target}) {'; '.join(changes)}"
        if "state" in (was.feeds, function.feeds):
            yield Finding(
                Verdict.INCOMPATIBLE,
                "functions",
                f"{what}: query '{new.name}' keeps values it computed in state, and Spark "
                "would go on from them, mixing the old function's values with the new one's; "
                f"was: {was.location.text} (line {was.location.line})",
                "revert the function; or keep the old state and start this query over with a "
                f"new --checkpoint-dir, or with flowc run --reset-state {new.name} (moves its "
                "old checkpoint aside, never deletes it); or declare the new code under "
                "another name, so the state's expressions change too",
                was.location,
                function.location,
            )
        else:
            yield Finding(
                Verdict.COMPATIBLE,
                "functions",
                f"{what}: it feeds only the output of query '{new.name}', which no state "
                "keeps: rows from now on are the new code's, rows written before keep the old "
                "code's values",
                "if rows written before must be recomputed, start this query over (flowc run "
                f"--reset-state {new.name})",
                was.location,
                function.location,
                warning=True,
            )


def _sink_shown(sink: SinkWrite) -> str:
    where = f" {sink.path}" if sink.path else ""
    return f"{sink.connector}{where}, mode {sink.mode}"


def _source_renames(old: QueryState, new: QueryState) -> dict[str, str]:
    """Old source name → new, for sources that read the same data under another name
    (only where that data is read by one source on each side)."""
    old_where = Counter(s.where for s in old.sources)
    new_where = Counter(s.where for s in new.sources)
    by_where = {s.where: s.name for s in new.sources if new_where[s.where] == 1}
    return {
        s.name: by_where[s.where]
        for s in old.sources
        if old_where[s.where] == 1 and s.where in by_where and by_where[s.where] != s.name
    }


def _signature(operator: StatefulOperator) -> str:
    """What aligns operators between two versions: the uid, else kind and keys' names."""
    if operator.uid is not None:
        return f"uid:{operator.uid}"
    return f"{operator.kind}:{','.join(k.name for k in operator.keys)}"


def _compare_operators(old: QueryState, new: QueryState) -> tuple[OperatorComparison, ...]:
    """Spark matches state to operators by index; the alignment names what moved."""
    renames = _source_renames(old, new)
    out: list[OperatorComparison] = []
    a = [_signature(o) for o in old.operators]
    b = [_signature(o) for o in new.operators]
    same_count = len(a) == len(b)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and same_count and i2 - i1 == j2 - j1):
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                out.append(compare_operator(old, new, old.operators[i], new.operators[j], renames))
            continue
        for i in range(i1, i2):
            operator = old.operators[i]
            out.append(
                OperatorComparison(
                    old.name,
                    operator,
                    None,
                    Verdict.INCOMPATIBLE,
                    (_removed(new, operator),),
                )
            )
        for j in range(j1, j2):
            operator = new.operators[j]
            out.append(
                OperatorComparison(
                    new.name, None, operator, Verdict.INCOMPATIBLE, (_added(old, new, operator),)
                )
            )
    # Operators kept but at another index: Spark would give them another's state.
    moved = [
        o for o in out if o.old is not None and o.new is not None and o.old.index != o.new.index
    ]
    if moved:
        result = []
        for o in out:
            if o in moved:
                assert o.old is not None and o.new is not None
                finding = Finding(
                    Verdict.INCOMPATIBLE,
                    "order",
                    f"{o.new.name} is now Spark's stateful operator {o.new.index}, not "
                    f"{o.old.index}: Spark finds state by position, so it would read the "
                    "state of another operator",
                    ways_out(new.name),
                    o.old.location,
                    o.new.location,
                )
                o = OperatorComparison(
                    o.query, o.old, o.new, Verdict.INCOMPATIBLE, (*o.findings, finding)
                )
            result.append(o)
        out = result
    return tuple(out)


def _removed(new: QueryState, operator: StatefulOperator) -> Finding:
    return Finding(
        Verdict.INCOMPATIBLE,
        "removed",
        f"the stateful step {operator.name} was removed from query '{new.name}' "
        f"(was: {operator.location.text} (line {operator.location.line})): Spark finds state "
        "by the operator's position and would not start, or would give its state to another",
        ways_out(new.name),
        operator.location,
        new.location,
    )


def _added(old: QueryState, new: QueryState, operator: StatefulOperator) -> Finding:
    # Spark numbers from the sink upstream: index - 1 runs after it, index + 1 before it.
    after = [o for o in new.operators if o.index == operator.index - 1]
    before = [o for o in new.operators if o.index == operator.index + 1]
    where = (
        f" before {after[0].name} (line {after[0].location.line})"
        if after
        else f" after {before[0].name} (line {before[0].location.line})"
        if before
        else ""
    )
    return Finding(
        Verdict.INCOMPATIBLE,
        "added",
        f"a stateful step was added{where} to query '{new.name}': "
        f"{operator.location.text}; Spark finds state by position, and the checkpoint holds "
        f"the state of {plural(len(old.operators), 'stateful operator')}",
        ways_out(new.name),
        None,
        operator.location,
    )
