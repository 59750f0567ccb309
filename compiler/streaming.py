"""Spark Structured Streaming's rules, checked at compile time (its UnsupportedOperationChecker).

Each INSERT runs as one streaming query; Spark refuses some combinations of stateful
operators, watermarks and output modes only when the query starts. flowc reports them
at the step that causes them, with what to change, before Spark is ever started.
"""

from __future__ import annotations

from sqlglot import exp

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.program import (
    FromSideOutput,
    FromSource,
    FromSourceErrors,
    FromView,
    InsertDef,
    Program,
    Step,
    Stream,
)
from flowc.spans import Span

STATEFUL = frozenset({"aggregate", "window_aggregate", "deduplicate", "join"})


def check_streaming(program: Program, reporter: Reporter) -> Program:
    checker = _Checker(program, reporter)
    for insert in program.inserts:
        checker.check_insert(insert)
    return program


class _Checker:
    def __init__(self, program: Program, reporter: Reporter) -> None:
        self.program = program
        self.reporter = _OncePerPlace(reporter)

    # ------------------------------------------------------------ watermarks

    def watermarked(self, stream: Stream, upto: int | None = None) -> frozenset[str]:
        """Columns that carry an event-time watermark after the stream's steps."""
        origin = stream.origin
        if isinstance(origin, FromSource):
            watermark = self.program.source(origin.name).watermark
            columns = frozenset({watermark.column} if watermark else ())
        elif isinstance(origin, FromView):
            columns = self.watermarked(self.program.view(origin.name).stream)
        elif isinstance(origin, FromSourceErrors):
            columns = frozenset()  # a malformed record's event time is unknown
        else:
            view = self.program.view(origin.view)
            output = next(o for o in view.side_outputs if o.name == origin.output)
            columns = self.watermarked(view.stream, upto=output.step_index + 1)
        for step in stream.steps[:upto]:
            columns = self._after(step, columns)
        return columns

    def _after(self, step: Step, columns: frozenset[str]) -> frozenset[str]:
        node = step.node
        if isinstance(node, ast.Select | ast.Extend):
            kept = set(columns) if isinstance(node, ast.Extend) else set()
            for item in node.items:
                tree = item.expr.tree
                if isinstance(tree, exp.Column) and tree.name in columns:
                    kept.add(item.alias.value if item.alias else tree.name)
            return frozenset(kept)
        if isinstance(node, ast.Drop):
            return columns - {c.value for c in node.columns}
        if isinstance(node, ast.Rename):
            renamed = {i.old.value: i.new.value for i in node.items}
            return frozenset(renamed.get(c, c) for c in columns)
        if step.kind in ("aggregate", "window_aggregate"):
            return frozenset()
        if step.kind == "join":
            return columns | self.watermarked(step.inputs[0])
        if step.kind == "union":
            for other in step.inputs:
                columns &= self.watermarked(other)
            return columns
        return columns

    # ------------------------------------------------------------ one query

    def lineage(self, stream: Stream, upto: int | None = None) -> list[Step]:
        """Every step the query runs: upstream views' first, then the stream's own.

        An explicit stack rather than nested generators, which made a chain of n views cost
        n squared (each step passed up through every generator below it).
        """
        steps: list[Step] = []
        stack: list[tuple[Stream, int | None] | Step] = [(stream, upto)]
        while stack:
            item = stack.pop()
            if not isinstance(item, tuple):
                steps.append(item)
                continue
            stream, upto = item
            todo: list[tuple[Stream, int | None] | Step] = []
            origin = stream.origin
            if isinstance(origin, FromView):
                todo.append((self.program.view(origin.name).stream, None))
            elif isinstance(origin, FromSideOutput):
                view = self.program.view(origin.view)
                output = next(o for o in view.side_outputs if o.name == origin.output)
                todo.append((view.stream, output.step_index + 1))
            for step in stream.steps[:upto]:
                todo.extend((other, None) for other in step.inputs)
                todo.append(step)
            stack.extend(reversed(todo))
        return steps

    def check_insert(self, insert: InsertDef) -> None:
        sink = self.program.sink(insert.sink)
        mode = sink.mode
        steps = self.lineage(insert.stream)
        stateful = [s for s in steps if s.kind in STATEFUL]
        aggregations = [s for s in stateful if s.kind in ("aggregate", "window_aggregate")]
        where = f"INSERT INTO {insert.sink} (mode '{mode}')"
        if mode == "complete" and not aggregations:
            self.reporter.error(
                "E0701",
                f"{where}: complete mode needs an aggregation",
                insert.span,
                help="complete mode rewrites the whole result each batch; use mode = 'append' "
                "or 'update', or AGGREGATE the stream",
            )
        if len(stateful) > 1 and mode != "append":
            second = stateful[1]
            self.reporter.error(
                "E0702",
                f"{where}: Spark runs several stateful operators in one query only in append mode",
                _keyword(second),
                help="write this query with mode = 'append' (windowed aggregates over "
                "watermarked columns), or split it into two jobs",
            )
        for step in aggregations:
            self.check_aggregation(step, insert, mode, where)
        for step in stateful:
            if step.kind == "join":
                self.check_join(step, insert)
            elif step.kind == "deduplicate":
                self.check_deduplicate(step, insert)

    def _columns_before(self, insert: InsertDef, target: Step) -> frozenset[str]:
        """Watermarked columns at the input of ``target`` (found in the query's lineage)."""
        found = _locate(self.program, insert.stream, target)
        if found is None:
            return frozenset()
        stream, index = found
        return self.watermarked(stream, upto=index)

    def check_aggregation(self, step: Step, insert: InsertDef, mode: str, where: str) -> None:
        window = step.window
        if window is not None and window.kind == "SESSION" and mode == "update":
            self.reporter.error(
                "E0703",
                f"{where}: Spark does not support session windows in update mode",
                window.keyword_span,
                help="write with mode = 'append' (with a watermark) or 'complete'",
            )
        if mode != "append":
            return
        if window is None:
            self.reporter.error(
                "E0704",
                f"{where}: an AGGREGATE without WINDOW never finishes a result, so it cannot "
                "be appended",
                _keyword(step),
                help="give the sink mode = 'update' or 'complete', or aggregate per WINDOW over "
                "a column with a WATERMARK",
            )
            return
        time_column = window.args[0].tree
        columns = self._columns_before(insert, step)
        if isinstance(time_column, exp.Column) and time_column.name not in columns:
            self.reporter.error(
                "E0705",
                f"{where}: a window is appended only once the watermark passes its end, and "
                f"'{time_column.name}' has no WATERMARK",
                window.args[0].span,
                help=f"declare WATERMARK FOR {time_column.name} AS {time_column.name} - "
                "INTERVAL 5 SECONDS in the source, or write with mode = 'update'",
            )

    def check_join(self, step: Step, insert: InsertDef) -> None:
        node = step.node
        assert isinstance(node, ast.Join)
        if node.kind == "INNER":
            return
        left = self._columns_before(insert, step)
        right = self.watermarked(step.inputs[0])
        condition = node.condition
        bounded = condition is not None and _has_time_bound(condition.tree, left | right)
        if not left or not right or not bounded:
            missing = []
            if not left or not right:
                missing.append("a WATERMARK on both sides")
            if not bounded:
                missing.append(
                    "a time bound in ON (e.g. b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 HOUR)"
                )
            self.reporter.error(
                "E0706",
                f"a {node.kind} OUTER stream-stream JOIN needs {' and '.join(missing)}",
                node.keyword_span,
                help="Spark can emit the unmatched rows of an outer join only once the "
                "watermark rules out later matches",
            )

    def check_deduplicate(self, step: Step, insert: InsertDef) -> None:
        node = step.node
        assert isinstance(node, ast.Deduplicate)
        if node.within is not None and not self._columns_before(insert, step):
            self.reporter.error(
                "E0707",
                "DEDUPLICATE ... WITHIN needs a WATERMARK on the stream",
                node.within.span,
                help="declare a WATERMARK in the source, or drop WITHIN to keep every key forever",
            )


