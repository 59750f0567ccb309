"""Spark Structured Streaming's rules, checked at compile time (its UnsupportedOperationChecker).

Each INSERT runs as one streaming query; Spark refuses some combinations of stateful
operators, watermarks and output modes only when the query starts. flowc reports them
at the step that causes them, with what to change, before Spark is ever started.
"""

from __future__ import annotations

from collections.abc import Iterator

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
        #: watermarked() by (id(stream), upto): views are read by many streams.
        self._watermarks: dict[tuple[int, int | None], frozenset[str]] = {}
        #: Per INSERT (by id of its stream): where each step of its lineage stands.
        self._places: dict[int, dict[int, tuple[Stream, int]]] = {}

    # ------------------------------------------------------------ watermarks

    def watermarked(self, stream: Stream, upto: int | None = None) -> frozenset[str]:
        """Columns that carry an event-time watermark after the stream's steps.

        Memoized, and what it reads (upstream views, JOIN and UNION ALL inputs) is worked
        out first with an explicit stack: a chain of thousands of views needs no deep
        recursion, and a view read by many others is worked out once.
        """
        memo = self._watermarks
        key = (id(stream), upto)
        found = memo.get(key)
        if found is not None:
            return found
        pending = [(stream, upto)]
        while pending:
            current, until = pending[-1]
            if (id(current), until) in memo:
                pending.pop()
                continue
            missing = [
                (s, u) for s, u in self._watermark_inputs(current, until) if (id(s), u) not in memo
            ]
            if missing:
                pending.extend(missing)
                continue
            pending.pop()
            memo[(id(current), until)] = self._watermarked(current, until)
        return memo[key]

    def _origin_stream(self, stream: Stream) -> tuple[Stream, int | None] | None:
        """The view stream a stream starts from, and up to which step of it (a side output
        holds the rows of its ROUTE step); None for a source."""
        origin = stream.origin
        if isinstance(origin, FromView):
            return self.program.view(origin.name).stream, None
        if isinstance(origin, FromSideOutput):
            view = self.program.view(origin.view)
            output = next(o for o in view.side_outputs if o.name == origin.output)
            return view.stream, output.step_index + 1
        return None

    def _watermark_inputs(
        self, stream: Stream, upto: int | None
    ) -> list[tuple[Stream, int | None]]:
        """The streams whose watermarks :meth:`_watermarked` reads."""
        read = self._origin_stream(stream)
        inputs: list[tuple[Stream, int | None]] = [read] if read is not None else []
        for step in stream.steps[:upto]:
            if step.kind == "join":
                inputs.append((step.inputs[0], None))
            elif step.kind == "union":
                inputs.extend((other, None) for other in step.inputs)
        return inputs

    def _watermarked(self, stream: Stream, upto: int | None) -> frozenset[str]:
        """:meth:`watermarked`, once what it reads is known."""
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

        A step the query runs more than once (a view read twice: a self-join, a UNION ALL
        of the same input) is listed twice, not once per path to it: the paths can be
        exponentially many (a ladder of views each reading the one before twice), and the
        checks only ask whether a second stateful operator runs. So the part of the lineage
        below a (stream, upto) is walked twice at most: after that every step in it is
        listed twice already. An explicit stack rather than nested generators, which made a
        chain of n views cost n squared (each step passed up through every generator below).
        """
        steps: list[Step] = []
        walked: dict[tuple[int, int | None], int] = {}
        stack: list[tuple[Stream, int | None] | Step] = [(stream, upto)]
        while stack:
            item = stack.pop()
            if not isinstance(item, tuple):
                steps.append(item)
                continue
            stream, upto = item
            key = (id(stream), upto)
            times = walked.get(key, 0)
            if times == 2:
                continue
            walked[key] = times + 1
            read = self._origin_stream(stream)
            todo: list[tuple[Stream, int | None] | Step] = [read] if read is not None else []
            for step in stream.steps[:upto]:
                todo.extend((other, None) for other in step.inputs)
                todo.append(step)
            stack.extend(reversed(todo))
        listed: dict[int, int] = {}
        twice: list[Step] = []
        for step in steps:  # a step under two side outputs' (stream, upto) came more often
            times = listed.get(id(step), 0)
            if times < 2:
                listed[id(step)] = times + 1
                twice.append(step)
        return twice

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
        places = self._places.get(id(insert.stream))
        if places is None:
            places = self._places[id(insert.stream)] = _places(self.program, insert.stream)
        found = places.get(id(target))
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
        if node.within is None:
            return
        watermarked = self._columns_before(insert, step)
        if not watermarked:
            self.reporter.error(
                "E0707",
                "DEDUPLICATE ... WITHIN needs a WATERMARK on the stream",
                node.within.span,
                help="declare a WATERMARK in the source, or drop WITHIN to keep every key forever",
            )
            return
        # WITHIN means: a repeat less than the interval (by event time) from the kept row of
        # its key is dropped, a later one is kept. Spark's only bounded deduplication,
        # dropDuplicatesWithinWatermark, keeps a key until the watermark passes the first
        # row's time plus the watermark *delay*, and drops every repeat in between: in the
        # same micro-batch at any distance, later ones for as long as the watermark lags. No
        # interval and delay make that the interval's rule, so every WITHIN is refused here
        # (docs/language.md, "DEDUPLICATE WITHIN on Spark").
        self.reporter.error(
            "E0708",
            f"Spark cannot honour WITHIN {' '.join(node.within.text.split())}: "
            "dropDuplicatesWithinWatermark drops repeats until the watermark passes the first "
            "row's time plus the watermark delay, whatever the interval",
            node.within.span,
            help=_exact_deduplicate(node, watermarked),
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


def _exact_deduplicate(node: ast.Deduplicate, watermarked: frozenset[str]) -> str:
    """What to write instead of DEDUPLICATE ... WITHIN: deduplications Spark runs exactly."""
    time = next(
        (
            c.tree.name
            for c in node.columns
            if isinstance(c.tree, exp.Column) and c.tree.name in watermarked
        ),
        None,
    )
    if not node.columns:
        time = min(watermarked)
        return (
            f"drop WITHIN: a whole-row DEDUPLICATE compares '{time}' too, so Spark drops "
            f"copies of a row and forgets each once the watermark passes its '{time}'"
        )
    on = ", ".join(" ".join(c.text.split()) for c in node.columns)
    if time is not None:
        return (
            f"drop WITHIN: with '{time}' among the ON columns Spark drops copies of an event "
            f"and forgets each once the watermark passes it (DEDUPLICATE ON {on})"
        )
    time = min(watermarked)
    return (
        f"drop WITHIN to keep every key forever (DEDUPLICATE ON {on}), or add the "
        f"watermarked '{time}' to ON to drop copies of an event and forget each once the "
        f"watermark passes it (DEDUPLICATE ON {on}, {time})"
    )


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


def _places(program: Program, stream: Stream) -> dict[int, tuple[Stream, int]]:
    """Where each step (by id) stands that a search from ``stream`` finds first: the stream
    holding it and its index there, searching each step's inputs after it, then upstream
    views. One walk for all steps, each stream searched once (a search per step, from the
    top and without remembering searched streams, was exponential on ladders of views)."""
    places: dict[int, tuple[Stream, int]] = {}
    searched = {id(stream)}
    stack = [_search(program, stream)]
    while stack:
        found = next(stack[-1], None)
        if found is None:
            stack.pop()
            continue
        holder, index, step = found
        if step is not None:
            places.setdefault(id(step), (holder, index))
        elif id(holder) not in searched:
            searched.add(id(holder))
            stack.append(_search(program, holder))
    return places


def _search(program: Program, stream: Stream) -> Iterator[tuple[Stream, int, Step | None]]:
    """What a search of ``stream`` meets, in order: each step (with the stream and index),
    then the streams it reads (with no step), then the upstream view's stream."""
    for index, step in enumerate(stream.steps):
        yield stream, index, step
        for other in step.inputs:
            yield other, -1, None
    origin = stream.origin
    if isinstance(origin, FromView):
        yield program.view(origin.name).stream, -1, None
    if isinstance(origin, FromSideOutput):
        yield program.view(origin.view).stream, -1, None
