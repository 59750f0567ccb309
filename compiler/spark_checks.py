"""What the Spark backend cannot write, found before any code is generated.

Run by the Spark-plan pass where Spark is the target (``flowc check``, ``flowc run``,
``--emit pyspark``: ``compile(..., for_spark=True)``), where they are errors like Spark's
streaming rules; plan-only compiles skip them (they write every expression as Spark SQL).
Each check calls the very helper code generation calls (:mod:`flowc.spark_sql`), so a
program that passes can always be generated.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.program import Program, Step, Stream
from flowc.spark_distinct import UnsupportedDistinct, rewrite_distinct
from flowc.spark_sql import (
    UnsupportedOnSpark,
    datagen_supports,
    sql_of,
    watermark_delay,
)


def check_spark(program: Program, reporter: Reporter) -> None:
    for source in program.sources:
        if source.watermark is not None:
            try:
                watermark_delay(source)
            except UnsupportedOnSpark as error:
                reporter.error(
                    Code.E0724,
                    f"Spark cannot run this watermark: {error}",
                    source.watermark.span,
                    help="write WATERMARK FOR ts AS ts - INTERVAL <delay>",
                )
        if source.connector == "datagen":
            for column in source.schema:
                if not datagen_supports(column.type):
                    reporter.error(
                        Code.E0725,
                        f"the Spark backend's datagen cannot generate '{column.name} "
                        f"{column.type}'",
                        source.span,
                    )
    for view in program.views:
        _check_stream(view.stream, reporter)
    for insert in program.inserts:
        _check_stream(insert.stream, reporter)


def _check_stream(stream: Stream, reporter: Reporter) -> None:
    for step in stream.steps:
        _check_step(step, reporter)


def _check_step(step: Step, reporter: Reporter) -> None:
    if isinstance(step.node, ast.Aggregate):
        for item in step.node.items:
            try:
                rewrite_distinct(item.expr.tree)
            except UnsupportedDistinct as error:
                reporter.error(
                    Code.E0240,
                    f"Spark cannot run this distinct aggregate on a stream: {error}",
                    item.expr.span,
                    help="write count(DISTINCT x) or sum/avg/min/max(DISTINCT x), or "
                    "approx_count_distinct(x) for an estimate",
                )
    for expr in _expressions(step.node):
        try:
            sql_of(expr)
        except UnsupportedOnSpark as error:
            reporter.error(
                Code.E0720,
                f"the Spark backend {error}",
                expr.span,
                help="check the number and types of the function's arguments",
            )


def _expressions(node: object) -> Iterator[ast.SqlExpr]:
    """Every SQL expression inside an AST node, in field order."""
    if isinstance(node, ast.SqlExpr):
        yield node
    elif isinstance(node, tuple):
        for item in node:
            yield from _expressions(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for field in dataclasses.fields(node):
            yield from _expressions(getattr(node, field.name))