class _OncePerPlace:
    """A step in a view runs in every query that reads the view: report its problem once."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.seen: set[tuple[str, Span]] = set()

    def error(self, code: str, message: str, span: Span, help: str | None = None) -> None:
        if (code, span) not in self.seen:
            self.seen.add((code, span))
            self.reporter.error(code, message, span, help)


def _keyword(step: Step) -> Span:
    return step.window.keyword_span if step.window is not None else step.node.keyword_span


def _has_time_bound(condition: exp.Expr, watermarked: frozenset[str]) -> bool:
    """A range condition (BETWEEN, <, <=, >, >=) that reads a watermarked column."""
    for node in condition.walk():
        if isinstance(node, exp.Between | exp.LT | exp.LTE | exp.GT | exp.GTE) and any(
            c.name in watermarked for c in node.find_all(exp.Column)
        ):
            return True
    return False


def _locate(program: Program, stream: Stream, target: Step) -> tuple[Stream, int] | None:
    """The stream holding ``target`` and its index there, searching upstream views too."""
    for index, step in enumerate(stream.steps):
        if step is target:
            return stream, index
        for other in step.inputs:
            found = _locate(program, other, target)
            if found is not None:
                return found
    origin = stream.origin
    if isinstance(origin, FromView):
        return _locate(program, program.view(origin.name).stream, target)
    if isinstance(origin, FromSideOutput):
        return _locate(program, program.view(origin.view).stream, target)
    return None
