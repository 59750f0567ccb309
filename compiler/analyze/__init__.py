"""Semantic analysis: AST → checked :class:`~flowc.program.Program`.

Resolves names (sources, views, sinks, side outputs; use before definition,
duplicates, cycles), reads settings, hints and connector options, and carries a typed
schema through every step. Problems go to the reporter and analysis goes on, so one
run reports every error in the file; a statement with errors is left out of the result.

Each concern is a module of its own, sharing one :class:`~flowc.analyze.context.Context`:
``settings`` (settings and hints), ``connectors`` (sources and sinks), ``references``
(names and cycles), ``query`` with its step checkers (``row_steps``, ``grouping_steps``,
``input_steps``), ``views`` (views and inserts) and ``program_checks`` (whole-program
checks). Analysis works on its own copy of the SQL trees (``own_copy``).

May import: the core modules, :mod:`flowc.flink`, :mod:`flowc.sql`,
:mod:`flowc.syntax` and :mod:`flowc.trust`. It also owns two decisions later stages read:
the state store (``state_store``) and an upsert sink's key (``upsert_sinks``), and a
job's test form (``test_form``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from flowc import ast
from flowc.analyze.connectors import check_sink, check_source
from flowc.analyze.context import Context
from flowc.analyze.own_copy import with_own_sql
from flowc.analyze.program_checks import CHECKS
from flowc.analyze.references import declare
from flowc.analyze.settings import read_settings
from flowc.analyze.udfs import declare_functions
from flowc.analyze.views import check_insert, check_view
from flowc.diagnostics import Reporter
from flowc.program import Program, Settings
from flowc.sql.functions import SparkExpressionChecks
from flowc.sql.python_functions import PythonFunction
from flowc.sql.sql_forms import expand_sql_forms
from flowc.trust import policy as trust

__all__ = ["analyze"]


def analyze(
    tree: ast.Program,
    reporter: Reporter,
    overrides: Mapping[str, str] | None = None,
    policy: trust.TrustPolicy | None = None,
    functions: Sequence[PythonFunction] = (),
) -> Program:
    """``overrides`` are ``flowc run --set KEY=VALUE``: a setting, applied as if set by
    ``SET``, or ``source_or_sink.option``; ``policy`` is how far the program is trusted
    (:mod:`flowc.trust.policy`); ``functions`` the Python callables the embedding gives. ``tree``
    is left as it is."""
    start = len(reporter.diagnostics)
    given = overrides or {}
    program = _analyze(
        with_own_sql(tree), reporter, given, policy or trust.TrustPolicy(), functions
    )
    trust.label_command_line(reporter, start, given)
    return program


def _analyze(
    tree: ast.Program,
    reporter: Reporter,
    given: Mapping[str, str],
    policy: trust.TrustPolicy,
    python_functions: Sequence[PythonFunction],
) -> Program:
    overrides = tuple(trust.read_overrides(given, reporter))
    if not trust.check_program(tree, overrides, policy, reporter):
        # A query inside an expression: its columns would only add follow-on errors.
        return Program(
            file=tree.file,
            settings=Settings(),
            sources=(),
            sinks=(),
            views=(),
            inserts=(),
            span=tree.span,
        )
    # CTEs and subqueries in FROM: hidden views defined before the statement holding them.
    tree = replace(tree, statements=expand_sql_forms(tree.statements, reporter))
    settings = read_settings(tree, overrides, reporter)
    functions, broken = declare_functions(tree, python_functions, policy, reporter)
    ctx = Context(
        reporter=reporter,
        file=tree.file,
        statements=tree.statements,
        policy=policy,
        overrides=overrides,
        settings=settings,
        checks=SparkExpressionChecks.for_settings(settings, functions, broken),
        definitions=declare(tree.statements, reporter),
    )
    for order, statement in enumerate(tree.statements):
        if isinstance(statement, ast.CreateSource):
            check_source(ctx, statement)
        elif isinstance(statement, ast.CreateSink):
            check_sink(ctx, statement)
        elif isinstance(statement, ast.CreateView):
            check_view(ctx, statement)
        elif isinstance(statement, ast.Insert):
            check_insert(ctx, statement, order)
    program = Program(
        file=tree.file,
        settings=settings,
        sources=tuple(ctx.sources.values()),
        sinks=tuple(ctx.sinks.values()),
        views=tuple(ctx.views.values()),
        inserts=tuple(ctx.inserts),
        span=tree.span,
        functions=tuple(functions.values()),
        function_calls=tuple(ctx.checks.calls),
    )
    for check in CHECKS:
        check(ctx, program)
    return program
