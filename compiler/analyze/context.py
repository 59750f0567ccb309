"""The state that analysis shares: what every checker reads and adds to.

One :class:`Context` per run, made once the settings are read; its collections fill up
as the statements are checked in order, so a checker sees exactly what was defined
before its statement.
"""

from __future__ import annotations

from dataclasses import field

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.fast_dataclass import dataclass
from flowc.program import InsertDef, Settings, SinkDef, SourceDef, ViewDef
from flowc.spans import Span
from flowc.sql.functions import SparkExpressionChecks
from flowc.trust import policy as trust
from flowc.vocabulary import DefinitionKind

DefinitionNode = ast.CreateSource | ast.CreateSink | ast.CreateView


@dataclass(frozen=True, slots=True)
class Definition:
    """A name's first definition."""

    kind: DefinitionKind
    node: DefinitionNode
    order: int


@dataclass(frozen=True, slots=True)
class Context:
    """``definitions`` holds every statement's name up front (to explain a reference to a
    later one); ``defined`` those checked so far; ``sources``, ``sinks`` and ``views`` the
    ones that passed their checks."""

    reporter: Reporter
    file: str
    statements: tuple[ast.Statement, ...]
    policy: trust.TrustPolicy
    overrides: tuple[trust.Override, ...]
    settings: Settings
    checks: SparkExpressionChecks  # typing, then Spark's function and literal checks
    definitions: dict[str, Definition]
    defined: set[str] = field(default_factory=set)
    sources: dict[str, SourceDef] = field(default_factory=dict)
    sinks: dict[str, SinkDef] = field(default_factory=dict)
    views: dict[str, ViewDef] = field(default_factory=dict)
    inserts: list[InsertDef] = field(default_factory=list)
    used: set[str] = field(default_factory=set)
    read_errors: set[str] = field(default_factory=set)  # sources whose 'errors' output is read
    on_error_spans: dict[str, Span] = field(default_factory=dict)
    applied_overrides: set[str] = field(default_factory=set)
