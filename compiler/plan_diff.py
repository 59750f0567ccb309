"""The ``flowc diff`` API in one place: :func:`diff_plans` and the :class:`DiffReport` that
``flowc diff`` prints, with the records they are made of.

The code is in :mod:`flowc.diff` (its docstring says how operators are matched); this
module is the name the CLI and ``docs/state.md`` use.
"""

from flowc.diff.changes import (
    UID_HELP,
    ChainRef,
    ChangeKind,
    EdgeRef,
    ExchangeChange,
    IdChangeReason,
    OperatorIdChange,
    OperatorRef,
    ParallelismChange,
    PlanDiff,
    SparkChange,
    SparkChangeKind,
    VertexChange,
    VertexChangeKind,
)
from flowc.diff.plans import diff_plans
from flowc.diff.report import DIFF_SCHEMA_VERSION, CheckpointCheck, DiffReport

__all__ = [
    "DIFF_SCHEMA_VERSION",
    "UID_HELP",
    "ChainRef",
    "ChangeKind",
    "CheckpointCheck",
    "DiffReport",
    "EdgeRef",
    "ExchangeChange",
    "IdChangeReason",
    "OperatorIdChange",
    "OperatorRef",
    "ParallelismChange",
    "PlanDiff",
    "SparkChange",
    "SparkChangeKind",
    "VertexChange",
    "VertexChangeKind",
    "diff_plans",
]
