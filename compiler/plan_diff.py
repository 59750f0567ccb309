"""The ``flowc diff`` API in one place: :func:`diff_plans` and the :class:`DiffReport` that
``flowc diff`` prints.

The code is in :mod:`flowc.diff` (its docstring says how operators are matched); this
module is the name the CLI and ``docs/state.md`` use.
"""

from flowc.diff.changes import PlanDiff
from flowc.diff.plans import diff_plans
from flowc.diff.report import DIFF_SCHEMA_VERSION, CheckpointCheck, DiffReport

__all__ = ["DIFF_SCHEMA_VERSION", "CheckpointCheck", "DiffReport", "PlanDiff", "diff_plans"]
